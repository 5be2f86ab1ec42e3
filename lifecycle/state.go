package lifecycle

import "fmt"

// SLI names one service level indicator. The string form is the value of the
// "sli" label on podslo_observations_skipped_total.
type SLI uint8

const (
	// SandboxCreation is the latency from PodScheduled to the first sandbox
	// readiness (KEP-3085).
	SandboxCreation SLI = iota
	numSLIs
)

func (s SLI) String() string {
	switch s {
	case SandboxCreation:
		return "sandbox_creation"
	}
	return fmt.Sprintf("sli(%d)", uint8(s))
}

// Reason says why an observation was not made. The string form is the value
// of the "reason" label on podslo_observations_skipped_total.
type Reason uint8

const (
	// TooOld: the event happened longer than MaxObservationAge before podslo
	// first saw it, e.g. pods that were running before podslo was installed.
	TooOld Reason = iota
	// NegativeDuration: the end is before the start, which only clock skew
	// between the scheduler and the kubelet can cause.
	NegativeDuration
	// NoScheduledCondition: the sandbox is ready but PodScheduled is not True.
	NoScheduledCondition
	// InvalidCondition: a condition has a zero time or a status other than
	// True, False or Unknown.
	InvalidCondition
	numReasons
)

func (r Reason) String() string {
	switch r {
	case TooOld:
		return "too_old"
	case NegativeDuration:
		return "negative_duration"
	case NoScheduledCondition:
		return "no_scheduled_condition"
	case InvalidCondition:
		return "invalid_condition"
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// Skip is one observation that was not made, and why.
type Skip struct {
	SLI    SLI
	Reason Reason
}

// SkipSet remembers which skips were already counted for a pod, so that a pod
// that stays malformed for a thousand updates is counted once, not a thousand
// times.
type SkipSet uint32

func skipBit(s Skip) SkipSet { return 1 << (uint(s.SLI)*uint(numReasons) + uint(s.Reason)) }

// Has reports whether s was already counted.
func (m SkipSet) Has(s Skip) bool { return m&skipBit(s) != 0 }

// With returns the set with s added.
func (m SkipSet) With(s Skip) SkipSet { return m | skipBit(s) }

// State is everything podslo must remember about one pod UID to observe each
// SLI exactly once, across exporter restarts. Times are Unix seconds, the
// precision of condition timestamps; zero means "not seen".
type State struct {
	// FirstSandboxReady is the lastTransitionTime of the first sandbox
	// condition seen True. Once set, the first creation is consumed: it was
	// observed, or skipped with a reason, and never looked at again.
	FirstSandboxReady int64
	// LastSandboxReady is the newest True lastTransitionTime seen; a newer one
	// is a sandbox re-creation.
	LastSandboxReady int64
	// SandboxCreation is the first sandbox's latency in seconds, valid when
	// HasSandboxCreation is set.
	SandboxCreation int64
	// Recreations counts distinct re-creations of the sandbox.
	Recreations uint32
	// HasSandboxCreation is set when the first creation latency is known and
	// not negative, whether or not it went into the histogram.
	HasSandboxCreation bool
	// Skipped holds the skips already counted.
	Skipped SkipSet
}
