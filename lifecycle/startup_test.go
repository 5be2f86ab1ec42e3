package lifecycle

import (
	"testing"
	"time"

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

// TestPullsGivenUp: a pod whose containers all ran while one container's
// Pulled event never came (the kubelet's recorder dropped it) leaves both
// the pulls and the start-up SLI with pulls_unknown, once, when it is
// given up or when the pod goes; an event coming after that changes
// nothing. A pod not yet running is not given up: its pulls may still be
// in progress.
func TestPullsGivenUp(t *testing.T) {
	cfg := &Config{}
	const created = "2026-01-01T00:00:00Z"
	pod := running(t, created, "2026-01-01T00:00:05Z", 2, 0,
		cond(t, corev1.PodScheduled, corev1.ConditionTrue, created),
		cond(t, corev1.PodReadyToStartContainers, corev1.ConditionTrue, "2026-01-01T00:00:01Z"))
	var one Pulls
	one.Add(pulled("a", 1000))
	now := ts(t, "2026-01-01T00:00:06Z")
	unknown := []Skip{{ImagePull, PullsUnknown}, {PodStartup, PullsUnknown}}

	notRunning := *pod
	notRunning.ContainersRunning = 1
	st, _ := Step(now, &notRunning, Inputs{Pulls: &one}, State{}, cfg)
	assert.False(t, st.AwaitsPulls(), "not all running: the pulls may still be in progress")
	next, out := GiveUpPulls(st)
	assert.Equal(t, st, next)
	assert.True(t, out.Empty())

	st, out = Step(now, pod, Inputs{Pulls: &one}, State{}, cfg)
	assert.Empty(t, observed(out, StartedUp))
	assert.True(t, st.AwaitsPulls())

	t.Run("given up", func(t *testing.T) {
		next, out := GiveUpPulls(st)
		assert.ElementsMatch(t, unknown, out.Skips)
		assert.Empty(t, out.Observations)
		assert.False(t, next.AwaitsPulls())
		again, out := GiveUpPulls(next)
		assert.Equal(t, next, again)
		assert.True(t, out.Empty(), "once")
		// The missing event comes after all: nothing more.
		var both Pulls
		both.Add(pulled("a", 1000))
		both.Add(pulled("b", 500))
		later, out := Fold(now, Inputs{Pulls: &both}, 2, next, cfg)
		assert.True(t, out.Empty(), "%+v", out)
		assert.Equal(t, next, later)
		_, out = Vanish(later)
		assert.Equal(t, []Skip{{Termination, Vanished}}, out.Skips, "the pod goes: only its termination is left")
	})
	t.Run("the pod goes", func(t *testing.T) {
		_, out := Vanish(st)
		assert.ElementsMatch(t, append([]Skip{{Termination, Vanished}}, unknown...), out.Skips)
	})
	t.Run("start-up already skipped", func(t *testing.T) {
		waited := *pod
		waited.Conditions = append([]Condition{}, pod.Conditions...)
		waited.Conditions[0].Status = corev1.ConditionFalse
		st, out := Step(now, &waited, Inputs{Pulls: &one}, State{}, cfg)
		assert.Equal(t, []Skip{{PodStartup, NotSchedulable}}, filterSkips(out.Skips, PodStartup))
		assert.True(t, st.AwaitsPulls(), "the pulls' own SLI still waits")
		_, out = GiveUpPulls(st)
		assert.Equal(t, []Skip{{ImagePull, PullsUnknown}}, out.Skips)
	})
}

// A pod deleted before podslo saw its containers all run leaves the
// start-up SLI with a counted skip, once: vanished, or not_schedulable for
// a pod seen waiting to be scheduled (issue 35: nothing dropped silently).
func TestStartupThatNeverEndedVanishes(t *testing.T) {
	cfg := &Config{}
	const created = "2026-01-01T00:00:00Z"
	now := ts(t, "2026-01-01T00:00:06Z")
	pod := running(t, created, "2026-01-01T00:00:05Z", 2, 0,
		cond(t, corev1.PodScheduled, corev1.ConditionTrue, created),
		cond(t, corev1.PodReadyToStartContainers, corev1.ConditionTrue, "2026-01-01T00:00:01Z"))
	oneRunning := *pod
	oneRunning.ContainersRunning = 1
	waiting := oneRunning
	waiting.Conditions = append([]Condition{}, pod.Conditions...)
	waiting.Conditions[0].Status = corev1.ConditionFalse
	startups := func(out Outcome) []Skip { return filterSkips(out.Skips, PodStartup) }

	for _, tc := range []struct {
		name string
		pod  *Pod
		prev State
		want []Skip
	}{
		{"never all running", &oneRunning, State{}, []Skip{{PodStartup, Vanished}}},
		{"waited to be scheduled", &waiting, State{}, []Skip{{PodStartup, NotSchedulable}}},
		{"a user error", &oneRunning, State{UserError: true}, []Skip{{PodStartup, Vanished}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, out := Step(now, tc.pod, Inputs{}, tc.prev, cfg)
			assert.Empty(t, startups(out))
			gone, out := Vanish(st)
			assert.Equal(t, tc.want, startups(out))
			_, out = Vanish(gone)
			assert.Empty(t, startups(out), "once")
		})
	}
	t.Run("ended, pulls in", func(t *testing.T) {
		var both Pulls
		both.Add(pulled("a", 1000))
		both.Add(pulled("b", 500))
		st, out := Step(now, pod, Inputs{Pulls: &both}, State{}, cfg)
		assert.Len(t, observed(out, StartedUp), 1)
		_, out = Vanish(st)
		assert.Empty(t, startups(out))
	})
}

// A pod a sweep finds gone while still waiting for its first sandbox, past
// its creation timeout that no check caught, may have gone before or after
// its deadline: the timeout is skipped as vanished, not lost nor counted.
func TestSweptPastItsTimeout(t *testing.T) {
	cfg := &Config{SandboxCreationTimeout: time.Minute}
	stuck := State{Scheduled: 100}
	sandboxSkips := func(out Outcome) []Skip { return filterSkips(out.Skips, SandboxCreation) }

	_, out := Swept(time.Unix(100+120, 0), stuck, cfg)
	assert.Equal(t, []Skip{{SandboxCreation, Vanished}}, sandboxSkips(out))
	assert.Empty(t, out.Observations, "no timeout counted")

	_, out = Swept(time.Unix(100+30, 0), stuck, cfg)
	assert.Empty(t, sandboxSkips(out), "before its deadline: no timeout to lose")

	timedOut, _ := Timeout(time.Unix(100+61+1, 0), Inputs{}, stuck, cfg)
	_, out = Swept(time.Unix(100+120, 0), timedOut, cfg)
	assert.Empty(t, sandboxSkips(out), "a check counted it already")
	assert.Empty(t, out.Observations)

	ready := State{Scheduled: 100, FirstSandboxReady: 102, LastSandboxReady: 102}
	_, out = Swept(time.Unix(100+120, 0), ready, cfg)
	assert.Empty(t, sandboxSkips(out), "it had its sandbox")
	same, _ := Vanish(stuck)
	swept, _ := Swept(time.Unix(100+30, 0), stuck, cfg)
	assert.Equal(t, same, swept, "as Vanish otherwise")
}
