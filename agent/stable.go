package agent

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Reasons of the Stable condition. Following KEP-1623, the reason says why
// the condition last changed, not what the pod is doing now: a pod whose
// stability clock is running again after a restart keeps
// ContainerRestarted until it becomes True.
const (
	// ReasonMinReadySecondsElapsed: Ready without a break and without a
	// container restart for minReadySeconds.
	ReasonMinReadySecondsElapsed = "MinReadySecondsElapsed"
	// ReasonNotReady: the pod is not Ready, or Ready went away and came back
	// since the pod was last found stable.
	ReasonNotReady = "NotReady"
	// ReasonContainerRestarted: a container restarted during the current
	// Ready streak. The clock restarts at the next Ready transition.
	ReasonContainerRestarted = "ContainerRestarted"
)

// readiness is all the Stable decision reads from a pod.
type readiness struct {
	ready bool
	// since is Ready's lastTransitionTime: when the current streak began,
	// or when Ready last dropped.
	since time.Time
	// restarts sums restartCount over containers and init containers
	// (sidecars restart like containers; plain init containers are done
	// before Ready and no longer change).
	restarts int64
	// lastTermination is the newest lastState.terminated.finishedAt: the
	// kubelet's own record of a restart, which survives an agent restart
	// where the in-memory restart count does not.
	lastTermination time.Time
	// terminatedContainer names the container of lastTermination.
	terminatedContainer string
}

func readinessOf(pod *corev1.Pod) readiness {
	var r readiness
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			r.ready = c.Status == corev1.ConditionTrue
			r.since = c.LastTransitionTime.Time
		}
	}
	for _, statuses := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, s := range statuses {
			r.restarts += int64(s.RestartCount)
			if t := s.LastTerminationState.Terminated; t != nil && t.FinishedAt.After(r.lastTermination) {
				r.lastTermination = t.FinishedAt.Time
				r.terminatedContainer = s.Name
			}
		}
	}
	return r
}

// streak is what the agent remembers of a pod, in memory only: the restart
// count of the pod's Ready streak when the agent first saw it. Nothing is
// persisted; after an agent restart decideStable rebuilds it from the pod.
type streak struct {
	// since is Ready's lastTransitionTime that began the streak; zero while
	// the pod is not Ready.
	since time.Time
	// restarts is the restart count sum when the agent first saw the streak:
	// any growth within the streak is a restart.
	restarts int64
	// broken means a container restarted during the streak; it holds until
	// Ready transitions again.
	broken bool
}

type stableInput struct {
	pod readiness
	// prev is the pod's current Stable condition; nil when it has none.
	prev *corev1.PodCondition
	// memory is what the agent remembers of the pod; nil when this agent
	// process has not seen the pod before.
	memory   *streak
	minReady time.Duration
	now      time.Time
}

type stableDecision struct {
	// want is the Stable condition to write (Status, Reason, Message); nil
	// leaves the pod's condition as it is.
	want *corev1.PodCondition
	// at is want's lastTransitionTime: when the underlying change happened,
	// which KEP-1623 prefers to when the agent noticed it.
	at time.Time
	// deadline is when the pod becomes stable if nothing changes before;
	// zero when no check is due.
	deadline time.Time
	// memory replaces what the agent remembers of the pod; nil keeps the
	// pod unseen, so that the next decision still reads the pod's past.
	memory *streak
}

// decideStable is the whole Stable rule, pure so that it can be
// table-tested:
//
//   - Not Ready: False/NotReady, at Ready's lastTransitionTime. A False
//     condition keeps its reason (a pod that restarted and then lost Ready
//     stays ContainerRestarted), so a drop after a restart costs no write.
//   - Ready, with a container restart since the streak began: restart counts
//     grew past the memory, or the kubelet recorded a termination after
//     Ready's lastTransitionTime. False/ContainerRestarted, at the time the
//     agent saw it, until Ready transitions again.
//   - Ready for minReadySeconds without that: True/MinReadySecondsElapsed,
//     at Ready's lastTransitionTime + minReadySeconds. Before then nothing
//     is written and the deadline is returned for a timer.
//   - Once True, a streak stays True: a minReadySeconds raised later does
//     not take stability back.
//
// After an agent restart (memory nil) the streak's restart baseline is the
// current count, so only the pod says what happened before:
//
//   - Stable=True written at or after Ready's lastTransitionTime belongs to
//     this streak: the pod stays stable.
//   - Stable=True older than Ready's lastTransitionTime belongs to an
//     earlier streak: Ready went away and came back while the agent was not
//     looking, so False/NotReady, and the clock runs from Ready's
//     lastTransitionTime.
//   - Stable=False/ContainerRestarted at or after Ready's
//     lastTransitionTime means the restart was in this streak: it stays
//     False until the next Ready. Older than Ready's lastTransitionTime, the
//     pod has been Ready again since: a new streak.
//
// Condition times have 1-second precision: after an agent restart, a
// restart seen in the same second as the Ready transition that followed it
// is taken for a restart within the new streak, which then waits for one
// more Ready transition. A restart that leaves no termination record and
// happens while the agent is down goes unseen.
func decideStable(in stableInput) stableDecision {
	r, prev := in.pod, in.prev
	if !r.ready {
		d := stableDecision{memory: &streak{}}
		if prev != nil && prev.Status == corev1.ConditionFalse {
			return d
		}
		d.want = &corev1.PodCondition{Status: corev1.ConditionFalse, Reason: ReasonNotReady, Message: "The pod is not Ready."}
		d.at = transitionAt(r.since, prev, in.now)
		return d
	}
	if r.since.IsZero() {
		// A Ready without lastTransitionTime gives the clock no start; the
		// kubelet always sets it, so wait for a status that has one.
		return stableDecision{memory: in.memory}
	}

	var m streak
	// staleTrue: the pod carries a True from an earlier streak.
	staleTrue := false
	switch {
	case in.memory == nil:
		m = streak{since: r.since, restarts: r.restarts}
		if prev != nil && prev.LastTransitionTime.Time.Before(r.since) {
			staleTrue = prev.Status == corev1.ConditionTrue
		} else if prev != nil && prev.Status == corev1.ConditionFalse && prev.Reason == ReasonContainerRestarted {
			m.broken = true
		}
	case !in.memory.since.Equal(r.since):
		// The agent watched the pod before this streak: a new one, even if
		// the False in between never reached the agent.
		m = streak{since: r.since, restarts: r.restarts}
		staleTrue = prev != nil && prev.Status == corev1.ConditionTrue
	default:
		m = *in.memory
		if r.restarts > m.restarts {
			m.broken = true
		}
	}
	restartedAfterReady := r.lastTermination.After(r.since)
	if restartedAfterReady {
		m.broken = true
	}
	if r.restarts < m.restarts {
		// Counts can reset (a node reboot); only growth is a restart.
		m.restarts = r.restarts
	}

	d := stableDecision{memory: &m}
	deadline := r.since.Add(in.minReady)
	switch {
	case m.broken:
		if prev != nil && prev.Status == corev1.ConditionFalse && prev.Reason == ReasonContainerRestarted {
			return d
		}
		msg := fmt.Sprintf("A container restarted while the pod was Ready (restarts %d -> %d); stable again minReadySeconds after the next Ready.", m.restarts, r.restarts)
		if restartedAfterReady {
			msg = fmt.Sprintf("Container %q terminated at %s, after the pod became Ready at %s; stable again minReadySeconds after the next Ready.",
				r.terminatedContainer, r.lastTermination.UTC().Format(time.RFC3339), r.since.UTC().Format(time.RFC3339))
		}
		d.want = &corev1.PodCondition{Status: corev1.ConditionFalse, Reason: ReasonContainerRestarted, Message: msg}
		d.at = transitionAt(in.now, prev, in.now)
	case staleTrue:
		d.want = &corev1.PodCondition{Status: corev1.ConditionFalse, Reason: ReasonNotReady,
			Message: "Ready went away and came back since the pod became stable."}
		d.at = transitionAt(r.since, prev, in.now)
		if in.now.Before(deadline) {
			d.deadline = deadline
		}
	case prev != nil && prev.Status == corev1.ConditionTrue:
	case in.now.Before(deadline):
		d.deadline = deadline
	default:
		d.want = &corev1.PodCondition{Status: corev1.ConditionTrue, Reason: ReasonMinReadySecondsElapsed,
			Message: fmt.Sprintf("Ready since %s for minReadySeconds (%ds) without a container restart.",
				r.since.UTC().Format(time.RFC3339), int64(in.minReady/time.Second))}
		d.at = transitionAt(deadline, prev, in.now)
	}
	return d
}

// transitionAt keeps a transition time between the previous transition and
// now, so that lastTransitionTime never runs backwards or into the future
// (the kubelet's times come from the same node clock, but a status can lag).
func transitionAt(at time.Time, prev *corev1.PodCondition, now time.Time) time.Time {
	if at.IsZero() || at.After(now) {
		at = now
	}
	if prev != nil && at.Before(prev.LastTransitionTime.Time) {
		at = prev.LastTransitionTime.Time
	}
	return at
}
