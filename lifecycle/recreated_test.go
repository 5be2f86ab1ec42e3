package lifecycle

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What a fresh state (a new install, a lost PVC, a new shard) first sees of
// pods whose sandbox the real kubelet re-created after a crash: the
// kubelet writes PodReadyToStartContainers=False then True, often in the
// same second, and only then restarts the containers, whose lastState keeps
// the start in the first sandbox (issue 26, defect 1).
func TestFirstSightOfARecreatedSandbox(t *testing.T) {
	scheduled := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	unixAt := func(d time.Duration) int64 { return scheduled.Add(d).Unix() }
	cfg := &Config{}
	now := scheduled.Add(3 * time.Minute)
	pod := func(sandbox corev1.ConditionStatus, sandboxAt time.Duration, firstContainer time.Duration) *Pod {
		p := &Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", CreationTimestamp: metav1.NewTime(scheduled)},
			Conditions: []Condition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: scheduled.Unix()},
				{Type: corev1.PodReadyToStartContainers, Status: sandbox, LastTransitionTime: unixAt(sandboxAt)},
			},
		}
		if firstContainer >= 0 {
			p.FirstContainerStart = unixAt(firstContainer)
		}
		return p
	}
	recreated := Skip{SandboxCreation, RecreatedBeforeSeen}
	// PodScheduled does not move when a sandbox is re-created: the
	// scheduling phase is still measured, and nothing else.
	scheduling := Observation{Kind: PhaseDone, Phase: PhaseScheduling}

	t.Run("ready again after a crash", func(t *testing.T) {
		// First sandbox ready at 2 s, containers from 3 s, re-created at
		// 154 s: 154 s is no creation, and no timeout either.
		next, out := Step(now, pod(corev1.ConditionTrue, 154*time.Second, 3*time.Second), Inputs{}, State{}, cfg)
		assert.Equal(t, []Observation{scheduling}, out.Observations, "no creation, no timeout, no re-creation counted")
		assert.Equal(t, []Skip{recreated}, sandboxSkips(out.Skips))
		assert.True(t, next.SeenRecreated)
		assert.False(t, next.HasSandboxCreation)
		assert.Equal(t, unixAt(154*time.Second), next.FirstSandboxReady)
		assert.Equal(t, unixAt(154*time.Second), next.LastSandboxReady)

		// The next crash is a re-creation podslo sees: counted once.
		again, out := Step(now.Add(time.Minute), pod(corev1.ConditionTrue, 200*time.Second, 3*time.Second), Inputs{}, next, cfg)
		assert.Equal(t, []Observation{{Kind: SandboxRecreated}}, out.Observations)
		assert.Equal(t, uint32(1), again.Recreations)
		// And the periodic check never finds it pending.
		_, out = Timeout(now.Add(time.Hour), Inputs{}, again, cfg)
		assert.True(t, out.Empty())
	})

	t.Run("seen while the sandbox is being re-created", func(t *testing.T) {
		next, out := Step(now, pod(corev1.ConditionFalse, 150*time.Second, 3*time.Second), Inputs{}, State{}, cfg)
		assert.Equal(t, []Observation{scheduling}, out.Observations)
		assert.Equal(t, []Skip{recreated}, sandboxSkips(out.Skips))
		assert.Equal(t, unixAt(3*time.Second), next.FirstSandboxReady, "ready at the latest when a container started")
		_, out = Timeout(scheduled.Add(10*time.Minute), Inputs{}, next, cfg)
		assert.True(t, out.Empty(), "not pending, so no false timeout")
		// It comes back: a re-creation.
		back, out := Step(now, pod(corev1.ConditionTrue, 151*time.Second, 3*time.Second), Inputs{}, next, cfg)
		assert.Equal(t, []Observation{{Kind: SandboxRecreated}}, out.Observations)
		assert.Equal(t, uint32(1), back.Recreations)
	})

	t.Run("start-up SLIs are skipped with the same reason", func(t *testing.T) {
		p := pod(corev1.ConditionTrue, 154*time.Second, 3*time.Second)
		p.ContainersStarted = unixAt(155 * time.Second)
		p.Conditions = append(p.Conditions, Condition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: unixAt(155 * time.Second)})
		_, out := Step(now, p, Inputs{}, State{}, cfg)
		assert.Equal(t, []Observation{scheduling}, out.Observations, "the readiness after a re-creation is not the first readiness")
		assert.Contains(t, out.Skips, Skip{Readiness, RecreatedBeforeSeen})
		assert.Contains(t, out.Skips, Skip{StartupPhase, RecreatedBeforeSeen})
		assert.NotContains(t, out.Skips, Skip{StartupPhase, TooOld})
	})

	t.Run("as the real kubelet writes it: Ready keeps its first time, the container restarts after", func(t *testing.T) {
		// e2e/realnode/testdata: Ready and ContainersReady stay True at
		// 35 s, the sandbox goes False and True again at 37 s, and the
		// container restarts at 37 s with its last state started at 3 s.
		p := pod(corev1.ConditionTrue, 37*time.Second, 3*time.Second)
		p.ContainersStarted = unixAt(37 * time.Second)
		p.Conditions = append(p.Conditions, Condition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: unixAt(35 * time.Second)})
		_, out := Step(now, p, Inputs{}, State{}, cfg)
		assert.Equal(t, []Observation{scheduling}, out.Observations)
		assert.Contains(t, out.Skips, Skip{Readiness, RecreatedBeforeSeen})
		assert.NotContains(t, out.Skips, Skip{Readiness, NegativeDuration})
		assert.NotContains(t, out.Skips, Skip{StartupPhase, NegativeDuration})
	})

	t.Run("containers that started with the first sandbox are no evidence", func(t *testing.T) {
		// Same second as the readiness: second precision cannot order
		// them, and a first start always looks like this.
		_, out := Step(now, pod(corev1.ConditionTrue, 2*time.Second, 2*time.Second), Inputs{}, State{}, cfg)
		assert.Contains(t, out.Observations, Observation{Kind: SandboxCreated, Seconds: 2})
		assert.Empty(t, sandboxSkips(out.Skips))
	})

	t.Run("a kubelet before 1.36 writes its first readiness after the containers' start", func(t *testing.T) {
		// 1.34 on the real node (make test-versions): the containers
		// start at 2 s, the condition says ready from 4 s, no restart.
		_, out := Step(now, pod(corev1.ConditionTrue, 4*time.Second, 2*time.Second), Inputs{}, State{}, cfg)
		assert.Contains(t, out.Observations, Observation{Kind: SandboxCreated, Seconds: 4})
		assert.Empty(t, sandboxSkips(out.Skips))
		// Seen in the update before it, where the condition still says
		// False: not a lost sandbox either.
		next, out := Step(now, pod(corev1.ConditionFalse, 1*time.Second, 2*time.Second), Inputs{}, State{}, cfg)
		assert.Empty(t, sandboxSkips(out.Skips))
		_, out = Step(now, pod(corev1.ConditionTrue, 4*time.Second, 2*time.Second), Inputs{}, next, cfg)
		assert.Contains(t, out.Observations, Observation{Kind: SandboxCreated, Seconds: 4})
	})

	t.Run("a restart is evidence however soon the re-creation came", func(t *testing.T) {
		// Containers from 3 s, sandbox lost and ready again at 6 s, the
		// containers restarted in it.
		p := pod(corev1.ConditionTrue, 6*time.Second, 3*time.Second)
		p.ContainersRestarted = true
		_, out := Step(now, p, Inputs{}, State{}, cfg)
		assert.Equal(t, []Skip{recreated}, sandboxSkips(out.Skips))
		assert.NotContains(t, out.Observations, Observation{Kind: SandboxCreated, Seconds: 6})
	})

	t.Run("no container yet: a first creation as before", func(t *testing.T) {
		_, out := Step(now, pod(corev1.ConditionTrue, 2*time.Second, -1), Inputs{}, State{}, cfg)
		assert.Contains(t, out.Observations, Observation{Kind: SandboxCreated, Seconds: 2})
	})

	t.Run("a sandbox podslo saw ready first is unaffected", func(t *testing.T) {
		first, _ := Step(now, pod(corev1.ConditionTrue, 2*time.Second, -1), Inputs{}, State{}, cfg)
		next, out := Step(now, pod(corev1.ConditionTrue, 154*time.Second, 3*time.Second), Inputs{}, first, cfg)
		assert.Equal(t, []Observation{{Kind: SandboxRecreated}}, out.Observations)
		assert.False(t, next.SeenRecreated)
		assert.Equal(t, int32(2000), next.SandboxCreationMs)
	})
}

// What a list (a fresh state, a relist after an outage) first shows of a
// pod whose container restarted in the same sandbox: the running start
// and Ready's transition are the restart's, the first ones gone from the
// status (issue 35, item 3).
func TestFirstSightOfARestartedContainer(t *testing.T) {
	created := time.Date(2026, 11, 26, 10, 0, 0, 0, time.UTC)
	at := func(s int) int64 { return created.Add(time.Duration(s) * time.Second).Unix() }
	cfg := &Config{}
	now := created.Add(3 * time.Minute)
	// Scheduled at once, sandbox at 2 s, the container first started at
	// 3 s, crashed, and runs again since 40 s, Ready at 41 s.
	pod := func(restarted bool, listed bool) *Pod {
		return &Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", CreationTimestamp: metav1.NewTime(created)},
			Conditions: []Condition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: at(0)},
				{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: at(2)},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: at(41)},
			},
			Containers: 1, ContainersRunning: 1, ContainersStarted: at(40), FirstContainerStart: at(3),
			ContainersRestarted: restarted, Listed: listed,
		}
	}
	restarted := func(sli SLI) Skip { return Skip{sli, RestartedBeforeSeen} }
	stable := func(p *Pod, s int) *Pod {
		q := *p
		q.Conditions = append(append([]Condition(nil), p.Conditions...), Condition{Type: DefaultStableConditionType, Status: corev1.ConditionTrue, LastTransitionTime: at(s)})
		return &q
	}

	t.Run("from a list: the start-up SLIs that end at a restart are skipped", func(t *testing.T) {
		next, out := Step(now, pod(true, true), Inputs{}, State{}, cfg)
		assert.Contains(t, out.Observations, Observation{Kind: SandboxCreated, Seconds: 2}, "the sandbox is the first: no restart moves it")
		assert.Contains(t, out.Observations, Observation{Kind: PhaseDone, Phase: PhaseScheduling})
		assert.NotContains(t, out.Observations, Observation{Kind: BecameReady, Seconds: 1})
		assert.ElementsMatch(t, []Skip{restarted(Readiness), restarted(StartupPhase), restarted(PodStartup)}, out.Skips)
		assert.False(t, next.HasReadiness)
		assert.True(t, next.Pulls.Has(StartupDone))
		assert.False(t, next.Pulls.Has(StartupMeasured))
		for _, o := range out.Observations {
			assert.NotEqual(t, StartedUp, o.Kind)
			assert.False(t, o.Kind == PhaseDone && o.Phase != PhaseScheduling && o.Phase != PhaseSandbox, "phase %v", o.Phase)
		}
		// The first Stable, later, from a current watch: it follows the
		// Ready podslo could not tell from a restart's.
		p := stable(pod(true, false), 45)
		_, out = Step(now, p, Inputs{}, next, cfg)
		assert.Equal(t, []Skip{restarted(Stabilization)}, out.Skips)
		assert.Empty(t, out.Observations)
	})

	// What podslo saw of the pod scheduled, before its containers ran.
	scheduledOnly := func() State {
		p := pod(false, false)
		p.Conditions = p.Conditions[:2]
		p.ContainersRunning, p.ContainersStarted, p.FirstContainerStart = 0, 0, 0
		st, _ := Step(now, p, Inputs{}, State{}, cfg)
		require.NotZero(t, st.Scheduled)
		return st
	}

	t.Run("from a watch, the pod seen before: the restart happened before the end, which is the pod's", func(t *testing.T) {
		next, out := Step(now, pod(true, false), Inputs{}, scheduledOnly(), cfg)
		assert.Empty(t, out.Skips)
		assert.Contains(t, out.Observations, Observation{Kind: BecameReady, Seconds: 1})
		assert.True(t, next.Pulls.Has(StartupEndSeen))
		_, out = Step(now, stable(pod(true, false), 45), Inputs{}, next, cfg)
		assert.Equal(t, []Observation{{Kind: Stabilized, Seconds: 4}}, out.Observations)
	})

	t.Run("from a list, the pod seen before: skipped", func(t *testing.T) {
		_, out := Step(now, pod(true, true), Inputs{}, scheduledOnly(), cfg)
		assert.ElementsMatch(t, []Skip{restarted(Readiness), restarted(StartupPhase), restarted(PodStartup)}, out.Skips)
	})

	t.Run("first seen in back-off, running again in a later watch event: skipped from the first sight", func(t *testing.T) {
		// A fresh state's watch (or list) first shows the pod waiting to
		// restart its container; the next event shows it running and
		// Ready: the restart's, not the start-up.
		waiting := pod(true, false)
		waiting.Conditions = waiting.Conditions[:2]
		waiting.ContainersRunning, waiting.ContainersStarted = 0, 0
		next, out := Step(now, waiting, Inputs{}, State{}, cfg)
		assert.ElementsMatch(t, []Skip{restarted(Readiness), restarted(StartupPhase), restarted(PodStartup)}, out.Skips)
		next, out = Step(now, pod(true, false), Inputs{}, next, cfg)
		assert.Empty(t, out.Skips)
		for _, o := range out.Observations {
			assert.NotContains(t, []Kind{BecameReady, StartedUp}, o.Kind)
			assert.False(t, o.Kind == PhaseDone && o.Phase >= PhaseContainers, "phase %v", o.Phase)
		}
		assert.Equal(t, at(41), next.FirstReady)
		_, out = Step(now, stable(pod(true, false), 45), Inputs{}, next, cfg)
		assert.Equal(t, []Skip{restarted(Stabilization)}, out.Skips)
	})

	t.Run("first seen without a restart, it restarts later in a watch event: measured", func(t *testing.T) {
		_, out := Step(now, pod(false, false), Inputs{}, State{}, cfg)
		assert.Empty(t, out.Skips)
		assert.Contains(t, out.Observations, Observation{Kind: BecameReady, Seconds: 1})
	})

	t.Run("from a list without a restart: measured", func(t *testing.T) {
		_, out := Step(now, pod(false, true), Inputs{}, State{}, cfg)
		assert.Empty(t, out.Skips)
		assert.Contains(t, out.Observations, Observation{Kind: BecameReady, Seconds: 1})
	})

	t.Run("first seen too late: too_old, as before", func(t *testing.T) {
		_, out := Step(created.Add(48*time.Hour), pod(true, true), Inputs{}, State{}, cfg)
		assert.Contains(t, out.Skips, Skip{Readiness, TooOld})
		assert.Contains(t, out.Skips, Skip{PodStartup, TooOld})
		assert.NotContains(t, out.Skips, restarted(Readiness))
		assert.NotContains(t, out.Skips, restarted(PodStartup))
	})
}
