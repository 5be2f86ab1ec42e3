package agent

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// sec is t0 plus s seconds: condition times have 1-second precision.
func sec(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func prevCond(status corev1.ConditionStatus, reason string, at time.Time) *corev1.PodCondition {
	return &corev1.PodCondition{Type: DefaultStableConditionType, Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(at)}
}

func wantCond(status corev1.ConditionStatus, reason, msg string) *corev1.PodCondition {
	return &corev1.PodCondition{Status: status, Reason: reason, Message: msg}
}

func TestDecideStable(t *testing.T) {
	const notReadyMsg = "The pod is not Ready."
	readyAt := func(s, restarts int) readiness {
		return readiness{ready: true, since: sec(s), restarts: int64(restarts)}
	}
	for _, tc := range []struct {
		name string
		in   stableInput
		want stableDecision
	}{
		// Not Ready.
		{
			name: "pending pod without a Ready condition",
			in:   stableInput{pod: readiness{}, now: sec(3)},
			want: stableDecision{want: wantCond("False", ReasonNotReady, notReadyMsg), at: sec(3), memory: &streak{}},
		},
		{
			name: "not ready: the transition is Ready's",
			in:   stableInput{pod: readiness{since: sec(1)}, now: sec(3)},
			want: stableDecision{want: wantCond("False", ReasonNotReady, notReadyMsg), at: sec(1), memory: &streak{}},
		},
		{
			name: "Ready drops after stable",
			in:   stableInput{pod: readiness{since: sec(20)}, prev: prevCond("True", ReasonMinReadySecondsElapsed, sec(12)), memory: &streak{since: sec(10)}, now: sec(21)},
			want: stableDecision{want: wantCond("False", ReasonNotReady, notReadyMsg), at: sec(20), memory: &streak{}},
		},
		{
			name: "Ready drop stamped before the True it follows keeps time monotonic",
			in:   stableInput{pod: readiness{since: sec(11)}, prev: prevCond("True", ReasonMinReadySecondsElapsed, sec(12)), now: sec(13)},
			want: stableDecision{want: wantCond("False", ReasonNotReady, notReadyMsg), at: sec(12), memory: &streak{}},
		},
		{
			name: "Ready stamped in the future is clamped to now",
			in:   stableInput{pod: readiness{since: sec(30)}, now: sec(3)},
			want: stableDecision{want: wantCond("False", ReasonNotReady, notReadyMsg), at: sec(3), memory: &streak{}},
		},
		{
			name: "Ready drops after a restart: the reason stays, no write",
			in:   stableInput{pod: readiness{since: sec(20)}, prev: prevCond("False", ReasonContainerRestarted, sec(15)), memory: &streak{since: sec(10), restarts: 0, broken: true}, now: sec(21)},
			want: stableDecision{memory: &streak{}},
		},
		{
			name: "still not ready",
			in:   stableInput{pod: readiness{since: sec(1)}, prev: prevCond("False", ReasonNotReady, sec(1)), memory: &streak{}, now: sec(30)},
			want: stableDecision{memory: &streak{}},
		},

		// Ready, the clock running.
		{
			name: "minReadySeconds 0: stable as soon as Ready",
			in:   stableInput{pod: readyAt(10, 0), prev: prevCond("False", ReasonNotReady, sec(1)), memory: &streak{}, now: sec(10).Add(300 * time.Millisecond)},
			want: stableDecision{want: wantCond("True", ReasonMinReadySecondsElapsed, "Ready since 2026-01-02T03:04:15Z for minReadySeconds (0s) without a container restart."), at: sec(10), memory: &streak{since: sec(10)}},
		},
		{
			name: "Ready, clock running: nothing written, a deadline",
			in:   stableInput{pod: readyAt(10, 2), prev: prevCond("False", ReasonNotReady, sec(1)), memory: &streak{}, minReady: 5 * time.Second, now: sec(11)},
			want: stableDecision{deadline: sec(15), memory: &streak{since: sec(10), restarts: 2}},
		},
		{
			name: "deadline reached: True at Ready + minReadySeconds",
			in:   stableInput{pod: readyAt(10, 2), prev: prevCond("False", ReasonNotReady, sec(1)), memory: &streak{since: sec(10), restarts: 2}, minReady: 5 * time.Second, now: sec(15)},
			want: stableDecision{want: wantCond("True", ReasonMinReadySecondsElapsed, "Ready since 2026-01-02T03:04:15Z for minReadySeconds (5s) without a container restart."), at: sec(15), memory: &streak{since: sec(10), restarts: 2}},
		},
		{
			name: "late check: the time is still the deadline's",
			in:   stableInput{pod: readyAt(10, 0), memory: &streak{since: sec(10)}, minReady: 5 * time.Second, now: sec(40)},
			want: stableDecision{want: wantCond("True", ReasonMinReadySecondsElapsed, "Ready since 2026-01-02T03:04:15Z for minReadySeconds (5s) without a container restart."), at: sec(15), memory: &streak{since: sec(10)}},
		},
		{
			name: "stable stays stable",
			in:   stableInput{pod: readyAt(10, 2), prev: prevCond("True", ReasonMinReadySecondsElapsed, sec(15)), memory: &streak{since: sec(10), restarts: 2}, minReady: 5 * time.Second, now: sec(99)},
			want: stableDecision{memory: &streak{since: sec(10), restarts: 2}},
		},
		{
			name: "a raised minReadySeconds does not take stability back",
			in:   stableInput{pod: readyAt(10, 0), prev: prevCond("True", ReasonMinReadySecondsElapsed, sec(15)), memory: &streak{since: sec(10)}, minReady: time.Hour, now: sec(20)},
			want: stableDecision{memory: &streak{since: sec(10)}},
		},

		// Restarts.
		{
			name: "restart during the clock",
			in:   stableInput{pod: readyAt(10, 3), prev: prevCond("False", ReasonNotReady, sec(1)), memory: &streak{since: sec(10), restarts: 2}, minReady: 5 * time.Second, now: sec(12).Add(700 * time.Millisecond)},
			want: stableDecision{
				want: wantCond("False", ReasonContainerRestarted, "A container restarted while the pod was Ready (restarts 2 -> 3); stable again minReadySeconds after the next Ready."),
				at:   sec(12).Add(700 * time.Millisecond), memory: &streak{since: sec(10), restarts: 2, broken: true},
			},
		},
		{
			name: "restart after stable",
			in:   stableInput{pod: readyAt(10, 1), prev: prevCond("True", ReasonMinReadySecondsElapsed, sec(15)), memory: &streak{since: sec(10)}, minReady: 5 * time.Second, now: sec(30)},
			want: stableDecision{
				want: wantCond("False", ReasonContainerRestarted, "A container restarted while the pod was Ready (restarts 0 -> 1); stable again minReadySeconds after the next Ready."),
				at:   sec(30), memory: &streak{since: sec(10), broken: true},
			},
		},
		{
			name: "broken streak stays False past its deadline, no timer",
			in:   stableInput{pod: readyAt(10, 1), prev: prevCond("False", ReasonContainerRestarted, sec(30)), memory: &streak{since: sec(10), broken: true}, minReady: 5 * time.Second, now: sec(60)},
			want: stableDecision{memory: &streak{since: sec(10), broken: true}},
		},
		{
			name: "the next Ready restarts the clock",
			in:   stableInput{pod: readyAt(40, 1), prev: prevCond("False", ReasonContainerRestarted, sec(30)), memory: &streak{}, minReady: 5 * time.Second, now: sec(41)},
			want: stableDecision{deadline: sec(45), memory: &streak{since: sec(40), restarts: 1}},
		},
		{
			name: "a Ready transition the agent never saw False for also restarts the clock",
			in:   stableInput{pod: readyAt(40, 1), prev: prevCond("False", ReasonContainerRestarted, sec(30)), memory: &streak{since: sec(10), broken: true}, minReady: 5 * time.Second, now: sec(46)},
			want: stableDecision{want: wantCond("True", ReasonMinReadySecondsElapsed, "Ready since 2026-01-02T03:04:45Z for minReadySeconds (5s) without a container restart."), at: sec(45), memory: &streak{since: sec(40), restarts: 1}},
		},
		{
			name: "a missed drop after stable: False first, then the clock",
			in:   stableInput{pod: readyAt(40, 0), prev: prevCond("True", ReasonMinReadySecondsElapsed, sec(15)), memory: &streak{since: sec(10)}, minReady: 5 * time.Second, now: sec(41)},
			want: stableDecision{want: wantCond("False", ReasonNotReady, "Ready went away and came back since the pod became stable."), at: sec(40), deadline: sec(45), memory: &streak{since: sec(40)}},
		},
		{
			name: "restart counts that reset are not restarts",
			in:   stableInput{pod: readyAt(10, 0), prev: prevCond("False", ReasonNotReady, sec(1)), memory: &streak{since: sec(10), restarts: 4}, minReady: 5 * time.Second, now: sec(11)},
			want: stableDecision{deadline: sec(15), memory: &streak{since: sec(10)}},
		},
		{
			name: "a termination the kubelet recorded after Ready is a restart",
			in: stableInput{
				pod:  readiness{ready: true, since: sec(10), restarts: 1, lastTermination: sec(12), terminatedContainer: "app"},
				prev: prevCond("True", ReasonMinReadySecondsElapsed, sec(10)), now: sec(13),
			},
			want: stableDecision{
				want: wantCond("False", ReasonContainerRestarted, `Container "app" terminated at 2026-01-02T03:04:17Z, after the pod became Ready at 2026-01-02T03:04:15Z; stable again minReadySeconds after the next Ready.`),
				at:   sec(13), memory: &streak{since: sec(10), restarts: 1, broken: true},
			},
		},
		{
			name: "a termination before Ready is the past",
			in:   stableInput{pod: readiness{ready: true, since: sec(10), restarts: 1, lastTermination: sec(10)}, memory: &streak{}, now: sec(11)},
			want: stableDecision{want: wantCond("True", ReasonMinReadySecondsElapsed, "Ready since 2026-01-02T03:04:15Z for minReadySeconds (0s) without a container restart."), at: sec(10), memory: &streak{since: sec(10), restarts: 1}},
		},

		// First sight after an agent restart: only the pod tells the past.
		{
			name: "agent restart: True of this streak stays",
			in:   stableInput{pod: readyAt(10, 3), prev: prevCond("True", ReasonMinReadySecondsElapsed, sec(15)), minReady: 5 * time.Second, now: sec(99)},
			want: stableDecision{memory: &streak{since: sec(10), restarts: 3}},
		},
		{
			name: "agent restart: True of this streak with minReadySeconds 0",
			in:   stableInput{pod: readyAt(10, 0), prev: prevCond("True", ReasonMinReadySecondsElapsed, sec(10)), now: sec(99)},
			want: stableDecision{memory: &streak{since: sec(10)}},
		},
		{
			name: "agent restart: True of an earlier streak",
			in:   stableInput{pod: readyAt(40, 0), prev: prevCond("True", ReasonMinReadySecondsElapsed, sec(15)), minReady: 5 * time.Second, now: sec(99)},
			want: stableDecision{want: wantCond("False", ReasonNotReady, "Ready went away and came back since the pod became stable."), at: sec(40), memory: &streak{since: sec(40)}},
		},
		{
			name: "agent restart: restart in this streak keeps it False",
			in:   stableInput{pod: readyAt(10, 1), prev: prevCond("False", ReasonContainerRestarted, sec(12)), minReady: 5 * time.Second, now: sec(99)},
			want: stableDecision{memory: &streak{since: sec(10), restarts: 1, broken: true}},
		},
		{
			name: "agent restart: restart in the same second as Ready counts in this streak",
			in:   stableInput{pod: readyAt(10, 1), prev: prevCond("False", ReasonContainerRestarted, sec(10)), minReady: 5 * time.Second, now: sec(99)},
			want: stableDecision{memory: &streak{since: sec(10), restarts: 1, broken: true}},
		},
		{
			name: "agent restart: Ready since the restart is a new streak",
			in:   stableInput{pod: readyAt(20, 1), prev: prevCond("False", ReasonContainerRestarted, sec(12)), minReady: 5 * time.Second, now: sec(22)},
			want: stableDecision{deadline: sec(25), memory: &streak{since: sec(20), restarts: 1}},
		},
		{
			name: "agent restart: Ready long enough, no condition yet",
			in:   stableInput{pod: readyAt(10, 7), minReady: 5 * time.Second, now: sec(3600)},
			want: stableDecision{want: wantCond("True", ReasonMinReadySecondsElapsed, "Ready since 2026-01-02T03:04:15Z for minReadySeconds (5s) without a container restart."), at: sec(15), memory: &streak{since: sec(10), restarts: 7}},
		},
		{
			name: "Ready without lastTransitionTime gives no start",
			in:   stableInput{pod: readiness{ready: true}, minReady: 5 * time.Second, now: sec(3)},
			want: stableDecision{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, decideStable(tc.in))
		})
	}
}

func TestReadinessOf(t *testing.T) {
	terminated := func(name string, restarts int32, at time.Time) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, RestartCount: restarts, LastTerminationState: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{FinishedAt: metav1.NewTime(at)},
		}}
	}
	pod := &corev1.Pod{Status: corev1.PodStatus{
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: "True", LastTransitionTime: metav1.NewTime(sec(1))},
			{Type: corev1.PodReady, Status: "True", LastTransitionTime: metav1.NewTime(sec(9))},
		},
		InitContainerStatuses: []corev1.ContainerStatus{terminated("sidecar", 2, sec(8)), {Name: "init", RestartCount: 1}},
		ContainerStatuses:     []corev1.ContainerStatus{terminated("app", 3, sec(7)), {Name: "other"}},
		// A debug container's restarts are no sign of the pod's health.
		EphemeralContainerStatuses: []corev1.ContainerStatus{terminated("debug", 9, sec(20))},
	}}
	assert.Equal(t, readiness{ready: true, since: sec(9), restarts: 6, lastTermination: sec(8), terminatedContainer: "sidecar"}, readinessOf(pod))

	pod.Status.Conditions[1].Status = "Unknown"
	assert.False(t, readinessOf(pod).ready)
}
