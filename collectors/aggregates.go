package collectors

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/sli"
	"github.com/podslo/podslo/store"
)

// sandboxCreationPending is computed from the pods' state at scrape time,
// not from observations, so it is not in sli.Table.
var sandboxCreationPending = &sli.MetricFamily{
	Name: "podslo_sandbox_creation_pending_pods", Type: sli.Gauge, Stability: sli.Alpha,
	Help:   "Scheduled pods still waiting for their first sandbox, by whether a user error was reported for them.",
	Labels: labelList("runtime_class", "storage_class", "user_error"),
}

// aggregateDesc is an aggregated family's descriptor with its type, as
// node_exporter's typedDesc.
type aggregateDesc struct {
	desc *prometheus.Desc
	typ  sli.Type
}

// SLIs exports the aggregated SLI series persisted in the store, and the
// pending-pods gauge. Per-pod families are written by PerPod.
type SLIs struct {
	store   *store.Store
	log     *slog.Logger
	byStore map[string]aggregateDesc
	pending *prometheus.Desc
}

// NewSLIs returns the SLI collector over s.
func NewSLIs(s *store.Store, labels Labels, log *slog.Logger) *SLIs {
	c := &SLIs{store: s, log: log, byStore: map[string]aggregateDesc{}, pending: desc(sandboxCreationPending, Labels{})}
	for _, a := range sli.Aggregates() {
		c.byStore[a.ID(labels.Histogram)] = aggregateDesc{desc: desc(a.MetricFamily(), labels), typ: a.Type}
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *SLIs) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.byStore {
		ch <- d.desc
	}
	ch <- c.pending
}

// Collect implements prometheus.Collector.
func (c *SLIs) Collect(ch chan<- prometheus.Metric) {
	bounds := c.store.Buckets()
	c.store.Aggregates(func(family string, labels []string, agg *store.Aggregate) {
		d, ok := c.byStore[family]
		if !ok {
			// Skips have their own collector; other families were persisted
			// under another --histogram-label set.
			return
		}
		var (
			m   prometheus.Metric
			err error
		)
		if d.typ == sli.Histogram {
			m, err = newHistogramMetric(d.desc, bounds, agg, labels)
		} else {
			m, err = prometheus.NewConstMetricWithCreatedTimestamp(d.desc, prometheus.CounterValue, agg.Value, createdTime(agg), labels...)
		}
		if err != nil {
			c.log.Error("Dropping malformed series", "family", family, "labels", labels, "err", err)
			return
		}
		ch <- m
	})
	type key struct{ runtime, storage, userError string }
	pending := map[key]int{}
	c.store.Pods(func(_ types.UID, st *lifecycle.State, m *store.PodMeta) {
		if st.Pending() {
			pending[key{m.RuntimeClass, m.StorageClass, boolLabel(st.UserError)}]++
		}
	})
	for k, n := range pending {
		ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(n), k.runtime, k.storage, k.userError)
	}
}

func boolLabel(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
