package lifecycle

import (
	"fmt"
	"math"
)

// SLI names one service level indicator. The string form is the value of the
// "sli" label on podslo_observations_skipped_total.
type SLI uint8

const (
	// SandboxCreation is the latency from PodScheduled to the first sandbox
	// readiness (KEP-3085).
	SandboxCreation SLI = 0
	// Termination is the latency from the deletion request to the sandbox
	// going away (KEP-3085 Story 5).
	Termination SLI = 1
	// Readiness is the latency from the newest container start to Ready.
	Readiness SLI = 2
	// StartupPhase is the start-up breakdown by phase.
	StartupPhase SLI = 3
	// Stabilization is the latency from the first Ready to the first
	// Stable (the Stable Pods proposal, written by podslo's agent).
	Stabilization SLI = 4
	// ImagePull is the time a pod's images took to pull, from the
	// kubelet's Pulled events (pulls.go).
	ImagePull SLI = 5
	// PodStartup is sig-scalability's pod start-up SLI: creation to all
	// containers started and seen, minus image pulls and init containers
	// (startup.go).
	PodStartup SLI = 6

	// numSLIs is one past the last SLI: the values above are persisted
	// (store/codec.go), so a new SLI takes the next value and none is
	// ever renumbered.
	numSLIs = PodStartup + 1
)

func (s SLI) String() string {
	switch s {
	case SandboxCreation:
		return "sandbox_creation"
	case Termination:
		return "termination"
	case Readiness:
		return "readiness"
	case StartupPhase:
		return "startup_phase"
	case Stabilization:
		return "stabilization"
	case ImagePull:
		return "image_pull"
	case PodStartup:
		return "pod_startup"
	}
	return fmt.Sprintf("sli(%d)", uint8(s))
}

// Reason says why an observation was not made. The string form is the value
// of the "reason" label on podslo_observations_skipped_total.
type Reason uint8

const (
	// TooOld: the event happened longer than MaxObservationAge before podslo
	// first saw it, e.g. pods that were running before podslo was installed.
	TooOld Reason = 0

	// NegativeDuration: the end is before the start, which only clock skew
	// between the scheduler and the kubelet can cause.
	NegativeDuration Reason = 1
	// NoScheduledCondition: the sandbox is ready but PodScheduled is not True.
	NoScheduledCondition Reason = 2
	// InvalidCondition: a condition has a zero time or a status other than
	// True, False or Unknown.
	InvalidCondition Reason = 3
	// Vanished: the pod was deleted before its termination could be
	// measured: a force deletion, or a pod whose sandbox never existed.
	Vanished Reason = 4
	// TerminatedBeforeDelete: the sandbox was already gone when the
	// deletion was requested (a completed pod, say), so the deletion cost
	// no termination.
	TerminatedBeforeDelete Reason = 5
	// NoContainerStarted: the pod is Ready but no container reports a
	// running start time.
	NoContainerStarted Reason = 6
	// RecreatedBeforeSeen: the pod's first sandbox was lost before podslo
	// saw it ready (podslo was down, new, or its state lost): a container
	// shows a start before the current sandbox's readiness, so that
	// readiness is a re-creation and the pod's start-up cannot be measured.
	RecreatedBeforeSeen Reason = 7
	// ImagePullFailed: a pull of one of the pod's images failed during its
	// start-up (ErrImagePull), so the start-up holds the back-off of the
	// pod author's image reference, not the platform's start-up.
	ImagePullFailed Reason = 8
	// NotSchedulable: the pod waited to be scheduled (PodScheduled=False
	// was seen: no node fit, a scheduling gate, preemption), so its
	// start-up holds a cluster scale-up or a gate, which sig-scalability's
	// start-up SLI leaves out: it covers pods schedulable at once.
	NotSchedulable Reason = 9
	// PullsUnknown: the pod's containers all ran, but the kubelet's image
	// events of some never came: its event recorder drops a pod's events
	// past a burst of 25 and rewrites repeated messages as "(combined from
	// similar events)", and an event can outlive neither its hour nor the
	// pod. Without its pulls neither the pod's pulls nor its start-up SLI
	// can be measured; they are given up when the pod goes, or
	// PullsWait after its containers were first seen running.
	PullsUnknown Reason = 10
	// RestartedBeforeSeen: before podslo saw the pod's start-up end, an
	// update from a list (a relist after an outage), or the first update
	// it saw of the pod scheduled (a first install, a lost state), showed
	// a container restarted: the running containers' start times, and
	// Ready's, may be those of the restart, not of the pod's start-up, and
	// the first ones are gone from the status (readiness.go).
	RestartedBeforeSeen Reason = 11

	// numReasons is one past the last Reason; as for SLI, the values are
	// persisted and only ever appended.
	numReasons = RestartedBeforeSeen + 1
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
	case Vanished:
		return "vanished"
	case TerminatedBeforeDelete:
		return "terminated_before_delete"
	case NoContainerStarted:
		return "no_container_started"
	case RecreatedBeforeSeen:
		return "recreated_before_seen"
	case ImagePullFailed:
		return "image_pull_failed"
	case NotSchedulable:
		return "not_schedulable"
	case PullsUnknown:
		return "pulls_unknown"
	case RestartedBeforeSeen:
		return "restarted_before_seen"
	}
	return fmt.Sprintf("reason(%d)", uint8(r))
}

// Skip is one observation that was not made, and why.
type Skip struct {
	SLI    SLI
	Reason Reason
}

// Known reports whether this release knows both the SLI and the Reason: a
// state written by a newer release may name values appended since.
func (s Skip) Known() bool { return s.SLI < numSLIs && s.Reason < numReasons }

// SkipSet remembers which skips were already counted for a pod, so that a pod
// that stays malformed for a thousand updates is counted once, not a thousand
// times. It has room for maxSLIs SLIs of maxReasons reasons each: bit
// SLI*maxReasons+Reason. The layout lives in memory only; the store
// persists the skips by their fixed SLI and Reason values (SLI<<8|Reason).
type SkipSet [4]uint64

// The room of a SkipSet: 16 SLIs of 16 reasons each, 256 bits.
const (
	maxSLIs    = 16
	maxReasons = 16
)

// A SkipSet has a bit for every SLI and Reason: these fail to compile once
// the SLIs or the reasons outgrow its room, or the room its bits.
var (
	_ [maxSLIs - int(numSLIs)]struct{}
	_ [maxReasons - int(numReasons)]struct{}
	_ [len(SkipSet{})*64 - maxSLIs*maxReasons]struct{}
)

// skipBit is the word and bit of s; false for a skip outside the room.
func skipBit(s Skip) (word int, bit uint64, ok bool) {
	if s.SLI >= maxSLIs || s.Reason >= maxReasons {
		return 0, 0, false
	}
	i := uint(s.SLI)*maxReasons + uint(s.Reason)
	return int(i / 64), 1 << (i % 64), true
}

// All returns every skip in the set, in order of SLI, then Reason.
func (m SkipSet) All() []Skip {
	if m.Empty() {
		return nil
	}
	var out []Skip
	for sli := range SLI(maxSLIs) {
		for r := range Reason(maxReasons) {
			if s := (Skip{SLI: sli, Reason: r}); m.Has(s) {
				out = append(out, s)
			}
		}
	}
	return out
}

// Empty reports whether no skip was counted.
func (m SkipSet) Empty() bool { return m == SkipSet{} }

// Has reports whether s was already counted.
func (m SkipSet) Has(s Skip) bool {
	w, b, ok := skipBit(s)
	return ok && m[w]&b != 0
}

// With returns the set with s added. A skip outside the room is no skip of
// this release (Known is false for it) and leaves the set as it is.
func (m SkipSet) With(s Skip) SkipSet {
	if w, b, ok := skipBit(s); ok {
		m[w] |= b
	}
	return m
}

// Phase is a start-up phase of podslo_startup_phase_duration_seconds.
type Phase uint8

const (
	// PhaseScheduling runs from creation to PodScheduled.
	PhaseScheduling Phase = 0

	// PhaseSandbox runs from PodScheduled to the first sandbox readiness.
	PhaseSandbox Phase = 1
	// PhaseInit runs from sandbox readiness to Initialized, for pods with
	// init containers only.
	PhaseInit Phase = 2
	// PhaseContainers runs from the later of sandbox readiness and
	// Initialized to the newest container start.
	PhaseContainers Phase = 3
	// PhaseReadiness runs from the newest container start to Ready.
	PhaseReadiness Phase = 4
	// PhaseTotal runs from creation to Ready.
	PhaseTotal Phase = 5

	// numPhases is one past the last Phase; the values are persisted as
	// PhaseSet bits and only ever appended.
	numPhases = PhaseTotal + 1
)

func (p Phase) String() string {
	switch p {
	case PhaseScheduling:
		return "scheduling"
	case PhaseSandbox:
		return "sandbox"
	case PhaseInit:
		return "init"
	case PhaseContainers:
		return "containers"
	case PhaseReadiness:
		return "readiness"
	case PhaseTotal:
		return "total"
	}
	return fmt.Sprintf("phase(%d)", uint8(p))
}

// Known reports whether this release knows the phase.
func (p Phase) Known() bool { return p < numPhases }

// PhaseSet remembers which phases are done: observed or skipped. Bit p is
// Phase p, whose value is fixed, so the store persists the set as it is.
type PhaseSet uint8

// This fails to compile once the phases no longer fit in a PhaseSet.
var _ [8 - int(numPhases)]struct{}

// Has reports whether p is done.
func (m PhaseSet) Has(p Phase) bool { return m&(1<<p) != 0 }

// With returns the set with p added.
func (m PhaseSet) With(p Phase) PhaseSet { return m | 1<<p }

// PullFlags are the facts of a pod's image pulls and start-up SLI. The
// bits are persisted (store/codec.go): a new one takes the next bit, of
// which a uint16 leaves six.
type PullFlags uint16

const (
	// PullsDone: every container's image was pulled or found present, and
	// State.ImagePull holds their sum; the pulls were observed or skipped.
	PullsDone PullFlags = 1 << 0
	// PullsCached: every image was already present (a cache hit).
	PullsCached PullFlags = 1 << 1
	// PullFailedCounted: a failed pull of the pod's was counted.
	PullFailedCounted PullFlags = 1 << 2
	// StartupEndSeen: the update that first showed every container
	// running was seen, and State.StartupBeforePulls holds the SLI before
	// the pulls are taken off; StartupEndPrecise: timed by the watch.
	StartupEndSeen    PullFlags = 1 << 3
	StartupEndPrecise PullFlags = 1 << 4
	// StartupStateful: the pod is stateful (Pod.StatefulVolume, or a PVC-backed volume).
	StartupStateful PullFlags = 1 << 5
	// StartupMeasured: State.Startup holds the start-up SLI.
	StartupMeasured PullFlags = 1 << 6
	// StartupDone: the start-up SLI was observed or skipped.
	StartupDone PullFlags = 1 << 7
	// StartupNotSchedulable: the pod was seen waiting to be scheduled.
	StartupNotSchedulable PullFlags = 1 << 8
	// PullsGivenUp: the pod's pulls never all came (PullsUnknown); no
	// image event of the pod is awaited any more.
	PullsGivenUp PullFlags = 1 << 9

	// KnownPullFlags are the bits this release knows: a reader leaves out
	// the others, which a newer release set.
	KnownPullFlags PullFlags = 1<<10 - 1
)

// Has reports whether every bit of b is set.
func (f PullFlags) Has(b PullFlags) bool { return f&b == b }

// State is everything podslo must remember about one pod UID to observe each
// SLI exactly once, across exporter restarts. Each field has one meaning
// and one unit, stated on it: times are Unix seconds, the precision of
// condition timestamps, and zero means "not seen"; durations are whole
// seconds (int32: 68 years) unless their name or comment says
// milliseconds. The store keeps one in memory for every pod, so the fields
// are grouped to leave no padding but at the end of the pulls group
// (TestStateSize); the order of the fields is not their persisted order,
// which store/codec.go's table fixes.
type State struct {
	// Scheduled is the lastTransitionTime of PodScheduled=True; it starts
	// the sandbox creation timeout.
	Scheduled int64
	// FirstSandboxReady is the lastTransitionTime of the first sandbox
	// condition seen True. Once set, the first creation is consumed: it was
	// observed, or skipped with a reason, and never looked at again.
	FirstSandboxReady int64
	// LastSandboxReady is the newest True lastTransitionTime seen; a newer one
	// is a sandbox re-creation.
	LastSandboxReady int64
	// SandboxCreationMs is the first sandbox's latency in milliseconds
	// (whole seconds unless both ends were timed by the watch, as its
	// observation was), valid when HasSandboxCreation is set. An int32 of
	// milliseconds holds 24.8 days; a longer latency is kept as that
	// (Millis32).
	SandboxCreationMs int32
	// Recreations counts distinct re-creations of the sandbox.
	Recreations uint32
	// ScheduledPrecise is the watch receive time of the update that first
	// showed Scheduled, where it is precise (precise.go). It and the other
	// *Precise fields are persisted, so that an SLI whose start podslo saw
	// to the millisecond keeps that precision across an exporter restart.
	ScheduledPrecise Precise
	// HasSandboxCreation is set when the first creation latency is known and
	// not negative, whether or not it went into the histogram.
	HasSandboxCreation bool
	// TimedOut: the sandbox was not ready within the creation timeout.
	TimedOut bool
	// UserError: a FailedMount event blamed a missing Secret or ConfigMap,
	// which is the pod author's doing, not the platform's.
	UserError bool
	// Excluded: the pod was counted in the excluded creations instead of
	// the creation histogram or the timeouts.
	Excluded bool
	// SeenLate: podslo first saw the pod when its scheduling was already
	// older than MaxObservationAge. Its start-up SLIs (first sandbox,
	// phases, first Ready, first Stable) and its creation timeout are
	// remembered but never observed; re-creations, terminations and
	// stability losses from then on are.
	SeenLate bool
	// SeenRecreated: podslo first saw the pod's sandbox ready (or lost)
	// after a container had already run in an earlier sandbox. Like
	// SeenLate, its start-up SLIs and creation timeout are never observed,
	// and are skipped as recreated_before_seen.
	SeenRecreated bool

	// DeletionRequested is the first deletion request time seen:
	// deletionTimestamp minus deletionGracePeriodSeconds. A later, shorter
	// delete does not move it.
	DeletionRequested int64
	// TerminationMs is the termination latency in milliseconds, as
	// SandboxCreationMs, valid when HasTermination.
	TerminationMs int32
	// DeletionPrecise is the watch receive time of the update that first
	// showed DeletionRequested, where it is precise.
	DeletionPrecise Precise
	HasTermination  bool
	// TerminationDone: the termination was observed or skipped.
	TerminationDone bool

	// FirstReady is the lastTransitionTime of the first Ready=True seen.
	FirstReady int64
	// ContainerStart is the newest container start seen before the first
	// Ready, in Unix seconds: the start of the readiness SLI.
	ContainerStart int64
	// ReadinessMs is the latency in milliseconds from the newest container
	// start to Ready, as SandboxCreationMs, valid when HasReadiness.
	ReadinessMs int32
	// ContainerStartPrecise is the watch receive time of the update that
	// first showed ContainerStart, where it is precise.
	ContainerStartPrecise Precise
	HasReadiness          bool
	// Phases holds the start-up phases already observed or skipped.
	Phases PhaseSet

	// FirstStable is the lastTransitionTime of the first Stable=True seen;
	// Stabilization, valid when HasStabilization, its latency in seconds
	// from the first Ready.
	FirstStable int64
	// StabilityLost is the newest Stable=False transition counted as
	// stability lost; StabilityLosses counts them.
	StabilityLost    int64
	Stabilization    int32
	StabilityLosses  uint32
	HasStabilization bool
	// StableSeen: the pod has a Stable condition (the agent runs on its
	// node); Stable is its current status, for the per-pod gauge.
	StableSeen bool
	Stable     bool
	// SandboxDownSeen: podslo saw the sandbox condition False (or
	// Unknown) at or after its last readiness, with no deletion
	// requested: a readiness in that same second is a re-creation
	// (sandbox.go).
	SandboxDownSeen bool

	// Pulls says what is known of the image pulls and the start-up SLI
	// (PullFlags), and so which of the fields below are valid.
	Pulls PullFlags
	// ImagePull is the sum of the pod's image pulls in milliseconds (each
	// Pulled event's duration including the wait in the kubelet's pull
	// queue, 0 for an image already present), valid once Pulls has
	// PullsDone (pulls.go).
	ImagePull uint32
	// ImagePullInit is, in milliseconds, the part of ImagePull that the
	// init containers' images took, which the init phase holds already
	// (startup.go); valid once Pulls has PullsDone.
	ImagePullInit uint32
	// ImagePullKiB is the sum of the sizes of the images the pod pulled,
	// in KiB, each rounded up, as the kubelet's Pulled messages give them
	// (1.29 on): valid once Pulls has PullsDone, and when it is not 0 or
	// every image was present already (PullsCached). KiB keep images of
	// more than 4 GiB within a uint32.
	ImagePullKiB uint32
	// StartupBeforePulls is, in milliseconds, the start-up SLI before the
	// image pulls are taken off: creation to every container running and
	// seen, minus the init phase; valid once Pulls has StartupEndSeen.
	StartupBeforePulls int32
	// Startup is the start-up SLI in milliseconds, valid once Pulls has
	// StartupMeasured.
	Startup int32
	// DeletionGrace is the grace period of the first deletion request
	// (DeletionRequested), in seconds: the kubelet kills at
	// DeletionRequested + DeletionGrace whatever the API server later does
	// to deletionTimestamp (now, on the kubelet's final grace-0 delete;
	// earlier, on a second, shorter delete). 0 for a grace-0 request, and
	// in a record of a release before it was kept. Here, in the 4 bytes
	// before Skipped that alignment left free.
	DeletionGrace int32

	// Skipped holds the skips already counted.
	Skipped SkipSet
}

// Seconds32 is a duration in seconds as State keeps it: an int32, held at
// its limits (68 years) rather than wrapped.
func Seconds32(d int64) int32 {
	return int32(max(min(d, math.MaxInt32), math.MinInt32))
}

// Millis32 is a duration in milliseconds as State keeps it: an int32, held
// at its limits (24.8 days) rather than wrapped.
func Millis32(ms int64) int32 { return Seconds32(ms) }

// MillisOfSeconds is a duration of s whole seconds as Millis32 keeps it.
func MillisOfSeconds(s int64) int32 {
	return Millis32(max(min(s, math.MaxInt32/1000+1), math.MinInt32/1000-1) * 1000)
}
