package collectors

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/sli"
	"github.com/podslo/podslo/store"
)

var (
	observationsSkipped = &sli.MetricFamily{
		Name: "podslo_observations_skipped_total", Type: sli.Counter, Stability: sli.Alpha,
		Help:   "Observations not made, by SLI and reason. Each pod counts at most once per SLI and reason.",
		Labels: labelList("sli", "reason"),
	}
	skippedFamilies = []*sli.MetricFamily{observationsSkipped}
)

// Skipped exports the persisted count of skipped observations.
type Skipped struct {
	store *store.Store
	log   *slog.Logger
	desc  *prometheus.Desc
}

// NewSkipped returns the skipped-observations collector over s.
func NewSkipped(s *store.Store, log *slog.Logger) *Skipped {
	return &Skipped{store: s, log: log, desc: desc(observationsSkipped, Labels{})}
}

// Describe implements prometheus.Collector.
func (c *Skipped) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *Skipped) Collect(ch chan<- prometheus.Metric) {
	exists := map[string]bool{}
	c.store.Aggregates(func(family string, labels []string, agg *store.Aggregate) {
		if family != sli.FamilySkipped {
			return
		}
		exists[seriesKey(family, labels)] = true
		m, err := prometheus.NewConstMetricWithCreatedTimestamp(c.desc, prometheus.CounterValue, agg.Value, createdTime(agg), labels...)
		if err != nil {
			c.log.Error("Dropping malformed series", "family", family, "labels", labels, "err", err)
			return
		}
		ch <- m
	})
	// Every SLI and reason starts at 0, so that increase() sees a first
	// skip (issue 26): 35 series.
	for _, sk := range lifecycle.Skips() {
		labels := []string{sk.SLI.String(), sk.Reason.String()}
		if !exists[seriesKey(sli.FamilySkipped, labels)] {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, 0, labels...)
		}
	}
}

func createdTime(agg *store.Aggregate) time.Time { return time.Unix(agg.Created, 0) }
