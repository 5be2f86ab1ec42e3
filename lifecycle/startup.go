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
// later or earlier than that update (another watch), so the end is kept
// in the state (StartupBase) until they are in (finishStartup).

// startup records the start-up SLI's end, once: the first update that
// shows every container of the pod running.
func (c *stepper) startup() {
	p := c.pod
	if c.next.HasStartupBase || c.next.StartupDone || p.Containers == 0 || p.ContainersRunning < p.Containers || p.DeletionTimestamp != nil {
		return
	}
	created := unix(p.CreationTimestamp)
	if created == 0 || p.ContainersStarted == 0 {
		return
	}
	if r, skip := c.startupUnseen(p.ContainersStarted); skip {
		c.next.StartupDone = true
		c.skipOnce(Skip{PodStartup, r})
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
		if in == nil || in.Status != corev1.ConditionTrue || c.next.FirstSandboxReady == 0 || in.LastTransitionTime < c.next.FirstSandboxReady {
			// Containers run, yet the init phase cannot be told: not
			// measurable.
			c.next.StartupDone = true
			c.skipOnce(Skip{PodStartup, InvalidCondition})
			return
		}
		base -= (in.LastTransitionTime - c.next.FirstSandboxReady) * 1000
		precise = false
	}
	c.next.StartupBase, c.next.HasStartupBase, c.next.StartupBasePrecise = base, true, precise
	c.next.Stateful = len(p.Volumes) > 0
	c.finishStartup()
}

// finishStartup observes the start-up SLI once both its end and the pod's
// pulls are known. A pod with a failed pull, or blocked by a missing
// Secret or ConfigMap, is left out: its start-up holds the pod author's
// mistake and the kubelet's back-off.
func (c *stepper) finishStartup() {
	n := c.next
	if !n.HasStartupBase || n.StartupDone || !(n.ImagePullDone || n.ImagePullFailed) {
		return
	}
	n.StartupDone = true
	switch {
	case n.ImagePullFailed:
		c.skipOnce(Skip{PodStartup, ImagePullFailed})
		return
	case n.UserError:
		return
	}
	// The init containers' pulls are inside the init phase, which is
	// taken off already.
	ms := n.StartupBase - int64(n.ImagePull) + int64(n.ImagePullInit)
	if ms < 0 {
		c.skipOnce(Skip{PodStartup, NegativeDuration})
		return
	}
	n.Startup, n.HasStartup = uint32(min(ms, 1<<32-1)), true
	c.out.observe(Observation{Kind: StartedUp, Seconds: float64(ms) / 1000, Precise: n.StartupBasePrecise, Stateful: n.Stateful})
}
