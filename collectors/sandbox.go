package collectors

import (
	"github.com/podslo/podslo/lifecycle"
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
	sandboxCreationTimeouts = &Family{
		Name: "podslo_sandbox_creation_timeouts_total", Type: "counter", Stability: Alpha,
		Help:   "Scheduled pods whose first sandbox was not ready within --sandbox-creation-timeout, counted once per pod.",
		Labels: classLabels, HistogramLabels: true,
	}
	sandboxCreationsExcluded = &Family{
		Name: "podslo_sandbox_creations_excluded_total", Type: "counter", Stability: Alpha,
		Help:   "Sandbox creations and timeouts left out of the SLI, by reason (user_error: a FailedMount event for a missing Secret or ConfigMap).",
		Labels: labelList("runtime_class", "storage_class", "reason"), HistogramLabels: true,
	}
	sandboxCreationPending = &Family{
		Name: "podslo_sandbox_creation_pending_pods", Type: "gauge", Stability: Alpha,
		Help:   "Scheduled pods still waiting for their first sandbox, by whether a user error was reported for them.",
		Labels: labelList("runtime_class", "storage_class", "user_error"),
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
	podSandboxPending = &Family{
		Name: "podslo_pod_sandbox_pending_seconds", Type: "gauge", Stability: Alpha,
		Help:   "Per pod: seconds since PodScheduled of a pod still waiting for its first sandbox.",
		Labels: perPodLabels, PodLabels: true,
	}
	sandboxFamilies = []*Family{
		sandboxCreationDuration, sandboxRecreations, sandboxCreationTimeouts, sandboxCreationsExcluded, sandboxCreationPending,
		podSandboxCreation, podSandboxRecreations, podSandboxPending,
	}

	sandboxAggregates = []aggregateFamily{
		{sandboxCreationDuration, lifecycle.FamilySandboxCreation},
		{sandboxRecreations, lifecycle.FamilySandboxRecreations},
		{sandboxCreationTimeouts, lifecycle.FamilySandboxCreationTimeouts},
		{sandboxCreationsExcluded, lifecycle.FamilySandboxCreationsExcl},
	}

	// sandboxPerPod says how each per-pod family reads a pod's state; a
	// pod without a value has no series in that family.
	sandboxPerPod = []perPodFamily{
		{podSandboxCreation, func(st *lifecycle.State, _ int64) (float64, bool) {
			return float64(st.SandboxCreation), st.HasSandboxCreation
		}},
		{podSandboxRecreations, func(st *lifecycle.State, _ int64) (float64, bool) {
			return float64(st.Recreations), st.FirstSandboxReady != 0
		}},
		{podSandboxPending, func(st *lifecycle.State, now int64) (float64, bool) {
			return float64(now - st.Scheduled), st.Pending()
		}},
	}
)
