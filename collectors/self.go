package collectors

import (
	"github.com/prometheus/client_golang/prometheus"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"

	"github.com/podslo/podslo/sli"
	"github.com/podslo/podslo/store"
)

var (
	// buildInfo is client_golang's version collector: its labels are the
	// build's, stamped into prometheus/common/version by the Makefile.
	buildInfo = &sli.MetricFamily{
		Name: "podslo_build_info", Type: sli.Gauge, Stability: sli.Alpha,
		Help:   "A metric with a constant '1' value labeled by version, revision, branch, goversion from which podslo was built, and the goos and goarch for the build.",
		Labels: labelList("branch", "goarch", "goos", "goversion", "revision", "tags", "version"),
	}
	informerEvents = &sli.MetricFamily{
		Name: "podslo_informer_events_total", Type: sli.Counter, Stability: sli.Alpha,
		Help:   "Informer events handled, by resource and event (add, update, delete).",
		Labels: labelList("resource", "event"),
	}
	storeOperations = &sli.MetricFamily{
		Name: "podslo_store_operations_total", Type: sli.Counter, Stability: sli.Alpha,
		Help:   "State store operations (apply, delete, load, gc) by result (success, error).",
		Labels: labelList("operation", "result"),
	}
	storeRecoveries = &sli.MetricFamily{
		Name: "podslo_store_recoveries_total", Type: sli.Counter, Stability: sli.Alpha,
		Help: "Corrupt state directories moved aside at start-up and replaced by an empty state.",
	}
	storeTrackedPods = &sli.MetricFamily{
		Name: "podslo_store_tracked_pods", Type: sli.Gauge, Stability: sli.Alpha,
		Help: "Pods whose lifecycle state the store holds.",
	}
	storeSize = &sli.MetricFamily{
		Name: "podslo_store_size_bytes", Type: sli.Gauge, Stability: sli.Alpha,
		Help:   "Bytes the state takes on disk, by part (lsm, vlog).",
		Labels: labelList("part"),
	}
	storeWritable = &sli.MetricFamily{
		Name: "podslo_store_writable", Type: sli.Gauge, Stability: sli.Alpha,
		Help: "1 while state writes can go ahead, 0 while the state filesystem has less free space than --state-min-free.",
	}
	podWatchCurrent = &sli.MetricFamily{
		Name: "podslo_informer_pods_watch_current", Type: sli.Gauge, Stability: sli.Alpha,
		Help: "1 while every pod watch is current (open for 2s, no list or relist in flight): SLI ends are timed to the millisecond and creation timeouts are checked; 0 otherwise.",
	}
	selfFamilies = []*sli.MetricFamily{buildInfo, informerEvents, podWatchCurrent, storeOperations, storeRecoveries, storeTrackedPods, storeSize, storeWritable}
)

// NewPodWatchCurrent returns the podslo_informer_pods_watch_current gauge over
// current, the informers' view; register it on the exporter's registry.
func NewPodWatchCurrent(current func() bool) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: podWatchCurrent.Name, Help: podWatchCurrent.Help}, func() float64 {
		if current() {
			return 1
		}
		return 0
	})
}

// NewInformerEvents returns the counter the informers increment for every
// event they handle; register it on the exporter's registry.
func NewInformerEvents() *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: informerEvents.Name, Help: informerEvents.Help}, informerEvents.Labels)
}

// NewBuildInfo returns the podslo_build_info collector; register it on the
// exporter's registry.
func NewBuildInfo() prometheus.Collector {
	return versioncollector.NewCollector("podslo")
}

// Self exports the exporter's own health: store operations and size.
type Self struct {
	store                                   *store.Store
	operations, recoveries, tracked, sizeBy *prometheus.Desc
	writable                                *prometheus.Desc
}

// NewSelf returns the self-metrics collector.
func NewSelf(s *store.Store) *Self {
	return &Self{
		store:      s,
		operations: desc(storeOperations, Labels{}),
		recoveries: desc(storeRecoveries, Labels{}),
		tracked:    desc(storeTrackedPods, Labels{}),
		sizeBy:     desc(storeSize, Labels{}),
		writable:   desc(storeWritable, Labels{}),
	}
}

// Describe implements prometheus.Collector.
func (c *Self) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.operations, c.recoveries, c.tracked, c.sizeBy, c.writable} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *Self) Collect(ch chan<- prometheus.Metric) {
	stats := c.store.Stats()
	for _, op := range store.Ops {
		ch <- prometheus.MustNewConstMetric(c.operations, prometheus.CounterValue, float64(stats.Succeeded(op)), op.String(), "success")
		ch <- prometheus.MustNewConstMetric(c.operations, prometheus.CounterValue, float64(stats.Failed(op)), op.String(), "error")
	}
	ch <- prometheus.MustNewConstMetric(c.recoveries, prometheus.CounterValue, float64(stats.Recoveries.Load()))
	ch <- prometheus.MustNewConstMetric(c.tracked, prometheus.GaugeValue, float64(c.store.Len()))
	lsm, vlog := c.store.Size()
	ch <- prometheus.MustNewConstMetric(c.sizeBy, prometheus.GaugeValue, float64(lsm), "lsm")
	ch <- prometheus.MustNewConstMetric(c.sizeBy, prometheus.GaugeValue, float64(vlog), "vlog")
	writable := 0.0
	if c.store.Writable() {
		writable = 1
	}
	ch <- prometheus.MustNewConstMetric(c.writable, prometheus.GaugeValue, writable)
}
