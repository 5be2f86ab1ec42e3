package lifecycle

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// termination measures KEP-3085 Story 5: from the deletion request to the
// lastTransitionTime of the first sandbox False at or after it.
// deletionTimestamp is the request time plus the grace period, so the
// request time is deletionTimestamp - deletionGracePeriodSeconds.
func (c *stepper) termination() {
	if c.pod.DeletionTimestamp == nil || c.next.TerminationDone {
		return
	}
	sandbox := c.pod.Condition(c.cfg.sandboxTypes()...)
	if c.next.DeletionRequested == 0 {
		var grace int64
		if g := c.pod.DeletionGracePeriodSeconds; g != nil {
			grace = *g
		}
		requested := c.pod.DeletionTimestamp.Unix() - grace
		c.next.DeletionRequested = requested
		c.next.DeletionGrace = Seconds32(grace)
		c.next.DeletionPrecise = c.precise(requested)
		if c.next.Scheduled != 0 && c.next.FirstSandboxReady == 0 && c.cfg.pastTimeout(c.next.Scheduled, requested) {
			// Deleted while still waiting for its first sandbox, past the
			// timeout, and no check caught it pending (podslo was down, or
			// its watch not current).
			c.timedOut(c.next.Scheduled)
		}
		// A sandbox that was ready once and is already down when the
		// deletion is first seen went away before the request (a completed
		// pod): the deletion cost no termination. One that never was ready
		// is left to vanish. First seen with grace 0, the deletion is the
		// kubelet's last one, which moved deletionTimestamp to now: the
		// request podslo missed may have come before the sandbox went, and
		// the termination is lost, not free (vanished).
		if c.next.FirstSandboxReady != 0 && sandbox != nil && sandbox.Status != corev1.ConditionTrue && sandbox.LastTransitionTime < requested {
			c.next.TerminationDone = true
			reason := TerminatedBeforeDelete
			if grace == 0 {
				reason = Vanished
			}
			c.skipOnce(Skip{Termination, reason})
			return
		}
	}
	if sandbox == nil || sandbox.Status != corev1.ConditionFalse || c.next.FirstSandboxReady == 0 {
		return
	}
	down := sandbox.LastTransitionTime
	if down <= c.next.LastSandboxReady {
		// A False older than the newest readiness seen is stale.
		return
	}
	c.next.TerminationDone = true
	// A sandbox down after it was last ready and after the deletion was
	// seen, yet before the request by the clocks, is a kubelet clock behind
	// the API server's (NegativeDuration). The grace period ends at the
	// first request plus its grace, as the kubelet keeps it: the current
	// deletionTimestamp is now after the kubelet's final grace-0 delete,
	// and earlier after a second, shorter delete. A record without the
	// grace (a grace-0 request, or written by a release before) takes the
	// current deletionTimestamp, as before. At one-second precision, a
	// sandbox torn down in the second the grace period ends may or may not
	// be over it; a container the kubelet had to SIGKILL at or after that
	// end says it was.
	end := c.next.GraceEnd(c.pod.DeletionTimestamp.Unix())
	overGrace := down > end || (c.pod.ContainerKilled != 0 && c.pod.ContainerKilled >= end)
	s := between(c.next.DeletionRequested, c.next.DeletionPrecise, down, c.precise(down))
	c.measure(Termination, s, c.tooOldUnseen, func(ms int64) {
		c.next.TerminationMs, c.next.HasTermination = Millis32(ms), true
	}, Observation{Kind: Terminated, OverGrace: overGrace})
}

// GraceEnd is when the grace period of the pod's first deletion request
// ends, in Unix seconds, given its current deletionTimestamp: the first
// request plus its grace, as the kubelet keeps it, or, for a record
// without the grace (a grace-0 request, or one written by a release
// before 0.2.0), the later of the request and deletionTimestamp.
func (s *State) GraceEnd(deletionTimestamp int64) int64 {
	end := s.DeletionRequested + int64(s.DeletionGrace)
	if s.DeletionGrace == 0 {
		end = max(end, deletionTimestamp)
	}
	return end
}

// TerminationPending reports whether the pod's deletion was requested and
// its termination is neither measured nor skipped: its sandbox not yet
// seen gone, the pod still there.
func (s *State) TerminationPending() bool {
	return s.DeletionRequested != 0 && !s.TerminationDone
}

// Swept is Vanish for a pod a sweep found gone after a relist or a
// restart, gone by goneBy: podslo never saw its deletion. A pod still
// waiting for its first sandbox whose creation timeout had passed by
// goneBy, and which no check caught pending past it (the checks wait
// while podslo cannot see), may have been deleted before its deadline or
// after: its timeout can be neither counted nor ruled out, and is skipped
// as vanished.
func Swept(goneBy time.Time, prev State, cfg *Config) (State, Outcome) {
	pending := prev.Scheduled != 0 && prev.FirstSandboxReady == 0 && !prev.TimedOut && prev.DeletionRequested == 0
	next, out := Vanish(prev)
	if pending && cfg.pastTimeout(prev.Scheduled, goneBy.Unix()) {
		next.TimedOut = true
		c := stepper{now: goneBy.Unix(), cfg: cfg, next: &next, out: &out}
		c.skipOnce(Skip{SandboxCreation, Vanished})
	}
	return next, out
}

// Vanish is the pod's deletion from the API: a termination not measured by
// then never will be, nor pulls not in by then (GiveUpPulls), nor a
// start-up whose end podslo never saw.
func Vanish(prev State) (State, Outcome) {
	var out Outcome
	c := stepper{next: &prev, out: &out}
	if !prev.TerminationDone {
		prev.TerminationDone = true
		c.skipOnce(Skip{Termination, Vanished})
	}
	switch {
	case prev.AwaitsPulls():
		c.giveUpPulls()
	case prev.Pulls.Has(StartupEndSeen) || prev.Pulls.Has(StartupDone):
		// Ended (observed, skipped, or left out as a user error).
	case prev.Pulls.Has(StartupNotSchedulable):
		c.startupSkipped(NotSchedulable)
	default:
		// Deleted before podslo saw its containers all run at once
		// (deleted while starting, stuck, blocked by a missing Secret,
		// crashing, or completed before podslo first saw it): counted,
		// not dropped.
		c.startupSkipped(Vanished)
	}
	return prev, out
}
