package sli

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/podslo/podslo/lifecycle"
)

// SLI is one service level indicator: the aggregated families its
// observations feed, and the per-pod series read from each pod's state.
type SLI struct {
	Aggregates []*AggregateSpec
	PerPod     []*PodSeries
}

// AggregateSpec declares one aggregated family (store.Aggregate holds its
// values): which observations feed it, where the store keeps it, and how it
// is exposed. It carries the class labels, then Label if set, then the
// --histogram-label dimensions.
type AggregateSpec struct {
	// Kind is the lifecycle observation that feeds the family.
	Kind lifecycle.Kind
	// When, if set, keeps only the observations it is true for.
	When func(lifecycle.Observation) bool
	// Store names the family in the store. It is persisted: renaming it
	// loses the series of existing state directories.
	Store string
	Name  string
	Help  string
	// Type says what an observation does: a Histogram observes its
	// Seconds, a Counter counts one.
	Type      Type
	Stability Stability
	// Label is one more label after the class labels ("phase", "reason"),
	// empty for none; LabelValue reads its value from the observation.
	Label      string
	LabelValue func(lifecycle.Observation) string
	// LabelDomain lists every value LabelValue returns. A counter with a
	// Label needs it: its series are created at 0 for each value before
	// the first observation, so that increase() sees the first one.
	LabelDomain []string

	family *MetricFamily
}

// PodSeries is one per-pod family: its series for each pod with a value,
// labelled with PodSeriesLabels and the --pod-label labels.
type PodSeries struct {
	Name      string
	Help      string
	Type      Type // Gauge or Counter
	Stability Stability
	// Value reads the pod's state at scrape time now (Unix seconds); a pod
	// without a value has no series.
	Value func(st *lifecycle.State, now int64) (float64, bool)

	family *MetricFamily
}

// Table declares every SLI, in documentation order; the per-pod families
// are written in this order too.
var Table = []SLI{
	{
		Aggregates: []*AggregateSpec{
			{
				Kind: lifecycle.SandboxCreated, Store: "sandbox_creation",
				Name: "podslo_sandbox_creation_duration_seconds", Type: Histogram, Stability: Alpha,
				Help: "Time from PodScheduled to the first PodReadyToStartContainers=True of each pod (KEP-3085), observed once per pod UID.",
			},
			{
				Kind: lifecycle.SandboxRecreated, Store: "sandbox_recreations",
				Name: "podslo_sandbox_recreations_total", Type: Counter, Stability: Alpha,
				Help: "Sandboxes that became ready again after the first one was lost, e.g. after a node or VM crash.",
			},
			{
				Kind: lifecycle.SandboxTimedOut, Store: "sandbox_creation_timeouts",
				Name: "podslo_sandbox_creation_timeouts_total", Type: Counter, Stability: Alpha,
				Help: "Scheduled pods whose first sandbox was not ready within --sandbox-creation-timeout, counted once per pod.",
			},
			{
				Kind: lifecycle.SandboxExcluded, Store: "sandbox_creations_excluded",
				Name: "podslo_sandbox_creations_excluded_total", Type: Counter, Stability: Alpha,
				Help:  "Sandbox creations and timeouts left out of the SLI, by reason (user_error: a FailedMount event for a missing Secret or ConfigMap).",
				Label: "reason", LabelValue: func(lifecycle.Observation) string { return "user_error" }, LabelDomain: []string{"user_error"},
			},
		},
		PerPod: []*PodSeries{
			{
				Name: "podslo_pod_sandbox_creation_seconds", Type: Gauge, Stability: Alpha,
				Help: "Per pod: time from PodScheduled to the first sandbox readiness.",
				Value: func(st *lifecycle.State, _ int64) (float64, bool) {
					return float64(st.SandboxCreationMs) / 1000, st.HasSandboxCreation
				},
			},
			{
				Name: "podslo_pod_sandbox_recreations_total", Type: Counter, Stability: Alpha,
				Help: "Per pod: sandbox re-creations after the first sandbox became ready.",
				Value: func(st *lifecycle.State, _ int64) (float64, bool) {
					return float64(st.Recreations), st.FirstSandboxReady != 0
				},
			},
			{
				Name: "podslo_pod_sandbox_pending_seconds", Type: Gauge, Stability: Alpha,
				Help: "Per pod: seconds since PodScheduled of a pod still waiting for its first sandbox.",
				Value: func(st *lifecycle.State, now int64) (float64, bool) {
					return float64(now - st.Scheduled), st.Pending()
				},
			},
		},
	},
	{
		Aggregates: []*AggregateSpec{
			{
				Kind: lifecycle.Terminated, Store: "termination",
				Name: "podslo_termination_duration_seconds", Type: Histogram, Stability: Alpha,
				Help: "Time from the deletion request (deletionTimestamp minus the grace period) to the sandbox condition turning False (KEP-3085 Story 5), observed once per pod UID.",
			},
			{
				Kind: lifecycle.Terminated, When: func(o lifecycle.Observation) bool { return o.OverGrace },
				Store: "terminations_over_grace",
				Name:  "podslo_terminations_over_grace_total", Type: Counter, Stability: Alpha,
				Help: "Terminations that ended after the first deletion request plus its grace period, i.e. took longer than the grace the kubelet kept.",
			},
		},
		PerPod: []*PodSeries{
			{
				// A timestamp, not a duration, as kube-state-metrics'
				// kube_pod_status_scheduled_time: a series whose value
				// does not change between scrapes.
				Name: "podslo_pod_deletion_requested_timestamp_seconds", Type: Gauge, Stability: Alpha,
				Help: "Per pod whose termination is pending (its deletion requested, its sandbox not yet gone): the Unix time of the first deletion request.",
				Value: func(st *lifecycle.State, _ int64) (float64, bool) {
					return float64(st.DeletionRequested), st.TerminationPending()
				},
			},
			{
				Name: "podslo_pod_termination_seconds", Type: Gauge, Stability: Alpha,
				Help: "Per pod, while it still exists: time from the deletion request to the sandbox going away.",
				Value: func(st *lifecycle.State, _ int64) (float64, bool) {
					return float64(st.TerminationMs) / 1000, st.HasTermination
				},
			},
		},
	},
	{
		Aggregates: []*AggregateSpec{
			{
				Kind: lifecycle.BecameReady, Store: "readiness",
				Name: "podslo_readiness_duration_seconds", Type: Histogram, Stability: Alpha,
				Help: "Time from the newest container start to the first Ready=True: what readiness probes add. Observed once per pod UID.",
			},
		},
		PerPod: []*PodSeries{
			{
				Name: "podslo_pod_readiness_seconds", Type: Gauge, Stability: Alpha,
				Help: "Per pod: time from the newest container start to the first Ready.",
				Value: func(st *lifecycle.State, _ int64) (float64, bool) {
					return float64(st.ReadinessMs) / 1000, st.HasReadiness
				},
			},
		},
	},
	{
		Aggregates: []*AggregateSpec{
			{
				Kind: lifecycle.PhaseDone, Store: "startup_phase",
				Name: "podslo_startup_phase_duration_seconds", Type: Histogram, Stability: Alpha,
				Help:  "Where start-up time goes, by phase: scheduling, sandbox, init, containers, readiness, total. Observed once per pod UID and phase.",
				Label: "phase", LabelValue: func(o lifecycle.Observation) string { return o.Phase.String() },
			},
		},
	},
	{
		Aggregates: []*AggregateSpec{
			{
				Kind: lifecycle.Stabilized, Store: "stabilization",
				Name: "podslo_stabilization_duration_seconds", Type: Histogram, Stability: Alpha,
				Help: "Time from the first Ready to the first Stable=True written by podslo's agent (Ready for minReadySeconds without a restart). Observed once per pod UID.",
			},
			{
				Kind: lifecycle.StabilityLost, Store: "stable_transitions",
				Name: "podslo_stable_transitions_total", Type: Counter, Stability: Alpha,
				Help:  "Stable condition transitions by target status; to=\"false\" counts the times a stable pod lost stability (Ready dropped or a container restarted).",
				Label: "to", LabelValue: func(lifecycle.Observation) string { return "false" }, LabelDomain: []string{"false"},
			},
		},
		PerPod: []*PodSeries{
			{
				Name: "podslo_pod_stable", Type: Gauge, Stability: Alpha,
				Help: "Per pod with a Stable condition: 1 when it is True, else 0.",
				Value: func(st *lifecycle.State, _ int64) (float64, bool) {
					if st.Stable {
						return 1, true
					}
					return 0, st.StableSeen
				},
			},
		},
	},
	{
		Aggregates: []*AggregateSpec{
			{
				Kind: lifecycle.ImagesPulled, Store: "image_pull",
				Name: "podslo_image_pull_duration_seconds", Type: Histogram, Stability: Alpha,
				Help:  "Sum of the image pulls of each pod's containers and init containers, from the kubelet's Pulled events (each pull including its wait in the pull queue, 0 for an image already present), observed once per pod UID; cache=\"hit\" when every image was already present.",
				Label: "cache", LabelValue: func(o lifecycle.Observation) string { return cacheLabel(o.Cached) },
			},
			{
				Kind: lifecycle.ImagePullFailedOnce, Store: "image_pulls_failed",
				Name: "podslo_image_pulls_failed_total", Type: Counter, Stability: Alpha,
				Help: "Pods with a failed image pull (a Failed event for ErrImagePull, or a Back-off pulling image) during start-up, counted once per pod.",
			},
		},
		PerPod: []*PodSeries{
			{
				Name: "podslo_pod_image_pull_seconds", Type: Gauge, Stability: Alpha,
				Help: "Per pod: the sum of its image pulls, once every container's image is in.",
				Value: func(st *lifecycle.State, _ int64) (float64, bool) {
					return float64(st.ImagePull) / 1000, st.Pulls.Has(lifecycle.PullsDone)
				},
			},
			{
				Name: "podslo_pod_image_pull_size_bytes", Type: Gauge, Stability: Alpha,
				Help: "Per pod: the sum of the sizes of the images it pulled, as the kubelet's Pulled events give them (1.29 on), each rounded up to a KiB; 0 when every image was present.",
				Value: func(st *lifecycle.State, _ int64) (float64, bool) {
					return float64(st.ImagePullKiB) * 1024, st.Pulls.Has(lifecycle.PullsDone) && (st.ImagePullKiB > 0 || st.Pulls.Has(lifecycle.PullsCached))
				},
			},
		},
	},
	{
		Aggregates: []*AggregateSpec{
			{
				Kind: lifecycle.StartedUp, Store: "pod_startup_sli",
				Name: "podslo_startup_sli_duration_seconds", Type: Histogram, Stability: Alpha,
				Help:  "sig-scalability's pod start-up SLI: from creation to every container running and seen by the watch, minus image pulls and the init phase. Observed once per pod UID; stateful=\"true\" for pods with a PVC-backed volume.",
				Label: "stateful", LabelValue: func(o lifecycle.Observation) string { return strconv.FormatBool(o.Stateful) },
			},
		},
		PerPod: []*PodSeries{
			{
				Name: "podslo_pod_startup_sli_seconds", Type: Gauge, Stability: Alpha,
				Help: "Per pod: the pod start-up SLI.",
				Value: func(st *lifecycle.State, _ int64) (float64, bool) {
					return float64(st.Startup) / 1000, st.Pulls.Has(lifecycle.StartupMeasured)
				},
			},
		},
	},
}

// cacheLabel is the cache label of the image pull histogram.
func cacheLabel(hit bool) string {
	if hit {
		return "hit"
	}
	return "miss"
}

// FamilySkipped is the store family of skipped observations, labelled by
// lifecycle.SLI and lifecycle.Reason; it carries no histogram labels.
const FamilySkipped = "skipped"

// Precision is the "precision" label of podslo_observations_total: how an
// observation's two ends were timed (lifecycle/precise.go).
func Precision(precise bool) string {
	if precise {
		return "millisecond"
	}
	return "second"
}

// Precisions are every value Precision returns.
var Precisions = []string{"millisecond", "second"}

// derived is what the rest of podslo reads of Table.
type derived struct {
	aggregates []*AggregateSpec
	podSeries  []*PodSeries
	families   []*MetricFamily
}

var table = mustDerive(Table)

func mustDerive(t []SLI) *derived {
	d, err := derive(t)
	if err != nil {
		panic(err)
	}
	return d
}

// derive checks the table and builds what is derived from it.
func derive(t []SLI) (*derived, error) {
	d := &derived{}
	stores := map[string]bool{FamilySkipped: true}
	names := map[string]bool{}
	for _, s := range t {
		for _, a := range s.Aggregates {
			switch {
			case a.Type != Histogram && a.Type != Counter:
				return nil, fmt.Errorf("sli table: %s: an aggregate is a histogram or a counter, not a %s", a.Name, a.Type)
			case a.Stability == 0:
				return nil, fmt.Errorf("sli table: %s: no stability level", a.Name)
			case (a.Label == "") != (a.LabelValue == nil):
				return nil, fmt.Errorf("sli table: %s: Label and LabelValue go together", a.Name)
			case a.Type == Counter && a.Label != "" && len(a.LabelDomain) == 0:
				return nil, fmt.Errorf("sli table: %s: a counter with a Label lists its LabelDomain", a.Name)
			case a.Store == "" || stores[a.Store]:
				return nil, fmt.Errorf("sli table: %s: store family %q is empty or used twice", a.Name, a.Store)
			case names[a.Name]:
				return nil, fmt.Errorf("sli table: %s: declared twice", a.Name)
			}
			stores[a.Store], names[a.Name] = true, true
			a.family = &MetricFamily{Name: a.Name, Type: a.Type, Help: a.Help, Labels: a.aggregateLabels(), Stability: a.Stability, HistogramLabels: true}
			d.aggregates = append(d.aggregates, a)
			d.families = append(d.families, a.family)
		}
		for _, p := range s.PerPod {
			switch {
			case p.Type != Gauge && p.Type != Counter:
				return nil, fmt.Errorf("sli table: %s: a per-pod series is a gauge or a counter, not a %s", p.Name, p.Type)
			case p.Stability == 0:
				return nil, fmt.Errorf("sli table: %s: no stability level", p.Name)
			case p.Value == nil:
				return nil, fmt.Errorf("sli table: %s: no Value", p.Name)
			case names[p.Name]:
				return nil, fmt.Errorf("sli table: %s: declared twice", p.Name)
			}
			names[p.Name] = true
			p.family = &MetricFamily{Name: p.Name, Type: p.Type, Help: p.Help, Labels: PodSeriesLabels, Stability: p.Stability, PodLabels: true}
			d.podSeries = append(d.podSeries, p)
			d.families = append(d.families, p.family)
		}
	}
	return d, nil
}

// Aggregates returns every aggregated family, in table order.
func Aggregates() []*AggregateSpec { return table.aggregates }

// PerPod returns every per-pod family, in table order.
func PerPod() []*PodSeries { return table.podSeries }

// Families returns the metric families of every SLI, in table order.
func Families() []*MetricFamily { return table.families }

// MustByStore returns the aggregate kept under store family name, for
// code that reads one family (the landing page's class table). It panics
// when there is none: call it when a package loads, so any test catches a
// rename.
func MustByStore(name string) *AggregateSpec {
	for _, a := range table.aggregates {
		if a.Store == name {
			return a
		}
	}
	panic(fmt.Sprintf("sli: no aggregate has store family %q", name))
}

// MetricFamily is the metric family a declares.
func (a *AggregateSpec) MetricFamily() *MetricFamily { return a.family }

// MetricFamily is the metric family p declares.
func (p *PodSeries) MetricFamily() *MetricFamily { return p.family }

// ID is a's store family ID under the configured --histogram-label names:
// the pipeline writes and the collectors read under it.
func (a *AggregateSpec) ID(histogramLabels []string) string {
	return FamilyID(a.Store, histogramLabels)
}

// FamilyID names a store family together with the names of its configured
// extra dimensions, so that series persisted under another
// --histogram-label set are never exposed under the wrong label names after
// a restart.
func FamilyID(store string, histogramLabels []string) string {
	if len(histogramLabels) == 0 {
		return store
	}
	return store + "{" + strings.Join(histogramLabels, ",") + "}"
}
