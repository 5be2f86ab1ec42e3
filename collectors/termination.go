package collectors

import "github.com/podslo/podslo/lifecycle"

var (
	terminationDuration = &Family{
		Name: "podslo_pod_termination_duration_seconds", Type: "histogram", Stability: Alpha,
		Help:   "Time from the deletion request (deletionTimestamp minus the grace period) to the sandbox condition turning False (KEP-3085 Story 5), observed once per pod UID.",
		Labels: classLabels, HistogramLabels: true,
	}
	terminationsOverGrace = &Family{
		Name: "podslo_pod_terminations_over_grace_total", Type: "counter", Stability: Alpha,
		Help:   "Terminations that ended after the pod's deletionTimestamp, i.e. took longer than their grace period.",
		Labels: classLabels, HistogramLabels: true,
	}
	podTermination = &Family{
		Name: "podslo_pod_termination_seconds", Type: "gauge", Stability: Alpha,
		Help:   "Per pod, while it still exists: time from the deletion request to the sandbox going away.",
		Labels: perPodLabels, PodLabels: true,
	}
	terminationFamilies = []*Family{terminationDuration, terminationsOverGrace, podTermination}

	terminationAggregates = []aggregateFamily{
		{terminationDuration, lifecycle.FamilyTermination},
		{terminationsOverGrace, lifecycle.FamilyTerminationsOverGrace},
	}
	terminationPerPod = []perPodFamily{
		{podTermination, func(st *lifecycle.State, _ int64) (float64, bool) {
			return float64(st.Termination), st.HasTermination
		}},
	}
)
