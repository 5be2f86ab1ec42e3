package lifecycle

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

// TestStartupOfAPodThatWaitedToBeScheduled: a pod seen with
// PodScheduled=False (the scheduler's Unschedulable, the API server's
// SchedulingGated) is left out of the start-up SLI, once, whichever of its
// pulls and its end comes first; its scheduling phase still counts the
// wait. A pod first seen bound is measured.
func TestStartupOfAPodThatWaitedToBeScheduled(t *testing.T) {
	cfg := &Config{}
	const created = "2026-01-01T00:00:00Z"
	waiting := podWith(cond(t, corev1.PodScheduled, corev1.ConditionFalse, created))
	waiting.CreationTimestamp = running(t, created, created, 1, 0).CreationTimestamp
	bound := running(t, created, "2026-01-01T00:01:05Z", 1, 0,
		cond(t, corev1.PodScheduled, corev1.ConditionTrue, "2026-01-01T00:01:00Z"),
		cond(t, corev1.PodReadyToStartContainers, corev1.ConditionTrue, "2026-01-01T00:01:02Z"))
	var pulls Pulls
	pulls.Add(pulled("a", 1000))
	now := ts(t, "2026-01-01T00:01:06Z")

	for _, pullsFirst := range []bool{false, true} {
		st, out := Step(now, waiting, Inputs{}, State{}, cfg)
		var skips []Skip
		var started []Observation
		collect := func(o Outcome) {
			skips = append(skips, filterSkips(o.Skips, PodStartup)...)
			started = append(started, observed(o, StartedUp)...)
		}
		collect(out)
		if pullsFirst {
			st, out = Fold(now, Inputs{Pulls: &pulls}, 1, st, cfg)
			collect(out)
		}
		var phases []Observation
		st, out = Step(now, bound, Inputs{}, st, cfg)
		collect(out)
		phases = append(phases, observed(out, PhaseDone)...)
		st, out = Fold(now, Inputs{Pulls: &pulls}, 1, st, cfg)
		collect(out)
		// Seen again: nothing more.
		_, out = Step(now, bound, Inputs{}, st, cfg)
		collect(out)
		assert.Empty(t, started, "pulls first: %v", pullsFirst)
		assert.Equal(t, []Skip{{PodStartup, NotSchedulable}}, skips, "pulls first: %v", pullsFirst)
		assert.Contains(t, phases, Observation{Kind: PhaseDone, Phase: PhaseScheduling, Seconds: 60}, "the wait is the scheduling phase")
	}

	// The same pod first seen bound: measured.
	_, out := Step(now, bound, Inputs{Pulls: &pulls}, State{}, cfg)
	assert.Len(t, observed(out, StartedUp), 1)
	assert.Empty(t, filterSkips(out.Skips, PodStartup))
}

// TestStartupOfAStatefulPodWithoutAClaim: a hostPath pod (no PVC) is
// stateful for the start-up SLI, as for the kubelet.
func TestStartupOfAStatefulPodWithoutAClaim(t *testing.T) {
	const created = "2026-01-01T00:00:00Z"
	for _, stateful := range []bool{false, true} {
		pod := running(t, created, "2026-01-01T00:00:03Z", 1, 0,
			cond(t, corev1.PodScheduled, corev1.ConditionTrue, created),
			cond(t, corev1.PodReadyToStartContainers, corev1.ConditionTrue, "2026-01-01T00:00:01Z"))
		pod.StatefulVolume = stateful
		var pulls Pulls
		pulls.Add(pulled("a", 500))
		_, out := Step(ts(t, "2026-01-01T00:00:04Z"), pod, Inputs{Pulls: &pulls}, State{}, &Config{})
		s := observed(out, StartedUp)
		if assert.Len(t, s, 1) {
			assert.Equal(t, stateful, s[0].Stateful)
			assert.InDelta(t, 2.5, s[0].Seconds, 1e-9)
		}
	}
}
