package lifecycle

import corev1 "k8s.io/api/core/v1"

// sig-scalability's pod start-up SLI (kubernetes/community,
// sig-scalability/slos/pod_startup_latency.md), as the kubelet's
// kubelet_pod_start_sli_duration_seconds measures it: from the pod's
// creation to the moment a watch first sees every container running,
// minus the time its images took to pull and, for a pod with init
// containers, minus the init phase. The start is creationTimestamp, whole
// seconds, as for the kubelet; the end is the watch receive time of the
// update that first shows every container running while podslo's watch is
// current, else the newest container start, in seconds. The pulls come
// later or earlier than that update (another watch), so whichever comes
// first waits in the state for the other (finishStartup): the end as
// State.StartupBeforePulls, the pulls as State.ImagePull and
// State.ImagePullInit.

// startup records the start-up SLI's end, once: the first update that
// shows every container of the pod running.
func (c *stepper) startup() {
	p, n := c.pod, c.next
	if s := p.Condition(corev1.PodScheduled); s != nil && s.Status == corev1.ConditionFalse {
		// The scheduler, or the API server for a gated pod, said the pod
		// waits. A pod first seen bound cannot tell, and is measured.
		n.Pulls |= StartupNotSchedulable
	}
	if n.Pulls.Has(StartupEndSeen) || n.Pulls.Has(StartupDone) || p.Containers == 0 || p.ContainersRunning < p.Containers || p.DeletionTimestamp != nil {
		return
	}
	if n.Pulls.Has(StartupNotSchedulable) {
		c.startupSkipped(NotSchedulable)
		return
	}
	created := unix(p.CreationTimestamp)
	if created == 0 || p.ContainersStarted == 0 {
		return
	}
	if r, skip := c.startupUnseen(p.ContainersStarted); skip {
		c.startupSkipped(r)
		return
	}
	end, precise := p.ContainersStarted*1000, false
	if r := p.Received; r != 0 && r >= end-c.cfg.watchTolerance().Milliseconds() {
		// Seen by a current watch: this update is the first to show every
		// container running, and its receive time is when a watch saw it.
		end, precise = r, true
	}
	base := end - created*1000
	if p.HasInitContainers {
		in := p.Condition(corev1.PodInitialized)
		if in == nil || in.Status != corev1.ConditionTrue || n.FirstSandboxReady == 0 || in.LastTransitionTime < n.FirstSandboxReady {
			// Containers run, yet the init phase cannot be told.
			c.startupSkipped(InvalidCondition)
			return
		}
		base -= (in.LastTransitionTime - n.FirstSandboxReady) * 1000
		precise = false
	}
	if len(p.Volumes) > 0 || p.StatefulVolume {
		n.Pulls |= StartupStateful
	}
	if precise {
		n.Pulls |= StartupEndPrecise
	}
	n.Pulls |= StartupEndSeen
	n.StartupBeforePulls = int32(max(min(base, maxMs), -maxMs))
	if n.Pulls.Has(PullsDone) || n.Pulls.Has(PullFailedCounted) {
		c.finishStartup()
	}
}

// startupSkipped ends the start-up SLI without an observation.
func (c *stepper) startupSkipped(r Reason) {
	c.next.Pulls |= StartupDone
	c.skipOnce(Skip{PodStartup, r})
}

// finishStartup observes the start-up SLI, whose end
// State.StartupBeforePulls holds, once the pod's pulls (State.ImagePull,
// and the init containers' part of them, State.ImagePullInit) are in. A
// pod with a failed pull, or blocked by a missing Secret or ConfigMap, is
// left out: its start-up holds the pod author's mistake and the kubelet's
// back-off.
func (c *stepper) finishStartup() {
	n := c.next
	switch {
	case n.Pulls.Has(StartupDone):
		return
	case n.Pulls.Has(PullFailedCounted):
		c.startupSkipped(ImagePullFailed)
		return
	case n.UserError:
		n.Pulls |= StartupDone
		return
	}
	// The init containers' pulls are inside the init phase, which is
	// taken off already.
	ms := int64(n.StartupBeforePulls) - int64(n.ImagePull) + int64(n.ImagePullInit)
	if ms < 0 {
		c.startupSkipped(NegativeDuration)
		return
	}
	n.Pulls |= StartupDone | StartupMeasured
	n.Startup = int32(min(ms, maxMs))
	c.out.observe(Observation{Kind: StartedUp, Seconds: float64(n.Startup) / 1000, Precise: n.Pulls.Has(StartupEndPrecise), Stateful: n.Pulls.Has(StartupStateful)})
}
