package collectors

import (
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

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
	Help:   "Scheduled pods still waiting for their first sandbox, by whether a user error was reported for them and whether their creation timed out.",
	Labels: labelList("runtime_class", "storage_class", "user_error", "timed_out"),
}

// terminationsPending, like sandboxCreationPending, is computed from the
// pods' state at scrape time.
var terminationsPending = &sli.MetricFamily{
	Name: "podslo_terminations_pending_pods", Type: sli.Gauge, Stability: sli.Alpha,
	Help:   "Pods whose deletion was requested and whose sandbox is not yet gone, by whether their grace period has ended.",
	Labels: labelList("runtime_class", "storage_class", "over_grace"),
}

// aggregateDesc is an aggregated family's descriptor with its
// declaration, whose type it exposes (as node_exporter's typedDesc) and
// whose label order it writes and reads series in.
type aggregateDesc struct {
	desc *prometheus.Desc
	spec *sli.AggregateSpec
}

// SLIs exports the aggregated SLI series persisted in the store, and the
// pending-pods gauge. Per-pod families are written by PerPod.
type SLIs struct {
	store           *store.Store
	log             *slog.Logger
	byStore         map[string]aggregateDesc
	counters        []string // store family IDs of the counters, in table order
	histogramLabels int
	storageClasses  func() []string
	pending         *prometheus.Desc
	terminating     *prometheus.Desc

	// podDims are the label sets of every pod in state, taken at most once
	// per podDimsRefresh at podDimsAt: a pass over 100k pods' classes
	// costs a scrape about 20 ms, which those of the pending pods and of
	// the stored series, taken at every scrape, make up for meanwhile.
	mu        sync.Mutex
	podDims   map[dimKey][]string
	podDimsAt time.Time
}

// podDimsRefresh is how often a scrape takes the label sets of every pod.
const podDimsRefresh = time.Minute

// SLIsOption configures NewSLIs.
type SLIsOption func(*SLIs)

// WithStorageClasses names the cluster's StorageClasses (the informers'
// cache; nil until it has synced), whose counter series start at 0 before
// any pod uses them. It is called at scrape time, so it must not call the
// API server. Default: none.
func WithStorageClasses(f func() []string) SLIsOption {
	return func(c *SLIs) { c.storageClasses = f }
}

// NewSLIs returns the SLI collector over s.
func NewSLIs(s *store.Store, labels Labels, log *slog.Logger, opts ...SLIsOption) *SLIs {
	c := &SLIs{
		store: s, log: log, byStore: map[string]aggregateDesc{}, pending: desc(sandboxCreationPending, Labels{}),
		terminating:     desc(terminationsPending, Labels{}),
		histogramLabels: len(labels.Histogram), storageClasses: func() []string { return nil },
	}
	for _, a := range sli.Aggregates() {
		id := a.ID(labels.Histogram)
		if a.Type == sli.Counter {
			c.counters = append(c.counters, id)
		}
		c.byStore[id] = aggregateDesc{desc: desc(a.MetricFamily(), labels), spec: a}
	}
	for _, o := range opts {
		o(c)
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *SLIs) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.byStore {
		ch <- d.desc
	}
	ch <- c.pending
	ch <- c.terminating
}

// Collect implements prometheus.Collector.
func (c *SLIs) Collect(ch chan<- prometheus.Metric) {
	bounds := c.store.Buckets()
	known := newKnownDims(c.histogramLabels)
	exists := map[string]bool{}
	c.store.Aggregates(func(family string, labels []string, agg *store.Aggregate) {
		d, ok := c.byStore[family]
		if !ok {
			// Skips have their own collector; other families were persisted
			// under another --histogram-label set.
			return
		}
		known.addSeries(d.spec, labels)
		if d.spec.Type == sli.Counter {
			exists[seriesKey(family, labels)] = true
		}
		var (
			m   prometheus.Metric
			err error
		)
		if d.spec.Type == sli.Histogram {
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
	// timed_out: the exporter counted the pod's timeout (its
	// --sandbox-creation-timeout), which an alert needs without per-pod
	// series and without repeating the flag's value.
	type key struct{ runtime, storage, userError, timedOut string }
	pending := map[key]int{}
	type termKey struct{ runtime, storage, overGrace string }
	terminating := map[termKey]int{}
	now := time.Now()
	c.mu.Lock()
	var all *knownDims
	if now.Sub(c.podDimsAt) >= podDimsRefresh {
		all = newKnownDims(c.histogramLabels)
	}
	c.mu.Unlock()
	c.store.Pods(func(_ types.UID, st *lifecycle.State, m *store.PodMeta) {
		if all != nil {
			all.addPod(m)
		}
		if st.Pending() {
			// A pending pod's timeout may come at any scrape.
			known.addPod(m)
			pending[key{m.RuntimeClass, m.StorageClass, boolLabel(st.UserError), boolLabel(st.TimedOut)}]++
		}
		if st.TerminationPending() {
			over := now.Unix() > st.GraceEnd(m.DeletionDeadline)
			terminating[termKey{m.RuntimeClass, m.StorageClass, boolLabel(over)}]++
		}
	})
	c.mu.Lock()
	if all != nil {
		c.podDims, c.podDimsAt = all.seen, now
	}
	for k, h := range c.podDims {
		known.seen[k] = h
	}
	c.mu.Unlock()
	for k, n := range pending {
		ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(n), k.runtime, k.storage, k.userError, k.timedOut)
	}
	for k, n := range terminating {
		ch <- prometheus.MustNewConstMetric(c.terminating, prometheus.GaugeValue, float64(n), k.runtime, k.storage, k.overGrace)
	}
	known.storageClasses = c.storageClasses()
	c.collectZeros(ch, known, exists)
}

// collectZeros writes a 0 for each counter series not in the store yet,
// for every known label set: a counter whose series appears only with its
// first increment hides that increment from increase() (issue 26).
func (c *SLIs) collectZeros(ch chan<- prometheus.Metric, known *knownDims, exists map[string]bool) {
	var labels []string
	for _, family := range c.counters {
		d := c.byStore[family]
		extra := d.spec.LabelDomain
		if extra == nil {
			// No extra label: one series per label set.
			extra = []string{""}
		}
		known.each(func(runtime, storage string, histogram []string) {
			for _, v := range extra {
				labels = d.spec.AppendLabelValues(labels[:0], runtime, storage, v, histogram)
				if exists[seriesKey(family, labels)] {
					continue
				}
				ch <- prometheus.MustNewConstMetric(d.desc, prometheus.CounterValue, 0, labels...)
			}
		})
	}
}

// seriesKey names one series of a store family.
func seriesKey(family string, labels []string) string {
	return family + "\xfe" + strings.Join(labels, "\xff")
}

// knownDims are the label values the zero counter series are created for:
// the runtime and storage classes ("none", the cluster's StorageClasses,
// and those of the pods in state and of the series in the store), and the
// --histogram-label values of those pods and series. Every set comes from
// state or from a cache, so the series stay bounded by the classes in use.
type knownDims struct {
	histogramLabels int
	// seen are the label sets of the pods and series: pods mostly share a
	// few, so a pod costs one lookup.
	seen map[dimKey][]string
	// storageClasses are the cluster's, from the informers' cache.
	storageClasses []string
}

// dimKey is one label set: the classes and the joined histogram labels.
type dimKey struct{ runtime, storage, histogram string }

func newKnownDims(histogramLabels int) *knownDims {
	return &knownDims{histogramLabels: histogramLabels, seen: map[dimKey][]string{}}
}

// classNone is informers.ClassNone, the class label of a pod without one.
const classNone = "none"

// addSeries adds the label set of a series of a. A series persisted under
// another --histogram-label set is left out.
func (k *knownDims) addSeries(a *sli.AggregateSpec, labels []string) {
	if runtime, storage, histogram, ok := a.ParseLabelValues(labels, k.histogramLabels); ok {
		k.add(runtime, storage, histogram)
	}
}

// addPod adds the label set a pod's observations would carry.
func (k *knownDims) addPod(m *store.PodMeta) {
	if m.RuntimeClass == "" || m.StorageClass == "" || len(m.HistogramLabels) != k.histogramLabels {
		return
	}
	k.add(m.RuntimeClass, m.StorageClass, m.HistogramLabels)
}

func (k *knownDims) add(runtime, storage string, histogram []string) {
	key := dimKey{runtime, storage, ""}
	switch len(histogram) {
	case 0:
	case 1:
		key.histogram = histogram[0]
	default:
		key.histogram = strings.Join(histogram, "\xff")
	}
	if _, ok := k.seen[key]; !ok {
		k.seen[key] = slices.Clone(histogram)
	}
}

// each calls fn for every runtime class × storage class × histogram label
// values known. Without a pod or series to take histogram label values
// from, they are empty, which is what a pod without those labels gets.
func (k *knownDims) each(fn func(runtime, storage string, histogram []string)) {
	runtimes := map[string]bool{classNone: true}
	storages := map[string]bool{classNone: true}
	for _, sc := range k.storageClasses {
		storages[sc] = true
	}
	histograms := map[string][]string{}
	for key, h := range k.seen {
		runtimes[key.runtime], storages[key.storage] = true, true
		histograms[key.histogram] = h
	}
	if len(histograms) == 0 {
		histograms[""] = make([]string, k.histogramLabels)
	}
	for rc := range runtimes {
		for sc := range storages {
			for _, h := range histograms {
				fn(rc, sc, h)
			}
		}
	}
}

func boolLabel(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
