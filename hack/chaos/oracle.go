package main

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// The oracle applies docs/metrics.md to each pod's full history, revision by
// revision, as an exporter that saw every revision would. It shares no code
// with podslo: it is written from the documented semantics (docs/metrics.md,
// and the README of deploy/kwok for what the stages write), so that a
// misreading on either side shows up as a mismatch to look into.

// Metric names, as docs/metrics.md lists them.
const (
	mCreation     = "podslo_sandbox_creation_duration_seconds"
	mRecreations  = "podslo_sandbox_recreations_total"
	mTimeouts     = "podslo_sandbox_creation_timeouts_total"
	mExcluded     = "podslo_sandbox_creations_excluded_total"
	mPending      = "podslo_sandbox_creation_pending_pods"
	mTermination  = "podslo_termination_duration_seconds"
	mOverGrace    = "podslo_terminations_over_grace_total"
	mReadiness    = "podslo_readiness_duration_seconds"
	mPhase        = "podslo_startup_phase_duration_seconds"
	mStabilize    = "podslo_stabilization_duration_seconds"
	mStableTrans  = "podslo_stable_transitions_total"
	mSkipped      = "podslo_observations_skipped_total"
	mPodCreation  = "podslo_pod_sandbox_creation_seconds"
	mPodRecreated = "podslo_pod_sandbox_recreations_total"
	mPodPending   = "podslo_pod_sandbox_pending_seconds"
	mPodReadiness = "podslo_pod_readiness_seconds"
	mPodTerm      = "podslo_pod_termination_seconds"
	mPodStable    = "podslo_pod_stable"
	mPull         = "podslo_image_pull_duration_seconds"
	mPullsFailed  = "podslo_image_pulls_failed_total"
	mStartup      = "podslo_startup_sli_duration_seconds"
	mPodPull      = "podslo_pod_image_pull_seconds"
	mPodStartup   = "podslo_pod_startup_sli_seconds"
	mPodPullSize  = "podslo_pod_image_pull_size_bytes"
)

// pullsWait is how long after a pod's containers were seen running the
// exporter waits for image events that never come (docs/metrics.md,
// pulls_unknown).
const pullsWait = 10 * time.Minute

// histograms and counters are the aggregated families compared exactly.
var (
	histograms = []string{mCreation, mTermination, mReadiness, mPhase, mStabilize, mPull, mStartup}
	// mPullsFailed: the harness writes the only failed pulls.
	counters = []string{mRecreations, mTimeouts, mExcluded, mOverGrace, mStableTrans, mPullsFailed, mSkipped}
	// perPod are the per-pod families, checked for series of pods that no
	// longer exist.
	perPod = []string{mPodCreation, mPodRecreated, mPodPending, mPodReadiness, mPodTerm, mPodStable, mPodPull, mPodPullSize, mPodStartup}
)

// oracleConfig is what the oracle needs to know beyond the histories.
type oracleConfig struct {
	// Timeout is the exporter's --sandbox-creation-timeout.
	Timeout time.Duration
	// ClaimClass maps namespace/claim to its StorageClass.
	ClaimClass map[string]string
	// UserError holds the pods given a FailedMount event for a missing
	// Secret at creation.
	UserError map[types.UID]bool
	// Buckets are the histograms' classic bucket bounds, as exported.
	Buckets []float64
	// End is when the comparison is made: live pods are judged as of then.
	End time.Time
	// Pulls are the pods' image events (pulls.go).
	Pulls map[types.UID]podPulls
}

// outcome is one pod's contribution to the aggregated series: histogram
// observations and counter increments, keyed by series.
type outcome struct {
	Observe map[string][]float64 // histogram series → values (seconds)
	Count   map[string]float64   // counter series → increment
}

func newOutcome() outcome {
	return outcome{Observe: map[string][]float64{}, Count: map[string]float64{}}
}

// podVerdict is how a pod was judged: its possible outcomes (one when
// certain) and why more than one.
type podVerdict struct {
	Outcomes []outcome
	// Loose names states the exporter may not have seen and whose effect
	// the docs do not pin down; the pod then adds [0, its ideal outcome]
	// to counts and [0, +Inf) to sums.
	Loose []string
	// Uncertain names the choices that made several outcomes.
	Uncertain []string
	// Ideal is the outcome had the exporter seen every revision.
	Ideal outcome
	// Contradiction names what the pod's history shows that the real
	// kubelet cannot write (contradiction): the fake kubelet's fault, not
	// podslo's nor the oracle's. Such a pod is loose, and may also add the
	// skips docs/metrics.md gives the state it shows.
	Contradiction string
	// Live per-pod expectations, for pods that exist at the end, as the
	// exporter saw the pod; FinalUncertain when they depend on revisions
	// it may have missed.
	Final          podFinal
	FinalUncertain bool
}

// podFinal is what the per-pod series of a live pod must show.
type podFinal struct {
	Alive       bool
	Creation    *int64 // podslo_pod_sandbox_creation_seconds
	Recreations *int64 // podslo_pod_sandbox_recreations_total (once the first sandbox was seen)
	Readiness   *int64 // podslo_pod_readiness_seconds
	Pending     bool   // podslo_pod_sandbox_pending_seconds present
	UserError   bool
	Labels      classLabels
	// Pull is podslo_pod_image_pull_seconds; Startup the value
	// podslo_pod_startup_sli_seconds must be within watchSpread of.
	Pull, Startup *float64
	// StartupSeen is the start-up as it would be with its end when the
	// run's own watch received the update that ended it: the exporter's
	// end is its watch's receive time, as late as the API server delivers
	// it on a loaded machine (docs/metrics.md), so that podslo's value may
	// be above Startup + watchSpread up to about this (compare.go).
	StartupSeen float64
	// PullSize is podslo_pod_image_pull_size_bytes.
	PullSize *float64
}

// key is a canonical text of the final state, to tell them apart.
func (f podFinal) key() string {
	val := func(p *int64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprint(*p)
	}
	fval := func(p *float64) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprint(*p)
	}
	return fmt.Sprintf("%v %s %s %s %v %v %v %s %s", f.Alive, val(f.Creation), val(f.Recreations), val(f.Readiness), f.Pending, f.UserError, f.Labels,
		fval(f.Pull), fval(f.Startup)) + " " + fval(f.PullSize)
}

type classLabels struct{ Runtime, Storage string }

func (o *oracleConfig) labels(h *history) classLabels {
	l := classLabels{Runtime: h.RuntimeClass, Storage: "none"}
	if l.Runtime == "" {
		l.Runtime = "none"
	}
	if len(h.Claims) > 0 {
		names := make([]string, 0, len(h.Claims))
		for _, c := range h.Claims {
			class, ok := o.ClaimClass[h.Namespace+"/"+c]
			if !ok {
				class = "unknown"
			}
			names = append(names, class)
		}
		slices.Sort(names)
		l.Storage = strings.Join(slices.Compact(names), ",")
	}
	return l
}

// seriesKey is the canonical text of one series: name{a="x",b="y"} with the
// labels sorted by name.
func seriesKey(name string, labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", k, labels[k])
	}
	b.WriteByte('}')
	return b.String()
}

func classSeries(name string, l classLabels, extra ...string) string {
	m := map[string]string{"runtime_class": l.Runtime, "storage_class": l.Storage}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i]] = extra[i+1]
	}
	return seriesKey(name, m)
}

// choices fix, for one evaluation of a pod, what the exporter saw where the
// timeline cannot tell.
type choices struct {
	// Seen says which revisions the exporter handled; nil means all.
	Seen []bool
	// TimedOut: its timeout check caught the pod pending past the timeout.
	TimedOut bool
	// PullMissed: the pod's Pulled event reached the exporter only when
	// it no longer knew the pod (it was removed first), or never.
	PullMissed bool
	// PullsGivenUp: the exporter gave up the pulls of a pod alive at the
	// end, lifecycle.PullsWait after it saw the containers running.
	PullsGivenUp bool
	// Listed says which revisions the exporter saw from a list rather than
	// a watch event; nil means none.
	Listed []bool
	// SweptLate: the exporter found the pod gone in a sweep (it never saw
	// the deletion) after the pod's creation timeout.
	SweptLate bool
}

func (c *choices) saw(i int) bool { return c.Seen == nil || c.Seen[i] }

func (c *choices) listed(i int) bool { return c.Listed != nil && c.Listed[i] }

// walk applies the documented semantics, in order, to the revisions of h
// the exporter saw under ch (the watch delivers every revision, a relist
// only the current one) and returns the pod's outcome, its per-pod state at
// the end, and where its states began.
func (o *oracleConfig) walk(h *history, ch choices) (outcome, podFinal, walkMarks) {
	out := newOutcome()
	l := o.labels(h)
	fin := podFinal{Labels: l, UserError: o.UserError[h.UID]}
	marks := walkMarks{firstSandbox: -1}
	seenAny := false
	for i := range h.Revs {
		seenAny = seenAny || ch.saw(i)
	}
	if !seenAny {
		// The exporter never knew the pod.
		return out, fin, marks
	}
	userError := o.UserError[h.UID]
	var (
		scheduled, firstSandbox, lastSandbox, firstReady int64
		deletionRequested, deletionGrace                 int64
		terminationDone, excluded                        bool
		// lateTimeout: the first sandbox, or the deletion of a pod still
		// waiting for it, came past the timeout (docs/metrics.md), whether
		// or not a check caught the pod pending.
		lateTimeout bool
		// notSchedulable: a revision the exporter saw had PodScheduled=False.
		notSchedulable bool
		// readyRestarted, startupRestarted: the first Ready and the
		// start-up's end were not seen yet when a revision showed a
		// container restarted that the exporter saw from a list, or that
		// was the first it saw of the pod scheduled (restarted_before_seen).
		readyRestarted, startupRestarted bool
		recreations                      int64
		// downSeen: a sandbox False (or Unknown) at or after the last
		// readiness, no deletion requested, seen since that readiness.
		downSeen bool
		// startupEnd: the newest container start of the first revision
		// the exporter saw with the container running and no deletion
		// requested, the end of the start-up SLI in whole seconds.
		startupEnd int64
		// startupSeen: when the run's watch received that revision.
		startupSeen time.Time
		// startupInit: that revision's Initialized time, for a pod with
		// an init container; 0 when not True.
		startupInit int64
		phases      = map[string]bool{}
		skips       = map[string]bool{}
	)
	skip := func(sli, reason string) {
		k := sli + "/" + reason
		if skips[k] {
			return
		}
		skips[k] = true
		out.Count[seriesKey(mSkipped, map[string]string{"sli": sli, "reason": reason})]++
	}
	observeSeconds := func(name string, v float64, extra ...string) {
		k := classSeries(name, l, extra...)
		out.Observe[k] = append(out.Observe[k], v)
	}
	observe := func(name string, v int64, extra ...string) { observeSeconds(name, float64(v), extra...) }
	count := func(name string, extra ...string) { out.Count[classSeries(name, l, extra...)]++ }
	// phase observes a start-up phase once; a missing start or end leaves
	// it for a later revision.
	phase := func(p string, start, end int64) {
		if phases[p] || start == 0 || end == 0 {
			return
		}
		phases[p] = true
		if end < start {
			skip("startup_phase", "negative_duration")
			return
		}
		observe(mPhase, end-start, "phase", p)
	}
	exclude := func() {
		if !excluded {
			excluded = true
			count(mExcluded, "reason", "user_error")
		}
	}
	for i := range h.Revs {
		if !ch.saw(i) {
			continue
		}
		r := &h.Revs[i]
		// A pod seen waiting to be scheduled is left out of the start-up
		// SLI (not_schedulable).
		if r.Scheduled.isFalse() {
			notSchedulable = true
		}
		prevScheduled := scheduled
		// Scheduling: creation to PodScheduled.
		if r.Scheduled.isTrue() && r.Scheduled.Time != 0 {
			if scheduled == 0 {
				scheduled = r.Scheduled.Time
			}
			phase("scheduling", h.Created, r.Scheduled.Time)
		}
		// Sandbox: the first True is the creation, each newer True a
		// re-creation.
		sb := r.Sandbox
		if sb.isTrue() && sb.Time != 0 {
			switch {
			case firstSandbox == 0:
				firstSandbox, lastSandbox = sb.Time, sb.Time
				marks.firstSandbox = i
				s := r.Scheduled
				if s.isTrue() && s.Time != 0 && sb.Time-s.Time > int64(o.Timeout/time.Second) {
					lateTimeout = true
				}
				switch {
				case s.Status == "" || !s.isTrue():
					skip("sandbox_creation", "no_scheduled_condition")
				case s.Time == 0:
					skip("sandbox_creation", "invalid_condition")
				case userError:
					phases["sandbox"] = true
					exclude()
					v := sb.Time - s.Time
					if v >= 0 {
						fin.Creation = &v
					}
				default:
					phase("sandbox", s.Time, sb.Time)
					if sb.Time < s.Time {
						skip("sandbox_creation", "negative_duration")
						break
					}
					v := sb.Time - s.Time
					fin.Creation = &v
					observe(mCreation, v)
				}
			case sb.Time > lastSandbox, sb.Time == lastSandbox && downSeen:
				// A newer True, or one in the second of the last after a
				// False the exporter saw: a re-creation.
				lastSandbox, downSeen = sb.Time, false
				recreations++
				count(mRecreations)
			}
		}
		if firstSandbox != 0 && sb.Status != "" && !sb.isTrue() && r.Deletion == 0 && sb.Time >= lastSandbox {
			downSeen = true
		}
		// Init: first sandbox to Initialized, pods with init containers.
		if h.HasInit && r.Initialized.isTrue() {
			phase("init", firstSandbox, r.Initialized.Time)
		}
		// A restart podslo may have missed what came before of: the ends
		// not seen yet are skipped (docs/metrics.md, restarted_before_seen).
		if r.Restarts > 0 && (ch.listed(i) || prevScheduled == 0) {
			if firstReady == 0 && !readyRestarted {
				readyRestarted = true
				for _, p := range []string{"containers", "readiness", "total"} {
					phases[p] = true
				}
				skip("startup_phase", "restarted_before_seen")
				skip("readiness", "restarted_before_seen")
			}
			if startupEnd == 0 && !notSchedulable {
				startupRestarted = true
			}
		}
		if startupEnd == 0 && !startupRestarted && r.Started != 0 && r.Deletion == 0 {
			startupEnd, startupSeen = r.Started, r.At
			if r.Initialized.isTrue() {
				startupInit = r.Initialized.Time
			}
		}
		// Readiness, once: the first Ready=True.
		switch {
		case firstReady != 0 || !r.Ready.isTrue() || r.Ready.Time == 0:
		case readyRestarted:
			firstReady = r.Ready.Time
		default:
			readyAt := r.Ready.Time
			firstReady = readyAt
			from := firstSandbox
			if h.HasInit && r.Initialized.isTrue() && r.Initialized.Time > from {
				from = r.Initialized.Time
			}
			phase("containers", from, r.Started)
			phase("readiness", r.Started, readyAt)
			if userError {
				phases["total"] = true
			} else {
				phase("total", h.Created, readyAt)
			}
			switch {
			case r.Started == 0:
				skip("readiness", "no_container_started")
			case readyAt < r.Started:
				skip("readiness", "negative_duration")
			default:
				v := readyAt - r.Started
				fin.Readiness = &v
				observe(mReadiness, v)
			}
		}
		// Termination: the deletion request to the first sandbox False
		// newer than its last readiness.
		if r.Deletion != 0 && !terminationDone {
			if deletionRequested == 0 {
				deletionRequested, deletionGrace = r.Deletion-r.Grace, r.Grace
				if firstSandbox == 0 && scheduled != 0 && deletionRequested-scheduled > int64(o.Timeout/time.Second) {
					lateTimeout = true
				}
				if firstSandbox != 0 && sb.Status != "" && !sb.isTrue() && sb.Time < deletionRequested {
					terminationDone = true
					if r.Grace == 0 {
						// The final grace-0 delete first: the request
						// was missed (lifecycle/termination.go).
						skip("termination", "vanished")
					} else {
						skip("termination", "terminated_before_delete")
					}
					continue
				}
			}
			if sb.isFalse() && firstSandbox != 0 && sb.Time > lastSandbox {
				terminationDone = true
				down := sb.Time
				if down < deletionRequested {
					skip("termination", "negative_duration")
				} else {
					observe(mTermination, down-deletionRequested)
					// docs/metrics.md: the grace period ends at the first
					// request plus its grace (the current deletionTimestamp
					// for a grace-0 request); a sandbox down in the very
					// second it ends is over it when a container shows the
					// kubelet's kill at or after that second.
					end := deletionRequested + deletionGrace
					if deletionGrace == 0 {
						end = max(end, r.Deletion)
					}
					if down > end || (r.Killed != 0 && r.Killed >= end) {
						count(mOverGrace)
					}
				}
			}
		}
	}
	// Image pulls: kwok's Pulled event names no container, which counts
	// for a one-container pod only; the harness writes one per container
	// for the others. The pulls are observed once the exporter knows the
	// pod and every container's event, for a user error too; a failed
	// pull is counted once the exporter knows it and the pod.
	pp, hasPulls := o.Pulls[h.UID]
	pullsCome := hasPulls && pp.complete(h.Containers) && !ch.PullMissed
	pullFailed := hasPulls && pp.Failed && !ch.PullMissed
	if pullFailed {
		count(mPullsFailed)
	}
	var ps pullSum
	if pullsCome {
		ps = pp.sum(h.Containers)
		cache := "miss"
		if ps.Cached {
			cache = "hit"
		}
		pull := float64(ps.Ms) / 1000
		fin.Pull = &pull
		fin.PullSize = ps.Size
		observeSeconds(mPull, pull, "cache", cache)
	}
	// The start-up SLI: creation to the containers running, less the
	// init phase (first sandbox to Initialized, whole seconds) and the
	// containers' pulls (the init containers' are inside the init phase);
	// not for a pod blocked by a missing Secret, nor one whose pull failed.
	// An init phase that cannot be told ends it at once (lifecycle's
	// startup), whatever the pulls.
	startupCounted := startupEnd != 0 && !userError && !notSchedulable && !startupRestarted
	invalidInit := startupCounted && h.HasInit && (startupInit == 0 || firstSandbox == 0 || startupInit < firstSandbox)
	switch {
	case !startupCounted:
	case invalidInit:
		skip("pod_startup", "invalid_condition")
	case pullFailed:
		skip("pod_startup", "image_pull_failed")
	case pullsCome:
		var initPhase int64
		if h.HasInit {
			initPhase = startupInit - firstSandbox
		}
		pull := float64(ps.Ms-ps.InitMs) / 1000
		v := float64(startupEnd-h.Created-initPhase) - pull
		if v < 0 {
			skip("pod_startup", "negative_duration")
			break
		}
		fin.Startup = &v
		fin.StartupSeen = startupSeen.Sub(time.Unix(h.Created, 0)).Seconds() - float64(initPhase) - pull
		observeSeconds(mStartup, v, "stateful", strconv.FormatBool(len(h.Claims) > 0))
	}
	switch {
	case notSchedulable && startupEnd != 0:
		skip("pod_startup", "not_schedulable")
	case startupRestarted:
		skip("pod_startup", "restarted_before_seen")
	}
	gone := !h.Removed.IsZero() && !h.Removed.After(o.End)
	// Pulls that never all came (kwok's one Pulled event names no
	// container, so a pod with an init container never has them all; or
	// the event was missed): once the containers were seen running, they
	// are given up when the pod goes, or lifecycle.PullsWait later
	// (docs/metrics.md, pulls_unknown), the start-up with them unless it
	// was left out already.
	if !pullsCome && (startupEnd != 0 || startupRestarted) && (gone || ch.PullsGivenUp) {
		skip("image_pull", "pulls_unknown")
		if !userError && !notSchedulable && !startupRestarted && !pullFailed && !invalidInit {
			skip("pod_startup", "pulls_unknown")
		}
	}
	if gone && !terminationDone {
		skip("termination", "vanished")
	}
	// Found gone past its timeout, still waiting for its first sandbox as
	// far as the exporter saw, no check having caught it: it may have
	// gone before its deadline or after (lifecycle.Swept).
	if gone && ch.SweptLate && scheduled != 0 && firstSandbox == 0 && deletionRequested == 0 && !ch.TimedOut && !lateTimeout {
		skip("sandbox_creation", "vanished")
	}
	// A start-up whose end the exporter never saw leaves with the pod
	// (lifecycle.Vanish): deleted while starting, stuck, or first seen
	// being deleted.
	if gone && startupEnd == 0 && !startupRestarted {
		if notSchedulable {
			skip("pod_startup", "not_schedulable")
		} else {
			skip("pod_startup", "vanished")
		}
	}
	// Timeout: scheduled, never a sandbox, not being deleted, past the
	// timeout when a check ran; or a first sandbox or deletion request
	// that came past it.
	if ch.TimedOut || lateTimeout {
		if userError {
			exclude()
		} else {
			count(mTimeouts)
		}
	}
	fin.Alive = !gone
	if firstSandbox != 0 {
		fin.Recreations = &recreations
	}
	fin.Pending = fin.Alive && scheduled != 0 && firstSandbox == 0 && deletionRequested == 0
	marks.scheduled = scheduled
	return out, fin, marks
}

// walkMarks are what the timeout question needs of a walk.
type walkMarks struct {
	scheduled    int64 // PodScheduled, Unix seconds; 0 if never
	firstSandbox int   // index of the revision with the first sandbox True, -1 if none
}

// contradiction reports a revision of h in which a container shows a start
// (or a restart) while no sandbox of the pod was ever ready, in that
// revision or before: the real kubelet starts containers only in a ready
// sandbox, so it cannot write that, and the recorder saw every revision.
// docs/metrics.md reads such a state as a first sandbox lost before podslo
// saw it ready (recreated_before_seen); the oracle, which knows there was
// none, would count the pod pending: neither side is wrong about the pod
// the fake kubelet wrote, so neither is charged with it.
func contradiction(h *history) string {
	for i := range h.Revs {
		r := &h.Revs[i]
		if r.Sandbox.isTrue() {
			return ""
		}
		if r.Ran != 0 || r.Restarts > 0 {
			return fmt.Sprintf("revision %d shows a container started at %s (restarts %d) while no sandbox was ever ready: the fake kubelet (deploy/kwok) wrote what a kubelet cannot",
				r.Rev, time.Unix(r.Ran, 0).UTC().Format(time.TimeOnly), r.Restarts)
		}
	}
	return ""
}

// recreatedBeforeSeenSLIs are the SLIs docs/metrics.md skips with
// recreated_before_seen, each at most once per pod.
var recreatedBeforeSeenSLIs = []string{"sandbox_creation", "startup_phase", "readiness", "stabilization", "pod_startup"}

// maxUnsure is the most revisions of one pod whose sight the timeline
// cannot tell that judge enumerates (2^maxUnsure subsequences); beyond,
// the pod is loose.
const maxUnsure = 8

// judge evaluates one pod against the timeline: every revision was surely
// seen by the exporter, surely not, or maybe; the pod's possible outcomes
// are those of every subsequence the maybes allow.
func (o *oracleConfig) judge(h *history, t *timeline) podVerdict {
	var v podVerdict
	ideal, fin, marks := o.walk(h, choices{})
	v.Ideal, v.Final = ideal, fin
	if len(h.Revs) == 0 {
		return v
	}
	if c := contradiction(h); c != "" {
		v.Contradiction = c
		v.Loose = append(v.Loose, "a contradiction of the fake kubelet's")
	}
	end := h.Removed
	if end.IsZero() || end.After(o.End) {
		end = o.End
	}
	// Each revision's state lasts until the next revision, the last one
	// until the pod's removal (the delete event carries it) or the end.
	base := make([]bool, len(h.Revs))
	var unsure []int
	for i := range h.Revs {
		to := end
		if i+1 < len(h.Revs) {
			to = h.Revs[i+1].At
		}
		switch t.visibility(h.Revs[i].At, to) {
		case visSeen:
			base[i] = true
		case visUncertain:
			unsure = append(unsure, i)
		}
	}
	if len(unsure) > maxUnsure {
		v.Loose = append(v.Loose, fmt.Sprintf("%d revisions the exporter may have missed", len(unsure)))
		unsure = unsure[:0]
		for i := range base {
			base[i] = true
		}
	}

	// The timeout: a check must have caught the pod pending past it, that
	// is scheduled, before its first sandbox and before its deletion. A pod
	// whose sandbox comes later still counts (docs/metrics.md).
	timeoutOpts := []bool{false}
	if marks.scheduled != 0 {
		// The check counts a pod once now.Unix() - scheduled > timeout.
		due := time.Unix(marks.scheduled+int64(o.Timeout/time.Second)+1, 0)
		pendingUntil := end
		for _, r := range h.Revs {
			if r.Deletion != 0 || (r.Sandbox.isTrue() && r.Sandbox.Time != 0) {
				pendingUntil = r.At
				break
			}
		}
		// Surely counted: a check ran while the pod was pending past its
		// timeout, before the revision that ended that existed.
		surely := t.checkedBetween(due.Add(time.Second), pendingUntil)
		// Surely not: no check could run between the timeout and the
		// moment the exporter surely knew the pod was no longer pending
		// (or, for a pod pending at the end, the end).
		until := o.End
		if pendingUntil.Before(o.End) {
			until = t.seenBy(pendingUntil)
		}
		switch {
		case surely:
			timeoutOpts = []bool{true}
		case !t.mayCheckBetween(due, until):
		default:
			timeoutOpts = []bool{true, false}
			v.Uncertain = append(v.Uncertain, "timeout")
		}
	}

	// The pull is recorded once the exporter holds both the pod and its
	// Pulled event. It holds both for a pod alive at the end. kwok writes
	// the event just before the revision that starts the containers, so
	// an exporter that surely watched that revision had the event while
	// it knew the pod; otherwise the pod may have been removed before the
	// event reached it (an exporter down meanwhile), and the event then
	// waits for a pod that never comes.
	pullOpts := []bool{false}
	if pp, ok := o.Pulls[h.UID]; ok && (pp.complete(h.Containers) || pp.Failed) {
		alive := h.Removed.IsZero() || h.Removed.After(o.End)
		running := slices.IndexFunc(h.Revs, func(r revision) bool { return r.Started != 0 })
		if !alive && (running < 0 || !base[running]) {
			pullOpts = []bool{false, true}
			v.Uncertain = append(v.Uncertain, "image pull")
		}
	}

	// Pulls that cannot all come are given up pullsWait after the
	// exporter saw the containers running, which is no earlier than their
	// start; a restart starts the wait again. Only a pod alive at the end
	// may or may not have reached it.
	givenUpOpts := []bool{false}
	if pp, ok := o.Pulls[h.UID]; !ok || !pp.complete(h.Containers) {
		alive := h.Removed.IsZero() || h.Removed.After(o.End)
		running := slices.IndexFunc(h.Revs, func(r revision) bool { return r.Started != 0 })
		if alive && running >= 0 && !time.Unix(h.Revs[running].Started, 0).Add(pullsWait).After(o.End) {
			givenUpOpts = []bool{false, true}
			v.Uncertain = append(v.Uncertain, "pulls given up")
		}
	}

	// A revision showing a restart may have reached the exporter from a
	// list (restarted_before_seen) unless it was written while the
	// exporter watched: a watch delivers every change.
	// After an exporter restart it is listed; after an outage the watch
	// may resume or list again.
	var surely, maybe []bool
	for i := range h.Revs {
		r := &h.Revs[i]
		if r.Restarts == 0 || t.watchedAt(r.At) {
			continue
		}
		if maybe == nil {
			surely, maybe = make([]bool, len(h.Revs)), make([]bool, len(h.Revs))
		}
		maybe[i] = true
		surely[i] = t.surelyListed(r.At)
	}
	listedOpts := [][]bool{surely}
	if !slices.Equal(surely, maybe) {
		listedOpts = append(listedOpts, maybe)
		v.Uncertain = append(v.Uncertain, "restart listed")
	}

	// A pod removed while the exporter did not watch, never with a
	// sandbox: the sweep that first misses it may come after its timeout.
	// It surely does for a pod removed past its timeout that only a new
	// process's list can show gone.
	sweptOpts := []bool{false}
	if gone := !h.Removed.IsZero() && !h.Removed.After(o.End); gone && marks.scheduled != 0 && marks.firstSandbox < 0 && !t.watchedAt(h.Removed) {
		due := time.Unix(marks.scheduled+int64(o.Timeout/time.Second), 0)
		if h.Removed.After(due) && t.surelyListed(h.Removed) {
			sweptOpts = []bool{true}
		} else {
			sweptOpts = []bool{false, true}
			v.Uncertain = append(v.Uncertain, "swept past the timeout")
		}
	}

	seen := make([]bool, len(base))
	distinct := map[string]bool{}
	finals := map[string]bool{}
	for mask := 0; mask < 1<<len(unsure); mask++ {
		copy(seen, base)
		for j, i := range unsure {
			seen[i] = mask&(1<<j) != 0
		}
		for _, to := range timeoutOpts {
			for _, missed := range pullOpts {
				for _, givenUp := range givenUpOpts {
					for _, listed := range listedOpts {
						for _, swept := range sweptOpts {
							out, fin, _ := o.walk(h, choices{Seen: seen, TimedOut: to, PullMissed: missed, PullsGivenUp: givenUp, Listed: listed, SweptLate: swept})
							if k := out.key(); !distinct[k] {
								distinct[k] = true
								v.Outcomes = append(v.Outcomes, out)
							}
							if k := fin.key(); !finals[k] {
								finals[k] = true
								v.Final = fin
							}
						}
					}
				}
			}
		}
	}
	// The per-pod series are checked only where what the exporter saw
	// leaves one answer.
	v.FinalUncertain = len(finals) > 1 || len(v.Loose) > 0
	if len(unsure) > 0 && len(v.Outcomes) > len(timeoutOpts)*len(pullOpts)*len(givenUpOpts)*len(listedOpts)*len(sweptOpts) {
		v.Uncertain = append(v.Uncertain, fmt.Sprintf("%d revisions near a fault", len(unsure)))
	}
	return v
}

// key is a canonical text of the outcome, to tell outcomes apart.
func (out outcome) key() string {
	var parts []string
	for k, vals := range out.Observe {
		parts = append(parts, fmt.Sprintf("%s=%v", k, vals))
	}
	for k, n := range out.Count {
		parts = append(parts, fmt.Sprintf("%s=%v", k, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ";")
}

// bounds is the range an exported value must fall in.
type bounds struct{ Lo, Hi float64 }

// expectation is the expected value of every aggregated series.
type expectation struct {
	Series map[string]bounds
	// Observations is, per histogram family, the observations the oracle
	// is certain of; Counted the same for counter families.
	Observations map[string]float64
	// Loose lists the series whose upper bound is open because of a pod
	// whose states the exporter may have missed.
	Loose map[string]bool
	// Ideal is, per count series (histogram _count, counters), the value
	// had the exporter seen every revision of every pod.
	Ideal map[string]float64
}

// expect sums every pod's verdict into per-series bounds: each pod adds the
// least and the most it can add.
func (o *oracleConfig) expect(verdicts map[types.UID]*podVerdict) *expectation {
	e := &expectation{Series: map[string]bounds{}, Observations: map[string]float64{}, Loose: map[string]bool{}, Ideal: map[string]float64{}}
	add := func(k string, lo, hi float64) {
		b := e.Series[k]
		b.Lo += lo
		b.Hi += hi
		e.Series[k] = b
	}
	for _, v := range verdicts {
		// Every series any outcome touches.
		keys := map[string]bool{}
		if v.Contradiction != "" {
			// The skips the documented reading of the state gives.
			for _, sli := range recreatedBeforeSeenSLIs {
				keys[seriesKey(mSkipped, map[string]string{"sli": sli, "reason": "recreated_before_seen"})] = true
			}
		}
		for _, out := range append(v.Outcomes, v.Ideal) {
			for k := range out.Observe {
				keys[k] = true
			}
			for k := range out.Count {
				keys[k] = true
			}
		}
		for k := range keys {
			if strings.HasPrefix(k, mSkipped) || isCounterSeries(k) {
				lo, hi := math.Inf(1), math.Inf(-1)
				for _, out := range v.Outcomes {
					lo, hi = math.Min(lo, out.Count[k]), math.Max(hi, out.Count[k])
				}
				if len(v.Loose) > 0 && !strings.HasPrefix(k, mSkipped) {
					lo, hi = 0, math.Max(hi, v.Ideal.Count[k])
					e.Loose[k] = true
				}
				if v.Contradiction != "" && strings.HasPrefix(k, mSkipped) {
					// Either reading: the oracle's, or a skip once.
					lo, hi = 0, math.Max(hi, 1)
					e.Loose[k] = true
				}
				add(k, lo, hi)
				e.Observations[familyOf(k)] += lo
				e.Ideal[k] += v.Ideal.Count[k]
				continue
			}
			// A histogram series: _count, _sum and every bucket.
			name, labels := splitSeries(k)
			countLo, countHi := math.Inf(1), math.Inf(-1)
			sumLo, sumHi := math.Inf(1), math.Inf(-1)
			bLo := make([]float64, len(o.Buckets)+1)
			bHi := make([]float64, len(o.Buckets)+1)
			for i := range bLo {
				bLo[i] = math.Inf(1)
				bHi[i] = math.Inf(-1)
			}
			w := spread(name, labels)
			for _, out := range v.Outcomes {
				vals := out.Observe[k]
				n := float64(len(vals))
				var sLo, sHi float64
				for _, x := range vals {
					sLo += math.Max(0, x-w)
					sHi += x + w
				}
				countLo, countHi = math.Min(countLo, n), math.Max(countHi, n)
				sumLo, sumHi = math.Min(sumLo, sLo), math.Max(sumHi, sHi)
				for i := range bLo {
					b := o.bucketBound(i)
					cLo, cHi := 0.0, 0.0
					for _, x := range vals {
						if x+w <= b {
							cLo++
						}
						if math.Max(0, x-w) <= b {
							cHi++
						}
					}
					bLo[i], bHi[i] = math.Min(bLo[i], cLo), math.Max(bHi[i], cHi)
				}
			}
			if len(v.Loose) > 0 {
				countLo, sumLo, sumHi = 0, 0, math.Inf(1)
				countHi = math.Max(countHi, float64(len(v.Ideal.Observe[k])))
				for i := range bLo {
					bLo[i], bHi[i] = 0, math.Max(bHi[i], countHi)
				}
				e.Loose[name+"_count"+labels] = true
			}
			add(name+"_count"+labels, countLo, countHi)
			e.Ideal[name+"_count"+labels] += float64(len(v.Ideal.Observe[k]))
			add(name+"_sum"+labels, sumLo, sumHi)
			for i := range bLo {
				add(bucketKey(name, labels, o.bucketBound(i)), bLo[i], bHi[i])
			}
			e.Observations[name] += countLo
		}
	}
	return e
}

// watchSpread is how far from the whole seconds between two condition
// times an SLI measured in milliseconds may lie: each end's watch receive
// time is taken within its one-second time, give or take the exporter's
// --watch-time-tolerance (250ms by default, which the chaos run keeps), so
// the difference of two is within 1 s + 2 × 250ms of the seconds'.
const watchSpread = 1.5

// spread is the room a histogram series' observations have: watchSpread
// for the SLIs the exporter may time to the millisecond (docs/metrics.md,
// "Milliseconds and seconds"), 0 for the others. Counts are exact either
// way: this widens sums and buckets only.
func spread(name, labels string) float64 {
	switch {
	case strings.HasPrefix(name, mCreation), strings.HasPrefix(name, mReadiness), strings.HasPrefix(name, mTermination):
		return watchSpread
	case strings.HasPrefix(name, mPhase) && (strings.Contains(labels, `phase="sandbox"`) || strings.Contains(labels, `phase="readiness"`)):
		return watchSpread
	case strings.HasPrefix(name, mStartup):
		// Its start is creationTimestamp in whole seconds and its end the
		// watch's receive time of the containers' start: within 1 s and
		// the tolerance after it, or the start itself.
		return watchSpread
	}
	return 0
}

func (o *oracleConfig) bucketBound(i int) float64 {
	if i < len(o.Buckets) {
		return o.Buckets[i]
	}
	return math.Inf(1)
}

func countLE(vals []float64, le float64) int {
	n := 0
	for _, v := range vals {
		if v <= le {
			n++
		}
	}
	return n
}

func isCounterSeries(k string) bool {
	name, _ := splitSeries(k)
	return slices.Contains(counters, name)
}

// splitSeries splits `name{labels}` into name and `{labels}`.
func splitSeries(k string) (string, string) {
	i := strings.IndexByte(k, '{')
	if i < 0 {
		return k, "{}"
	}
	return k[:i], k[i:]
}

func familyOf(k string) string {
	name, _ := splitSeries(k)
	for _, suffix := range []string{"_count", "_sum", "_bucket"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && slices.Contains(histograms, base) {
			return base
		}
	}
	return name
}

// bucketKey is the series of one cumulative bucket: the labels with le.
func bucketKey(name, labels string, le float64) string {
	inner := strings.TrimSuffix(strings.TrimPrefix(labels, "{"), "}")
	leText := strconv.FormatFloat(le, 'g', -1, 64)
	if math.IsInf(le, 1) {
		leText = "+Inf"
	}
	// Labels are sorted by name; le sorts after every class label but
	// before none of them (phase < runtime_class < storage_class, and
	// "le" < "phase"), so rebuild the map to keep the canonical order.
	m := parseLabels(inner)
	m["le"] = leText
	return seriesKey(name+"_bucket", m)
}

// parseLabels reads `a="x",b="y"` as written by seriesKey.
func parseLabels(s string) map[string]string {
	m := map[string]string{}
	for s != "" {
		k, rest, ok := strings.Cut(s, "=")
		if !ok {
			break
		}
		v, err := strconv.QuotedPrefix(rest)
		if err != nil {
			break
		}
		m[k], _ = strconv.Unquote(v)
		s = strings.TrimPrefix(rest[len(v):], ",")
	}
	return m
}
