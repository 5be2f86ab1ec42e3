package collectors

import "github.com/podslo/podslo/lifecycle"

var (
	stabilizationDuration = &Family{
		Name: "podslo_pod_stabilization_duration_seconds", Type: "histogram", Stability: Alpha,
		Help:   "Time from the first Ready to the first Stable=True written by podslo's agent (Ready for minReadySeconds without a restart). Observed once per pod UID.",
		Labels: classLabels, HistogramLabels: true,
	}
	stableTransitions = &Family{
		Name: "podslo_pod_stable_transitions_total", Type: "counter", Stability: Alpha,
		Help:   "Stable condition transitions by target status; to=\"false\" counts the times a stable pod lost stability (Ready dropped or a container restarted).",
		Labels: labelList("runtime_class", "storage_class", "to"), HistogramLabels: true,
	}
	podStable = &Family{
		Name: "podslo_pod_stable", Type: "gauge", Stability: Alpha,
		Help:   "Per pod with a Stable condition: 1 when it is True, else 0.",
		Labels: perPodLabels, PodLabels: true,
	}
	stabilityFamilies = []*Family{stabilizationDuration, stableTransitions, podStable}

	stabilityAggregates = []aggregateFamily{
		{stabilizationDuration, lifecycle.FamilyStabilization},
		{stableTransitions, lifecycle.FamilyStableTransitions},
	}
	stabilityPerPod = []perPodFamily{
		{podStable, func(st *lifecycle.State, _ int64) (float64, bool) {
			if st.Stable {
				return 1, true
			}
			return 0, st.StableSeen
		}},
	}
)
