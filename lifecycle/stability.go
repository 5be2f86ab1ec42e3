package lifecycle

import corev1 "k8s.io/api/core/v1"

// stability reads the Stable condition podslo's agent writes: the first
// Stable=True gives the stabilization latency from the first Ready, and
// every later Stable=False after a True is stability lost (a readiness drop
// or a container restart).
func (c *stepper) stability() {
	stable := c.pod.Condition(c.cfg.stableType())
	if stable == nil {
		return
	}
	if !validStatus(stable.Status) || stable.LastTransitionTime == 0 {
		c.skipOnce(Skip{Stabilization, InvalidCondition})
		return
	}
	wasStable := c.next.Stable
	c.next.StableSeen = true
	c.next.Stable = stable.Status == corev1.ConditionTrue
	at := stable.LastTransitionTime
	switch {
	case stable.Status == corev1.ConditionTrue && c.next.FirstStable == 0:
		c.next.FirstStable = at
		c.firstStable(at)
	case stable.Status == corev1.ConditionFalse && c.next.FirstStable != 0 &&
		(wasStable || at > c.next.FirstStable && at > c.next.StabilityLost):
		// A True seen turning False is a loss even within the same second
		// (times have one-second precision); and a False newer than any
		// counted is one too, even if podslo missed the True in between.
		c.next.StabilityLost = max(at, c.next.StabilityLost)
		c.next.StabilityLosses++
		c.out.observe(Observation{Kind: StabilityLost})
	}
}

func (c *stepper) firstStable(at int64) {
	ready := c.next.FirstReady
	switch {
	case ready == 0:
		// Stable without a Ready podslo saw: nothing to measure from.
		c.skipOnce(Skip{Stabilization, InvalidCondition})
	case c.next.Skipped.Has(Skip{Readiness, RestartedBeforeSeen}):
		// The first Ready podslo saw may have been a restart's: the skip,
		// persisted with the state, is the mark.
		c.skipOnce(Skip{Stabilization, RestartedBeforeSeen})
	default:
		c.measure(Stabilization, between(ready, 0, at, 0), c.startupUnseen, func(ms int64) {
			c.next.Stabilization, c.next.HasStabilization = Seconds32(ms/1000), true
		}, Observation{Kind: Stabilized})
	}
}
