package lifecycle

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Defaults of Config.
const (
	DefaultMaxObservationAge      = time.Hour
	DefaultSandboxCreationTimeout = 5 * time.Minute
)

// Config tunes Step.
type Config struct {
	// SandboxConditionTypes are looked up in order and the first one present
	// on the pod is the sandbox condition. Default DefaultSandboxConditionTypes.
	SandboxConditionTypes []corev1.PodConditionType
	// MaxObservationAge: an event that happened longer ago than this when
	// podslo first sees it is remembered but not observed, so that
	// installing podslo in an old cluster does not flood the histograms with
	// stale start-ups. Default DefaultMaxObservationAge.
	MaxObservationAge time.Duration
	// SandboxCreationTimeout: a scheduled pod whose sandbox is still not
	// ready after this long counts once as a creation timeout. Default
	// DefaultSandboxCreationTimeout.
	SandboxCreationTimeout time.Duration
	// StableConditionType is the condition podslo's agent writes when a
	// pod has been Ready for minReadySeconds. Default
	// DefaultStableConditionType.
	StableConditionType corev1.PodConditionType
	// WatchTolerance is how far outside the one-second time of a
	// transition the watch receive time of the update showing it may lie
	// and still be taken as its time to the millisecond (precise.go): the
	// clock difference between podslo's node and the kubelet's, plus the
	// watch's delay beyond the second. Default DefaultWatchTolerance; at
	// most 999ms.
	WatchTolerance time.Duration
}

// DefaultStableConditionType is the default for Config.StableConditionType,
// and the condition podslo's agent writes by default. It is untyped so that
// the agent, whose options are strings, shares this one constant.
const DefaultStableConditionType = "podslo.io/Stable"

// WithDefaults is c with every unset field at its default. Step applies
// the same defaults itself; a program that hands one configuration to
// several components (the exporter, to informers and pipeline) resolves it
// once here, so that they all see the same values.
func (c Config) WithDefaults() Config {
	c.SandboxConditionTypes = c.sandboxTypes()
	c.MaxObservationAge = c.maxAge()
	c.SandboxCreationTimeout = c.timeout()
	c.StableConditionType = c.stableType()
	c.WatchTolerance = c.watchTolerance()
	return c
}

// ConditionTypes are the pod condition types Step reads: whatever trims a
// pod before Step must keep these.
func (c *Config) ConditionTypes() []corev1.PodConditionType {
	types := []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.PodReady}
	types = append(types, c.sandboxTypes()...)
	return append(types, c.stableType())
}

func (c *Config) stableType() corev1.PodConditionType {
	if c.StableConditionType == "" {
		return DefaultStableConditionType
	}
	return c.StableConditionType
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
	// SandboxTimedOut is a sandbox not ready within the creation timeout.
	SandboxTimedOut
	// SandboxExcluded is a creation or a timeout left out of the SLI because
	// the pod's own spec was at fault (a missing Secret or ConfigMap).
	SandboxExcluded
	// Terminated is a pod's sandbox going away after its deletion request;
	// Seconds is the latency, OverGrace whether it exceeded the grace period.
	Terminated
	// BecameReady is the first Ready; Seconds is its latency from the newest
	// container start.
	BecameReady
	// PhaseDone is one start-up phase; Phase says which.
	PhaseDone
	// Stabilized is the first Stable; Seconds is its latency from the
	// first Ready.
	Stabilized
	// StabilityLost is a Stable=True pod turning Stable=False.
	StabilityLost
	// ImagesPulled is every image of a pod pulled or found present;
	// Seconds is the sum of the pulls, Cached whether all were present.
	ImagesPulled
	// ImagePullFailedOnce is a pod's first failed image pull.
	ImagePullFailedOnce
	// StartedUp is sig-scalability's pod start-up SLI; Seconds is its
	// value, Stateful whether the pod has a PVC-backed volume.
	StartedUp

	// numKinds is one past the last Kind.
	numKinds
)

// Observation is one new SLI data point.
type Observation struct {
	Kind    Kind
	Seconds float64
	// Precise: Seconds was measured in milliseconds, from the watch receive
	// times of both ends (precise.go); else in whole seconds.
	Precise   bool
	Phase     Phase
	OverGrace bool
	// Cached: every image of the pod was already present (ImagesPulled).
	Cached bool
	// Stateful: the pod has a PVC-backed volume (StartedUp).
	Stateful bool
}

// SLI is the SLI whose histogram the kind of observation feeds; false for
// the kinds that are counted, not measured.
func (k Kind) SLI() (SLI, bool) {
	switch k {
	case SandboxCreated:
		return SandboxCreation, true
	case Terminated:
		return Termination, true
	case BecameReady:
		return Readiness, true
	case PhaseDone:
		return StartupPhase, true
	case Stabilized:
		return Stabilization, true
	case ImagesPulled:
		return ImagePull, true
	case StartedUp:
		return PodStartup, true
	}
	return 0, false
}

// Outcome lists what a Step found new. Both slices are nil when nothing is,
// which is the common case and allocates nothing.
type Outcome struct {
	Observations []Observation
	Skips        []Skip
}

// Empty reports whether the outcome holds nothing to record.
func (o Outcome) Empty() bool { return len(o.Observations) == 0 && len(o.Skips) == 0 }

func (o *Outcome) observe(obs Observation) { o.Observations = append(o.Observations, obs) }

// Inputs are what a pod's events, not its object, tell of it. The pipeline
// holds them in memory until a write records them, and hands them to
// lifecycle with each update of the pod (Step), alone when an event comes
// between two updates (Fold), or to the timeout check (Timeout). A new
// event-fed input is one more field here, read by the step it feeds.
type Inputs struct {
	// UserError: a FailedMount event blamed a missing Secret or ConfigMap
	// (MarkUserError). It decides between a timeout and an exclusion, so
	// every entry point applies it first.
	UserError bool
	// Pulls are the pod's image events (pulls.go); nil when none are held.
	Pulls *Pulls
}

// onto is prev with the inputs that are marks on the state.
func (in *Inputs) onto(prev State) State {
	if in.UserError && !prev.UserError {
		return MarkUserError(prev)
	}
	return prev
}

// Step derives the next State of a pod from its current object and the
// inputs its events brought. It is pure: the same now, pod, in and prev
// always give the same result, and neither pod nor in is modified. When
// the returned State equals prev, nothing needs to be stored.
func Step(now time.Time, pod *Pod, in Inputs, prev State, cfg *Config) (State, Outcome) {
	next := in.onto(prev)
	var out Outcome
	c := stepper{now: now.Unix(), pod: pod, cfg: cfg, next: &next, out: &out}
	c.scheduling()
	if prev.Scheduled == 0 && next.Scheduled != 0 && c.tooOld(next.Scheduled) {
		// First sight of a pod scheduled longer ago than the max age (a new
		// install, a state lost, or podslo down that long): whatever its
		// conditions show now may be a re-created sandbox or a restarted
		// container, not its start-up. Only what happens from now on counts.
		next.SeenLate = true
	}
	c.sandbox()
	c.restartsUnseen(prev.Scheduled)
	c.initialized()
	c.readiness()
	c.stability()
	c.pullFailed(in.Pulls)
	c.startup()
	c.termination()
	c.pulls(in.Pulls, int(pod.Containers)+int(pod.InitContainers))
	return next, out
}

// Fold is Step for inputs that come between two updates of a pod (an image
// event for a pod already seen): it records them into prev, the pod having
// containers containers and init containers (0 when its spec is not known:
// then its pulls cannot complete).
func Fold(now time.Time, in Inputs, containers int, prev State, cfg *Config) (State, Outcome) {
	next := in.onto(prev)
	var out Outcome
	c := stepper{now: now.Unix(), cfg: cfg, next: &next, out: &out}
	c.pulls(in.Pulls, containers)
	return next, out
}

// stepper carries one Step's inputs and outputs through the SLIs.
type stepper struct {
	now  int64
	pod  *Pod
	cfg  *Config
	next *State
	out  *Outcome
}

// skipOnce counts a skip once per pod, SLI and reason.
func (c *stepper) skipOnce(s Skip) {
	if c.next.Skipped.Has(s) {
		return
	}
	c.next.Skipped = c.next.Skipped.With(s)
	c.out.Skips = append(c.out.Skips, s)
}

// tooOld reports whether an event at t happened longer ago than the max age.
func (c *stepper) tooOld(t int64) bool {
	return c.now-t > int64(c.cfg.maxAge()/time.Second)
}

// tooOldUnseen is tooOld in measure's terms, for the SLIs that are not
// start-up ones.
func (c *stepper) tooOldUnseen(t int64) (Reason, bool) { return TooOld, c.tooOld(t) }

// startupUnseen tells whether a start-up SLI ending at t cannot be
// observed, and why: the pod was first seen late, or after its first
// sandbox was re-created (its start-up happened before podslo could see
// it), or t is older than the max age.
func (c *stepper) startupUnseen(t int64) (Reason, bool) {
	switch {
	case c.next.SeenRecreated:
		return RecreatedBeforeSeen, true
	case c.next.SeenLate || c.tooOld(t):
		return TooOld, true
	}
	return 0, false
}

// measure ends one measurement of sli over s, the same way for every SLI:
// an end before its start (clock skew) is skipped as NegativeDuration;
// otherwise keep, if set, records the duration in milliseconds (whole
// seconds unless both ends are precise) in the
// state (the per-pod series show it however old), an end that unseen
// reports unobservable is skipped with its reason (too old, or a start-up
// podslo could not see), and o is observed with the duration as its
// Seconds: in milliseconds when both ends are precise (Precise), else in
// seconds. The caller makes sure it runs once per pod, and keep says how.
func (c *stepper) measure(sli SLI, s span, unseen func(int64) (Reason, bool), keep func(ms int64), o Observation) {
	start, end := s.start, s.end
	if r, skip := unseen(end); skip && r == RecreatedBeforeSeen {
		// A start-up podslo could not see at all: its times belong to
		// different sandboxes (the real kubelet keeps Ready's first time
		// while the containers restart in a new sandbox), so even their
		// order means nothing, and nothing is kept.
		c.skipOnce(Skip{sli, r})
		return
	}
	if end < start {
		c.skipOnce(Skip{sli, NegativeDuration})
		return
	}
	ms, precise := s.millis()
	if keep != nil {
		keep(ms)
	}
	if r, skip := unseen(end); skip {
		c.skipOnce(Skip{sli, r})
		return
	}
	o.Seconds, o.Precise = float64(ms)/1000, precise
	c.out.observe(o)
}

// phase observes one start-up phase over s, once.
func (c *stepper) phase(p Phase, s span) {
	if c.next.Phases.Has(p) || s.start == 0 || s.end == 0 {
		return
	}
	c.next.Phases = c.next.Phases.With(p)
	c.measure(StartupPhase, s, c.startupUnseen, nil, Observation{Kind: PhaseDone, Phase: p})
}

// scheduling remembers when the pod was scheduled and observes the
// scheduling phase.
func (c *stepper) scheduling() {
	s := c.pod.Condition(corev1.PodScheduled)
	if s == nil || s.Status != corev1.ConditionTrue || s.LastTransitionTime == 0 {
		return
	}
	if c.next.Scheduled == 0 {
		c.next.Scheduled = s.LastTransitionTime
		c.next.ScheduledPrecise = c.precise(s.LastTransitionTime)
	}
	c.phase(PhaseScheduling, between(unix(c.pod.CreationTimestamp), 0, s.LastTransitionTime, 0))
}

func (c *Config) maxAge() time.Duration {
	if c.MaxObservationAge <= 0 {
		return DefaultMaxObservationAge
	}
	return c.MaxObservationAge
}

// unix is t in Unix seconds, or 0 for the zero time (whose Unix() is not 0).
func unix(t metav1.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

func validStatus(s corev1.ConditionStatus) bool {
	return s == corev1.ConditionTrue || s == corev1.ConditionFalse || s == corev1.ConditionUnknown
}
