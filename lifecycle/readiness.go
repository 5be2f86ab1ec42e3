package lifecycle

import corev1 "k8s.io/api/core/v1"

// initialized observes the init phase: from the first sandbox readiness to
// Initialized, for pods with init containers only (for the others,
// Initialized is set before the sandbox exists and means nothing here).
func (c *stepper) initialized() {
	if !c.pod.HasInitContainers {
		return
	}
	in := c.pod.Condition(corev1.PodInitialized)
	if in == nil || in.Status != corev1.ConditionTrue {
		return
	}
	c.phase(PhaseInit, between(c.next.FirstSandboxReady, 0, in.LastTransitionTime, 0))
}

// readiness observes the first Ready: its latency from the newest container
// start, which is the time readiness probes add, and the phases that end
// with it.
func (c *stepper) readiness() {
	if c.next.FirstReady != 0 {
		return
	}
	c.containerStart()
	ready := c.pod.Condition(corev1.PodReady)
	if ready == nil {
		return
	}
	if !validStatus(ready.Status) || (ready.Status == corev1.ConditionTrue && ready.LastTransitionTime == 0) {
		c.skipOnce(Skip{Readiness, InvalidCondition})
		return
	}
	if ready.Status != corev1.ConditionTrue {
		return
	}
	readyAt := ready.LastTransitionTime
	c.next.FirstReady = readyAt
	if c.next.Skipped.Has(Skip{Readiness, RestartedBeforeSeen}) {
		// Skipped already (restartsUnseen): this Ready may be a restart's.
		return
	}
	started := c.pod.ContainersStarted

	// Containers start after the sandbox and, with init containers, after
	// Initialized.
	containersFrom := c.next.FirstSandboxReady
	if in := c.pod.Condition(corev1.PodInitialized); c.pod.HasInitContainers && in != nil && in.Status == corev1.ConditionTrue && in.LastTransitionTime > containersFrom {
		containersFrom = in.LastTransitionTime
	}
	var from Precise
	if started == c.next.ContainerStart {
		from = c.next.ContainerStartPrecise
	}
	s := between(started, from, readyAt, c.precise(readyAt))
	c.phase(PhaseContainers, between(containersFrom, 0, started, 0))
	c.phase(PhaseReadiness, s)
	if c.next.UserError {
		// Like the sandbox phase, the total holds the wait for the pod
		// author's missing Secret or ConfigMap.
		c.next.Phases = c.next.Phases.With(PhaseTotal)
	} else {
		c.phase(PhaseTotal, between(unix(c.pod.CreationTimestamp), 0, readyAt, 0))
	}

	if started == 0 {
		c.skipOnce(Skip{Readiness, NoContainerStarted})
		return
	}
	// Ready before the newest start: a container restarted after Ready and
	// podslo missed the first Ready, so the two times no longer belong
	// together (NegativeDuration).
	c.measure(Readiness, s, c.startupUnseen, func(ms int64) {
		c.next.ReadinessMs, c.next.HasReadiness = Millis32(ms), true
	}, Observation{Kind: BecameReady})
}

// containerStart remembers, until the first Ready, the newest container
// start and the receive time of the update that first showed it: the
// start of the readiness SLI, which a probe may end many updates (and an
// exporter restart) later. A start in the same second as the one already
// remembered is not new to podslo (Pod keeps seconds), so the receive time
// stays the first container's: a second container started within that
// second is measured from the first one's start.
func (c *stepper) containerStart() {
	if started := c.pod.ContainersStarted; started > c.next.ContainerStart {
		c.next.ContainerStart = started
		c.next.ContainerStartPrecise = c.precise(started)
	}
}

// restartsUnseen skips the start-up SLIs whose end podslo has not seen
// yet when an update shows a container restarted and podslo may have
// missed what came before the restart (RestartedBeforeSeen): the update
// came from a list (Pod.Listed), which shows only the current state, or is
// the first podslo saw of the pod scheduled (prevScheduled is 0: a first
// install, a lost state), so a container ran before podslo ever saw the
// pod. The running containers' start, and Ready's transition, may then be
// a restart's, now or in a later update, and the first ones are gone from
// the status. A watch event showing a restart of a pod podslo saw
// scheduled is no such case: a watch delivers every change, the start-up's
// end included, so a restart before that end belongs to the start-up. A
// readiness flap without a restart leaves no trace in the status: a pod
// first seen after one is measured to the flap's Ready (docs/metrics.md).
// SeenLate and SeenRecreated, which skip the same SLIs, take precedence.
func (c *stepper) restartsUnseen(prevScheduled int64) {
	p, n := c.pod, c.next
	if !p.ContainersRestarted || !(p.Listed || prevScheduled == 0) || n.SeenLate || n.SeenRecreated {
		return
	}
	if n.FirstReady == 0 {
		// The phases that end with Ready, and Ready itself; the skip,
		// persisted with the state, is the mark readiness and the first
		// Stable (stability.go) follow.
		n.Phases = n.Phases.With(PhaseContainers).With(PhaseReadiness).With(PhaseTotal)
		c.skipOnce(Skip{StartupPhase, RestartedBeforeSeen})
		c.skipOnce(Skip{Readiness, RestartedBeforeSeen})
	}
	if !n.Pulls.Has(StartupEndSeen) && !n.Pulls.Has(StartupDone) && !n.Pulls.Has(StartupNotSchedulable) {
		c.startupSkipped(RestartedBeforeSeen)
	}
}
