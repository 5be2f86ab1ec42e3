package collectors

import "github.com/podslo/podslo/lifecycle"

var (
	readinessDuration = &Family{
		Name: "podslo_pod_readiness_duration_seconds", Type: "histogram", Stability: Alpha,
		Help:   "Time from the newest container start to the first Ready=True: what readiness probes add. Observed once per pod UID.",
		Labels: classLabels, HistogramLabels: true,
	}
	startupPhaseDuration = &Family{
		Name: "podslo_pod_startup_phase_duration_seconds", Type: "histogram", Stability: Alpha,
		Help:   "Where start-up time goes, by phase: scheduling, sandbox, init, containers, readiness, total. Observed once per pod UID and phase.",
		Labels: labelList("runtime_class", "storage_class", "phase"), HistogramLabels: true,
	}
	podReadiness = &Family{
		Name: "podslo_pod_readiness_seconds", Type: "gauge", Stability: Alpha,
		Help:   "Per pod: time from the newest container start to the first Ready.",
		Labels: perPodLabels, PodLabels: true,
	}
	readinessFamilies = []*Family{readinessDuration, startupPhaseDuration, podReadiness}

	readinessAggregates = []aggregateFamily{
		{readinessDuration, lifecycle.FamilyReadiness},
		{startupPhaseDuration, lifecycle.FamilyStartupPhase},
	}
	readinessPerPod = []perPodFamily{
		{podReadiness, func(st *lifecycle.State, _ int64) (float64, bool) {
			return float64(st.Readiness), st.HasReadiness
		}},
	}
)
