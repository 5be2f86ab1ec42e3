package pipeline

import (
	"log/slog"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/scope"
)

// scopeSetting names the store setting that holds the scope the state was
// written under.
const scopeSetting = "scope"

// handover is what the pipeline does when the state was written under
// another scope (a new --total-shards, --namespaces or --node-name), so that
// no pod is counted twice, by this instance and by the one that owned it
// before:
//
//   - A record that the first sweep finds without a live pod is forgotten
//     without counting it vanished, unless this scope certainly still owns
//     it (same namespaces and node, and its UID in this shard): it may
//     have moved to another instance, which counts what follows.
//   - A live pod without a record that the previous scope did not own
//     moved in. Its first step treats what happened before this instance
//     started (since) as too old, and counts no TooOld skip for it: its
//     previous owner observed or skipped it. What happens afterwards is
//     observed here, under the usual max-age rule.
//
// A state without a recorded scope was written cluster-wide (scope.Unscoped)
// if it holds pods; an empty one is new. A new sharded state (a first
// install, or a shard added by scaling up) cannot know what other shards
// observed, so it takes every pod over as moved in. A new state in any
// other scope counts the usual max-age window: nothing else owned those
// pods, unless the installation switched modes.
type handover struct {
	// prev is the scope the state was written under; nil: unknown.
	prev, cur *scope.Scope
	// since is when this instance started under cur.
	since time.Time
	// inherited are the pods in the state when the pipeline was created;
	// after the first sweep, only those that moved out and could not be
	// forgotten yet.
	inherited      map[types.UID]struct{}
	firstSweepDone bool
}

// newHandover compares the scope recorded in st with cur: it returns the
// handover to do, if any, and whether cur must be recorded.
func newHandover(st Store, cur *scope.Scope, now time.Time, log *slog.Logger) (*handover, bool) {
	h := &handover{cur: cur, since: now}
	raw, recorded := st.Setting(scopeSetting)
	switch {
	case recorded:
		prev, err := scope.Unmarshal(raw)
		if err != nil {
			log.Error("The state's recorded scope is unreadable: taking every pod over as moved in", "err", err)
			break
		}
		if prev.Equal(cur) {
			return nil, false
		}
		h.prev = &prev
	case st.Len() > 0:
		prev := scope.Unscoped
		if prev.Equal(cur) {
			return nil, true
		}
		h.prev = &prev
	case !cur.Sharded():
		return nil, true
	}
	h.inherited = map[types.UID]struct{}{}
	st.UIDs(func(uid types.UID) { h.inherited[uid] = struct{}{} })
	previous := "unknown"
	if h.prev != nil {
		previous = h.prev.String()
	}
	log.Info("Exporter scope changed: handing pods over", "previous", previous, "scope", cur.String(), "podsInState", len(h.inherited))
	return h, true
}

// movedOut reports whether a record without a live pod must be forgotten
// uncounted: it may belong to another instance now.
func (h *handover) movedOut(uid types.UID) bool {
	if h == nil {
		return false
	}
	if _, ok := h.inherited[uid]; !ok {
		return false
	}
	if h.firstSweepDone {
		// Left over by the first sweep, whose forget failed.
		return true
	}
	stillMine := h.prev != nil && h.prev.SameFilters(h.cur) && h.cur.OwnsUID(uid)
	return !stillMine
}

// forgotten notes that a record that moved out was forgotten.
func (h *handover) forgotten(uid types.UID) {
	if h != nil && h.firstSweepDone {
		delete(h.inherited, uid)
	}
}

// firstSweepFinished ends the first sweep: every other inherited record has
// a live pod this scope owns, and is this scope's from now on. failedOut
// are the records that moved out but failed to go: later sweeps retry them.
func (h *handover) firstSweepFinished(failedOut map[types.UID]struct{}) {
	if h == nil || h.firstSweepDone {
		return
	}
	h.inherited = failedOut
	h.firstSweepDone = true
}

// pendingOut is the number of moved-out records not forgotten yet.
func (h *handover) pendingOut() int {
	if h == nil || !h.firstSweepDone {
		return 0
	}
	return len(h.inherited)
}

// adopts reports whether a pod without a record moved in: the previous
// scope, when known, did not own it.
func (h *handover) adopts(pod *lifecycle.Pod) bool {
	return h != nil && (h.prev == nil || !h.prev.Owns(pod.Namespace, pod.NodeName, pod.UID))
}

// adopt is the first step of a pod that moved in: what happened before
// since is too old, and not counted as skipped either.
func (h *handover) adopt(now time.Time, pod *lifecycle.Pod, in lifecycle.Inputs, prev lifecycle.State, cfg *lifecycle.Config) (lifecycle.State, lifecycle.Outcome) {
	maxAge := cfg.WithDefaults().MaxObservationAge
	cut := now.Sub(h.since)
	if cut >= maxAge {
		// Long enough after the change that the usual rule already leaves
		// out everything before it.
		return lifecycle.Step(now, pod, in, prev, cfg)
	}
	c := *cfg
	// Positive, since zero means the default.
	c.MaxObservationAge = max(cut, time.Nanosecond)
	next, out := lifecycle.Step(now, pod, in, prev, &c)
	out.Skips = slices.DeleteFunc(out.Skips, func(s lifecycle.Skip) bool { return s.Reason == lifecycle.TooOld })
	return next, out
}
