package collectors

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/store"
)

var (
	classLabels  = labelList("runtime_class", "storage_class")
	perPodLabels = labelList("namespace", "pod", "uid", "node", "runtime_class", "storage_class")

	sandboxCreationDuration = &Family{
		Name: "podslo_sandbox_creation_duration_seconds", Type: "histogram", Stability: Alpha,
		Help:   "Time from PodScheduled to the first PodReadyToStartContainers=True of each pod (KEP-3085), observed once per pod UID.",
		Labels: classLabels, HistogramLabels: true,
	}
	sandboxRecreations = &Family{
		Name: "podslo_sandbox_recreations_total", Type: "counter", Stability: Alpha,
		Help:   "Sandboxes that became ready again after the first one was lost, e.g. after a node or VM crash.",
		Labels: classLabels, HistogramLabels: true,
	}
	podSandboxCreation = &Family{
		Name: "podslo_pod_sandbox_creation_seconds", Type: "gauge", Stability: Alpha,
		Help:   "Per pod: time from PodScheduled to the first sandbox readiness.",
		Labels: perPodLabels, PodLabels: true,
	}
	podSandboxRecreations = &Family{
		Name: "podslo_pod_sandbox_recreations_total", Type: "counter", Stability: Alpha,
		Help:   "Per pod: sandbox re-creations after the first sandbox became ready.",
		Labels: perPodLabels, PodLabels: true,
	}
	sandboxFamilies = []*Family{sandboxCreationDuration, sandboxRecreations, podSandboxCreation, podSandboxRecreations}

	// sandboxPerPod says how each per-pod family reads a pod's state; a
	// pod without a value has no series in that family.
	sandboxPerPod = []perPodFamily{
		{podSandboxCreation, func(st *lifecycle.State) (float64, bool) {
			return float64(st.SandboxCreation), st.HasSandboxCreation
		}},
		{podSandboxRecreations, func(st *lifecycle.State) (float64, bool) {
			return float64(st.Recreations), st.FirstSandboxReady != 0
		}},
	}
)

// Sandbox exports the aggregated sandbox creation SLI. Its per-pod families
// are written by PerPod.
type Sandbox struct {
	store *store.Store
	log   *slog.Logger

	creationFamily, recreationsFamily string
	creation, recreations             *prometheus.Desc
}

// NewSandbox returns the sandbox collector over s.
func NewSandbox(s *store.Store, labels Labels, log *slog.Logger) *Sandbox {
	return &Sandbox{
		store:             s,
		log:               log,
		creationFamily:    lifecycle.FamilyID(lifecycle.FamilySandboxCreation, labels.Histogram),
		recreationsFamily: lifecycle.FamilyID(lifecycle.FamilySandboxRecreations, labels.Histogram),
		creation:          sandboxCreationDuration.desc(labels),
		recreations:       sandboxRecreations.desc(labels),
	}
}

// Describe implements prometheus.Collector.
func (c *Sandbox) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.creation
	ch <- c.recreations
}

// Collect implements prometheus.Collector.
func (c *Sandbox) Collect(ch chan<- prometheus.Metric) {
	bounds := c.store.Buckets()
	c.store.Aggregates(func(family string, labels []string, agg *store.Aggregate) {
		var (
			m   prometheus.Metric
			err error
		)
		switch family {
		case c.creationFamily:
			m, err = newHistogramMetric(c.creation, bounds, agg, labels)
		case c.recreationsFamily:
			m, err = prometheus.NewConstMetricWithCreatedTimestamp(c.recreations, prometheus.CounterValue, agg.Value, createdTime(agg), labels...)
		default:
			return
		}
		if err != nil {
			c.log.Error("Dropping malformed series", "family", family, "labels", labels, "err", err)
			return
		}
		ch <- m
	})
}
