package collectors

import (
	"log/slog"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/sli"
	"github.com/podslo/podslo/store"
)

// sandboxCreationPending is computed from the pods' state at scrape time,
// not from observations, so it is not in sli.Table.
var sandboxCreationPending = &sli.Family{
	Name: "podslo_sandbox_creation_pending_pods", Type: sli.Gauge, Stability: sli.Alpha,
	Help:   "Scheduled pods still waiting for their first sandbox, by whether a user error was reported for them.",
	Labels: labelList("runtime_class", "storage_class", "user_error"),
}

// aggregateDesc is an aggregated family's descriptor with its type, as
// node_exporter's typedDesc, and the values of its extra label (nil for
// none).
type aggregateDesc struct {
	desc        *prometheus.Desc
	typ         sli.Type
	extraLabel  bool
	labelValues []string
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
}

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
		histogramLabels: len(labels.Histogram), storageClasses: func() []string { return nil },
	}
	for _, a := range sli.Aggregates() {
		id := a.ID(labels.Histogram)
		d := aggregateDesc{desc: desc(a.Family(), labels), typ: a.Type, extraLabel: a.Label != ""}
		if a.Type == sli.Counter {
			c.counters = append(c.counters, id)
			d.labelValues = a.LabelValues
		}
		c.byStore[id] = d
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
		known.addSeries(labels, d.extraLabel)
		if d.typ == sli.Counter {
			exists[seriesKey(family, labels)] = true
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
		known.addPod(m)
		if st.Pending() {
			pending[key{m.RuntimeClass, m.StorageClass, boolLabel(st.UserError)}]++
		}
	})
	for k, n := range pending {
		ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(n), k.runtime, k.storage, k.userError)
	}
	known.addStorageClasses(c.storageClasses())
	c.collectZeros(ch, known, exists)
}

// collectZeros writes a 0 for each counter series not in the store yet,
// for every known label set: a counter whose series appears only with its
// first increment hides that increment from increase() (issue 26).
func (c *SLIs) collectZeros(ch chan<- prometheus.Metric, known *knownDims, exists map[string]bool) {
	var labels []string
	for _, family := range c.counters {
		d := c.byStore[family]
		extra := d.labelValues
		if extra == nil {
			extra = []string{""}
		}
		known.each(func(runtime, storage string, histogram []string) {
			for _, v := range extra {
				labels = append(labels[:0], runtime, storage)
				if d.labelValues != nil {
					labels = append(labels, v)
				}
				labels = append(labels, histogram...)
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
	runtimes        map[string]bool
	storages        map[string]bool
	histograms      map[string][]string
	// last is the latest pod's label set: pods mostly share a few, so most
	// pods cost a comparison, not three map writes.
	last struct{ runtime, storage, histogram string }
}

func newKnownDims(histogramLabels int) *knownDims {
	// "none" is the class of a pod without a runtimeClassName or a
	// PVC-backed volume: always possible.
	return &knownDims{
		histogramLabels: histogramLabels,
		runtimes:        map[string]bool{classNone: true},
		storages:        map[string]bool{classNone: true},
		histograms:      map[string][]string{},
	}
}

// classNone is informers.ClassNone, the class label of a pod without one.
const classNone = "none"

// addSeries adds the label set of an aggregated series, whose labels are the
// class labels, the family's extra label if it has one, then the histogram
// labels. A series persisted under another --histogram-label set is left
// out.
func (k *knownDims) addSeries(labels []string, extraLabel bool) {
	n := len(sli.ClassLabels) + k.histogramLabels
	if extraLabel {
		n++
	}
	if len(labels) != n {
		return
	}
	k.add(labels[0], labels[1], labels[len(labels)-k.histogramLabels:])
}

// addPod adds the label set a pod's observations would carry.
func (k *knownDims) addPod(m *store.PodMeta) {
	if m.RuntimeClass == "" || m.StorageClass == "" || len(m.HistogramLabels) != k.histogramLabels {
		return
	}
	k.add(m.RuntimeClass, m.StorageClass, m.HistogramLabels)
}

func (k *knownDims) add(runtime, storage string, histogram []string) {
	h := strings.Join(histogram, "\xff")
	if k.last.runtime == runtime && k.last.storage == storage && k.last.histogram == h {
		return
	}
	k.last.runtime, k.last.storage, k.last.histogram = runtime, storage, h
	k.runtimes[runtime], k.storages[storage] = true, true
	if _, ok := k.histograms[h]; !ok && k.histogramLabels > 0 {
		k.histograms[h] = slices.Clone(histogram)
	}
}

func (k *knownDims) addStorageClasses(names []string) {
	for _, n := range names {
		k.storages[n] = true
	}
}

// each calls fn for every runtime class × storage class × histogram label
// values. Without a pod or series to take histogram label values from, they
// are empty, which is what a pod without those labels gets.
func (k *knownDims) each(fn func(runtime, storage string, histogram []string)) {
	histograms := [][]string{make([]string, k.histogramLabels)}
	if len(k.histograms) > 0 {
		histograms = histograms[:0]
		for _, h := range k.histograms {
			histograms = append(histograms, h)
		}
	}
	for rc := range k.runtimes {
		for sc := range k.storages {
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
