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

// DefaultMaxObservationAge is the default for Config.MaxObservationAge.
const DefaultMaxObservationAge = time.Hour

// Config tunes Step.
type Config struct {
	// SandboxConditionTypes are looked up in order and the first one present
	// on the pod is the sandbox condition. Default DefaultSandboxConditionTypes.
	SandboxConditionTypes []corev1.PodConditionType
	// MaxObservationAge: a first readiness that happened longer ago than this
	// when podslo first sees it is remembered but not observed, so that
	// installing podslo in an old cluster does not flood the histograms with
	// stale start-ups. Default DefaultMaxObservationAge.
	MaxObservationAge time.Duration
}

// Kind is the kind of an Observation.
type Kind uint8

const (
	// SandboxCreated is the first sandbox of a pod becoming ready; Seconds is
	// its latency from PodScheduled.
	SandboxCreated Kind = iota
	// SandboxRecreated is a later sandbox becoming ready after the first one
	// was lost (node or VM crash). It has no latency: KEP-3085 notes that the
	// start of a re-creation is not visible in the conditions.
	SandboxRecreated
)

// Observation is one new SLI data point.
type Observation struct {
	Kind    Kind
	Seconds float64
}

// Outcome lists what a Step found new. Both slices are nil when nothing is,
// which is the common case and allocates nothing.
type Outcome struct {
	Observations []Observation
	Skips        []Skip
}

// Empty reports whether the outcome holds nothing to record.
func (o Outcome) Empty() bool { return len(o.Observations) == 0 && len(o.Skips) == 0 }

// Step derives the next State of a pod from its current object. It is pure:
// the same now, pod and prev always give the same result, and pod is not
// modified. When the returned State equals prev, nothing needs to be stored.
func Step(now time.Time, pod *Pod, prev State, cfg *Config) (State, Outcome) {
	next := prev
	var out Outcome

	sandbox := pod.Condition(cfg.sandboxTypes()...)
	if sandbox == nil {
		return next, out
	}
	if !validStatus(sandbox.Status) || (sandbox.Status == corev1.ConditionTrue && sandbox.LastTransitionTime == 0) {
		// Not consumed: a later well-formed update may still be observed, but
		// the malformed one is counted only once per pod.
		next.skipOnce(&out, Skip{SandboxCreation, InvalidCondition})
		return next, out
	}
	if sandbox.Status != corev1.ConditionTrue {
		// False or Unknown: a sandbox being created, lost, or torn down at
		// termination. None of these is an observation of creation.
		return next, out
	}

	readyAt := sandbox.LastTransitionTime
	switch {
	case prev.FirstSandboxReady == 0:
		next.FirstSandboxReady = readyAt
		next.LastSandboxReady = readyAt
		if reason, ok := next.firstCreation(now, pod, readyAt, cfg); ok {
			out.Observations = append(out.Observations, Observation{Kind: SandboxCreated, Seconds: float64(next.SandboxCreation)})
		} else {
			out.Skips = append(out.Skips, Skip{SandboxCreation, reason})
		}
	case readyAt > prev.LastSandboxReady:
		// A newer transition to True proves the sandbox was lost and rebuilt,
		// even if podslo never saw the False in between (it was down).
		next.LastSandboxReady = readyAt
		next.Recreations++
		out.Observations = append(out.Observations, Observation{Kind: SandboxRecreated})
	}
	return next, out
}

// firstCreation fills the creation latency of a first sandbox readiness and
// reports whether it is to be observed, or else why not.
func (s *State) firstCreation(now time.Time, pod *Pod, readyAt int64, cfg *Config) (Reason, bool) {
	scheduled := pod.Condition(corev1.PodScheduled)
	switch {
	case scheduled == nil:
		return NoScheduledCondition, false
	case !validStatus(scheduled.Status):
		return InvalidCondition, false
	case scheduled.Status != corev1.ConditionTrue:
		return NoScheduledCondition, false
	case scheduled.LastTransitionTime == 0:
		return InvalidCondition, false
	}
	latency := readyAt - scheduled.LastTransitionTime
	if latency < 0 {
		return NegativeDuration, false
	}
	s.SandboxCreation = latency
	s.HasSandboxCreation = true
	if now.Unix()-readyAt > int64(cfg.maxAge()/time.Second) {
		return TooOld, false
	}
	return 0, true
}

func (s *State) skipOnce(out *Outcome, skip Skip) {
	if s.Skipped.Has(skip) {
		return
	}
	s.Skipped = s.Skipped.With(skip)
	out.Skips = append(out.Skips, skip)
}

func (c *Config) sandboxTypes() []corev1.PodConditionType {
	if len(c.SandboxConditionTypes) == 0 {
		return DefaultSandboxConditionTypes
	}
	return c.SandboxConditionTypes
}

func (c *Config) maxAge() time.Duration {
	if c.MaxObservationAge <= 0 {
		return DefaultMaxObservationAge
	}
	return c.MaxObservationAge
}

func validStatus(s corev1.ConditionStatus) bool {
	return s == corev1.ConditionTrue || s == corev1.ConditionFalse || s == corev1.ConditionUnknown
}
