package lifecycle

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// DefaultSandboxConditionTypes are the condition types that mark a ready
// sandbox, newest name first: kubelets before 1.29 wrote PodHasNetwork.
var DefaultSandboxConditionTypes = []corev1.PodConditionType{
	corev1.PodReadyToStartContainers,
	"PodHasNetwork",
}

func (c *stepper) sandbox() {
	sandbox := c.pod.Condition(c.cfg.sandboxTypes()...)
	if sandbox == nil {
		return
	}
	if !validStatus(sandbox.Status) || (sandbox.Status == corev1.ConditionTrue && sandbox.LastTransitionTime == 0) {
		// Not consumed: a later well-formed update may still be observed, but
		// the malformed one is counted only once per pod.
		c.skipOnce(Skip{SandboxCreation, InvalidCondition})
		return
	}
	if first := c.pod.FirstContainerStart; c.next.FirstSandboxReady == 0 && first != 0 && c.pod.DeletionTimestamp == nil &&
		(sandbox.Status != corev1.ConditionTrue || first < sandbox.LastTransitionTime) && c.lostBefore(sandbox, first) {
		// A container ran before the sandbox's current readiness, or
		// while no sandbox is ready: containers start only in a ready
		// sandbox, so the first one was ready by then and is gone. What
		// the condition shows is a re-creation (or its absence), and the
		// first creation can no longer be measured, nor have timed out.
		c.recreatedBeforeSeen(sandbox, first)
		return
	}
	if sandbox.Status != corev1.ConditionTrue {
		// False or Unknown: a sandbox being created, lost, or torn down at
		// termination. None of these is an observation of creation. A
		// loss after the last readiness is remembered: the kubelet often
		// re-creates the sandbox within the second, and a loss in the
		// second of the readiness leaves the re-creation the same time.
		if c.next.FirstSandboxReady != 0 && c.pod.DeletionTimestamp == nil && sandbox.LastTransitionTime >= c.next.LastSandboxReady {
			c.next.SandboxDownSeen = true
		}
		return
	}
	readyAt := sandbox.LastTransitionTime
	switch {
	case c.next.FirstSandboxReady == 0:
		c.next.FirstSandboxReady = readyAt
		c.next.LastSandboxReady = readyAt
		c.firstCreation(readyAt)
	case readyAt > c.next.LastSandboxReady:
		if c.typeAdded(sandbox) {
			// An upgraded kubelet writes the new condition type beside the
			// old one it no longer updates: the same sandbox, newly named.
			c.next.LastSandboxReady = readyAt
			return
		}
		// A newer transition to True proves the sandbox was lost and rebuilt,
		// even if podslo never saw the False in between (it was down).
		c.recreated(readyAt)
	case readyAt == c.next.LastSandboxReady && c.next.SandboxDownSeen:
		// Lost and rebuilt within the second of the last readiness: the
		// times alone cannot show it, the False podslo saw between does.
		c.recreated(readyAt)
	}
}

// recreated counts a re-created sandbox, ready at readyAt.
func (c *stepper) recreated(readyAt int64) {
	c.next.LastSandboxReady = readyAt
	c.next.SandboxDownSeen = false
	c.next.Recreations++
	c.out.observe(Observation{Kind: SandboxRecreated})
}

// kubeletConditionLag bounds how long after the containers' start a
// kubelet before 1.36 writes the first PodReadyToStartContainers=True: it
// computes the pod's status at the start of a sync, from the runtime's
// state before the sync, so the sandbox that the previous sync created and
// started the containers in shows up one sync later, with that sync's time
// (docs/compatibility.md; on the real node with 1.34, 1 to 2 s).
const kubeletConditionLag = 10

// lostBefore reports whether a container start before the sandbox's
// current readiness (or while none is ready) proves that an earlier
// sandbox was lost. A 1.36 or newer kubelet writes the condition before it
// starts a container, but an older one after: its first readiness comes
// up to a sync after the containers' start, which alone is no proof. A lost
// sandbox's re-creation restarts every container (restartCount); without a
// restart, only a start more than kubeletConditionLag earlier is proof.
func (c *stepper) lostBefore(sandbox *Condition, first int64) bool {
	return c.pod.ContainersRestarted || (sandbox.LastTransitionTime != 0 && first < sandbox.LastTransitionTime-kubeletConditionLag)
}

// recreatedBeforeSeen consumes the first creation of a pod whose first
// sandbox was lost before podslo saw it ready. The sandbox was ready at
// the latest when the first container started: a readiness after that is
// a re-creation from then on, and the current one, if True, is where
// podslo starts counting.
func (c *stepper) recreatedBeforeSeen(sandbox *Condition, firstContainer int64) {
	c.next.SeenRecreated = true
	c.next.FirstSandboxReady = firstContainer
	if sandbox.Status == corev1.ConditionTrue {
		c.next.FirstSandboxReady = sandbox.LastTransitionTime
	}
	c.next.LastSandboxReady = c.next.FirstSandboxReady
	c.next.Phases = c.next.Phases.With(PhaseSandbox)
	c.skipOnce(Skip{SandboxCreation, RecreatedBeforeSeen})
}

// typeAdded reports whether another sandbox condition type still shows the
// readiness podslo last observed, True at the same second: then the newer
// time of the preferred type is that type appearing, not a re-creation.
// (A re-created sandbox moves the condition the kubelet still writes.)
func (c *stepper) typeAdded(sandbox *Condition) bool {
	for _, t := range c.cfg.sandboxTypes() {
		if t == sandbox.Type {
			continue
		}
		if o := c.pod.Condition(t); o != nil && o.Status == corev1.ConditionTrue && o.LastTransitionTime == c.next.LastSandboxReady {
			return true
		}
	}
	return false
}

// firstCreation decides what the first sandbox readiness becomes: an
// observation, an exclusion, or a skip with a reason. It is consumed either
// way.
func (c *stepper) firstCreation(readyAt int64) {
	skip := func(r Reason) { c.skipOnce(Skip{SandboxCreation, r}) }
	scheduled := c.pod.Condition(corev1.PodScheduled)
	switch {
	case scheduled == nil:
		skip(NoScheduledCondition)
		return
	case !validStatus(scheduled.Status):
		skip(InvalidCondition)
		return
	case scheduled.Status != corev1.ConditionTrue:
		skip(NoScheduledCondition)
		return
	case scheduled.LastTransitionTime == 0:
		skip(InvalidCondition)
		return
	}
	if c.next.SeenLate {
		c.phase(PhaseSandbox, between(scheduled.LastTransitionTime, 0, readyAt, 0))
		if readyAt >= scheduled.LastTransitionTime && c.tooOld(readyAt) {
			// Ready since before podslo's window: the per-pod series may
			// show its latency, as for any pod ready that long. A recent
			// readiness of a pod first seen late may be a re-created
			// sandbox, whose time since scheduling is no creation.
			c.next.SandboxCreationMs = Millis32((readyAt - scheduled.LastTransitionTime) * 1000)
			c.next.HasSandboxCreation = true
		}
		skip(TooOld)
		return
	}
	if c.next.UserError {
		// The wait was for the pod author's missing Secret or ConfigMap: it
		// says nothing about CSI, CNI or the runtime handler, so neither the
		// SLI nor the sandbox phase gets it.
		c.next.Phases = c.next.Phases.With(PhaseSandbox)
		c.exclude()
		if readyAt >= scheduled.LastTransitionTime {
			c.next.SandboxCreationMs = Millis32((readyAt - scheduled.LastTransitionTime) * 1000)
			c.next.HasSandboxCreation = true
		}
		return
	}
	var from Precise
	if scheduled.LastTransitionTime == c.next.Scheduled {
		from = c.next.ScheduledPrecise
	}
	s := between(scheduled.LastTransitionTime, from, readyAt, c.precise(readyAt))
	c.phase(PhaseSandbox, s)
	c.measure(SandboxCreation, s, c.startupUnseen, func(ms int64) {
		c.next.SandboxCreationMs, c.next.HasSandboxCreation = Millis32(ms), true
		if c.cfg.pastTimeout(scheduled.LastTransitionTime, readyAt) {
			// No check caught the pod pending past its timeout (podslo
			// was down, or its watch not current): the sandbox's own time
			// shows the timeout all the same.
			c.timedOut(scheduled.LastTransitionTime)
		}
	}, Observation{Kind: SandboxCreated})
}

// exclude counts the pod once in the excluded creations.
func (c *stepper) exclude() {
	if c.next.Excluded {
		return
	}
	c.next.Excluded = true
	c.out.observe(Observation{Kind: SandboxExcluded})
}

// Timeout is the periodic check of a pod that may be waiting for its first
// sandbox: past the creation timeout it counts once, as a timeout or, for a
// user error, as an exclusion. A pod that times out and later becomes ready
// is still observed in the creation histogram. A pod no check caught
// pending past its timeout is counted when its first sandbox readiness or
// its deletion request shows it (firstCreation, termination). Of the
// inputs, only the user error counts here; the pulls wait for Step or Fold.
func Timeout(now time.Time, in Inputs, prev State, cfg *Config) (State, Outcome) {
	prev = in.onto(prev)
	next := prev
	var out Outcome
	if prev.Scheduled == 0 || prev.FirstSandboxReady != 0 || prev.TimedOut || prev.DeletionRequested != 0 {
		return next, out
	}
	if !cfg.pastTimeout(prev.Scheduled, now.Unix()) {
		return next, out
	}
	c := stepper{now: now.Unix(), cfg: cfg, next: &next, out: &out}
	c.timedOut(prev.Scheduled)
	return next, out
}

// pastTimeout reports whether at is past the creation timeout of a pod
// scheduled at scheduled (Unix seconds).
func (c *Config) pastTimeout(scheduled, at int64) bool {
	return at-scheduled > int64(c.timeout()/time.Second)
}

// timedOut counts, once, a pod known to have waited for its first sandbox
// past the creation timeout: a timeout, an exclusion for a user error, or a
// too_old skip when the deadline passed before podslo could see it (first
// seen late, or podslo down longer than the max age): a stuck pod found
// days later is not a fresh timeout.
func (c *stepper) timedOut(scheduled int64) {
	if c.next.TimedOut {
		return
	}
	c.next.TimedOut = true
	if c.next.SeenRecreated {
		c.skipOnce(Skip{SandboxCreation, RecreatedBeforeSeen})
		return
	}
	if c.next.SeenLate || c.tooOld(scheduled+int64(c.cfg.timeout()/time.Second)) {
		c.skipOnce(Skip{SandboxCreation, TooOld})
		return
	}
	if c.next.UserError {
		c.exclude()
		return
	}
	c.out.observe(Observation{Kind: SandboxTimedOut})
}

// Pending reports whether the pod is scheduled and still waiting for its
// first sandbox.
func (s *State) Pending() bool {
	return s.Scheduled != 0 && s.FirstSandboxReady == 0 && s.DeletionRequested == 0
}

// MarkUserError records that a FailedMount event blamed the pod's own spec.
// It only matters before the first sandbox readiness: what was observed
// stays observed.
func MarkUserError(prev State) State {
	prev.UserError = true
	return prev
}

func (c *Config) sandboxTypes() []corev1.PodConditionType {
	if len(c.SandboxConditionTypes) == 0 {
		return DefaultSandboxConditionTypes
	}
	return c.SandboxConditionTypes
}

func (c *Config) timeout() time.Duration {
	if c.SandboxCreationTimeout <= 0 {
		return DefaultSandboxCreationTimeout
	}
	return c.SandboxCreationTimeout
}
