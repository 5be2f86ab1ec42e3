package pipeline

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/podslo/podslo/lifecycle"
)

// heldTTL is how long the inputs of a pod the store does not know wait for
// it: long enough for a lagging pod watch, short enough that the events of
// deleted pods (which outlive them by an hour) do not pile up.
const heldTTL = 10 * time.Minute

// held is what the pipeline keeps in memory of a pod besides its stored
// state: the inputs its events bring (lifecycle.Inputs: a FailedMount mark,
// its image events) until a write records them, and, while its pulls are
// not recorded, its number of containers, which they wait for. Nothing of it
// is persisted: after a restart the watches hand the events and the pods on
// again.
//
// An entry lives
//   - for a pod the store does not know (the pod watch lags the event
//     watches, or the events outlived their pod): until the pod's update
//     carries its inputs, or heldTTL after the first of them (expire);
//     writing them alone would bring a deleted pod back;
//   - for a known pod with an input not written (its write failed): until a
//     write carries it (RetryFailed, or the pod's next update); the event
//     is not delivered again;
//   - for a pod seen live whose pulls are not recorded: until they are
//     (lifecycle.PullsDone), given up (lifecycle.PullsWait after its
//     containers all ran), or the pod is forgotten.
//
// So it holds at most one entry per live pod awaiting its pulls (for at
// most lifecycle.PullsWait once its containers run), one per
// pod with a write to retry, and the events of unknown pods of the last
// heldTTL, each holding at most one event per container. A pod awaiting its
// pulls with nothing held costs its map slot, 32 bytes.
//
// A new event-fed input is a field of lifecycle.Inputs, its value in
// heldEvents, a hold method, and its line in of and written.
type held struct {
	pods map[types.UID]heldPod
}

// heldPod is a value, not a pointer, so that the common entry (a pod
// awaiting its pulls, with nothing held) allocates nothing of its own.
type heldPod struct {
	// events is what the pod's events brought; nil when nothing is held.
	events *heldEvents
	// containers is the pod's number of containers and init containers,
	// from its last update, while its pulls are awaited; 0 until the
	// pipeline has handled an update of it.
	containers int32
	// running is when a write first recorded the pod's containers all
	// running while its pulls were awaited (lifecycle.State.AwaitsPulls),
	// in Unix seconds; 0 until then. lifecycle.PullsWait later, they are
	// given up (CheckTimeouts). In memory only: after a restart the wait
	// starts again from the pod's relisted update.
	running uint32
}

// heldEvents are a pod's held inputs.
type heldEvents struct {
	// since is when the first input was held, for heldTTL.
	since time.Time
	// userError: a FailedMount mark the store does not have yet.
	userError bool
	// pulls are the pod's image events, until lifecycle.PullsDone; nil
	// when none came.
	pulls *lifecycle.Pulls
	// pullsUnwritten: an image event was added that no write carried yet.
	pullsUnwritten bool
}

func newHeld() held { return held{pods: map[types.UID]heldPod{}} }

// of is what is held of uid: its inputs, and its number of containers (0
// when not known).
func (h *held) of(uid types.UID) (lifecycle.Inputs, int) {
	e, ok := h.pods[uid]
	if !ok || e.events == nil {
		return lifecycle.Inputs{}, int(e.containers)
	}
	return lifecycle.Inputs{UserError: e.events.userError, Pulls: e.events.pulls}, int(e.containers)
}

// foldable is what of uid, whose stored state is prev, can be recorded
// without an update of the pod: its pulls only when its containers are
// known, which they wait for, or once its pulls are recorded, when only a
// failed pull listed after them is left to count
// (lifecycle.FailedPullCounts).
func (h *held) foldable(uid types.UID, prev lifecycle.State) (lifecycle.Inputs, int) {
	in, containers := h.of(uid)
	if containers == 0 && !prev.Pulls.Has(lifecycle.PullsDone) {
		in.Pulls = nil
	}
	return in, containers
}

// hold returns uid's events, opening them at now.
func (h *held) hold(uid types.UID, now time.Time) (heldPod, *heldEvents) {
	e := h.pods[uid]
	if e.events == nil {
		e.events = &heldEvents{since: now}
		h.pods[uid] = e
	}
	return e, e.events
}

// holdUserError holds a FailedMount mark of uid.
func (h *held) holdUserError(uid types.UID, now time.Time) {
	_, ev := h.hold(uid, now)
	ev.userError = true
}

// holdPull adds an image event of uid, and reports whether uid has an
// input to write (this event, or an earlier one whose write failed).
func (h *held) holdPull(uid types.UID, now time.Time, e lifecycle.PullEvent) bool {
	_, ev := h.hold(uid, now)
	if ev.pulls == nil {
		ev.pulls = &lifecycle.Pulls{}
	}
	if ev.pulls.Add(e) {
		ev.pullsUnwritten = true
	}
	return ev.userError || ev.pullsUnwritten
}

// written notes that the store has recorded next at now, which carried
// the inputs in, for a pod of containers containers (0 when not known):
// what it carried is no longer to write, the pulls go once recorded or
// given up, and the pod's containers stay only while its pulls are
// awaited.
func (h *held) written(uid types.UID, in lifecycle.Inputs, next lifecycle.State, containers int, now time.Time) {
	done := next.Pulls.Has(lifecycle.PullsDone) || next.Pulls.Has(lifecycle.PullsGivenUp)
	awaiting := containers > 0 && !done
	e, ok := h.pods[uid]
	if !ok {
		// The common case: nothing held.
		if awaiting {
			e = heldPod{containers: int32(containers)}
			if next.AwaitsPulls() {
				e.running = uint32(now.Unix())
			}
			h.pods[uid] = e
		}
		return
	}
	if ev := e.events; ev != nil {
		if in.UserError {
			ev.userError = false
		}
		if in.Pulls != nil {
			ev.pullsUnwritten = false
		}
		if done {
			ev.pulls, ev.pullsUnwritten = nil, false
		}
		if !ev.userError && ev.pulls == nil {
			e.events = nil
		}
	}
	e.containers = 0
	if awaiting {
		e.containers = int32(containers)
		if e.running == 0 && next.AwaitsPulls() {
			e.running = uint32(now.Unix())
		}
	} else {
		e.running = 0
	}
	if e.events == nil && e.containers == 0 {
		delete(h.pods, uid)
		return
	}
	h.pods[uid] = e
}

// unwritten lists the pods with an input no write carried yet.
func (h *held) unwritten() []types.UID {
	var out []types.UID
	for uid, e := range h.pods {
		// Pulls wait for the pod's containers: its update carries them.
		if ev := e.events; ev != nil && (ev.userError || ev.pullsUnwritten && e.containers > 0) {
			out = append(out, uid)
		}
	}
	return out
}

// overdue lists the pods whose containers all ran before cutoff while
// their pulls are still awaited.
func (h *held) overdue(cutoff time.Time) []types.UID {
	var out []types.UID
	for uid, e := range h.pods {
		if e.running != 0 && int64(e.running) < cutoff.Unix() {
			out = append(out, uid)
		}
	}
	return out
}

// expire drops what waited for a pod the store does not know since before
// cutoff. What a known pod holds stays: a write to make, or pulls awaited.
func (h *held) expire(cutoff time.Time, known func(types.UID) bool) {
	for uid, e := range h.pods {
		if known(uid) {
			continue
		}
		if e.events == nil || e.events.since.Before(cutoff) {
			delete(h.pods, uid)
		}
	}
}

// forget drops everything held of a pod that is forgotten.
func (h *held) forget(uid types.UID) { delete(h.pods, uid) }

// UserError implements informers.Handler.
func (p *Pipeline) UserError(uid types.UID, ref string) {
	if err := p.MarkUserError(uid); err != nil {
		p.log.Error("Recording a user error failed", "pod", ref, "err", err)
	}
}

// MarkUserError records that the pod's own spec blocks its sandbox. A pod
// the store has no record of is either not seen yet (the pod watch lags the
// event watch) or already forgotten (events outlive their pods by an hour):
// the mark then waits in memory for the pod, and a deleted pod is never
// brought back. A mark that fails to write waits in memory too, and
// RetryFailed writes it.
func (p *Pipeline) MarkUserError(uid types.UID) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	prev, known := p.store.Get(uid)
	if known && prev.UserError {
		return nil
	}
	p.held.holdUserError(uid, p.opts.Now())
	if !known {
		return nil
	}
	p.log.Info("Pod blocked by a missing Secret or ConfigMap, left out of the sandbox SLIs", "uid", uid)
	return p.fold(uid, prev)
}

// ImagePull implements informers.Handler.
func (p *Pipeline) ImagePull(uid types.UID, ref string, e lifecycle.PullEvent) {
	if err := p.RecordImagePull(uid, e); err != nil {
		p.log.Error("Recording an image pull failed, will retry", "pod", ref, "err", err)
	}
}

// RecordImagePull adds one of the kubelet's image events to its pod's
// pulls, and records what they complete. An event for a pod the store
// does not know (yet), or whose containers are not known since the
// exporter started, waits in memory for the pod's next update.
func (p *Pipeline) RecordImagePull(uid types.UID, e lifecycle.PullEvent) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	prev, known := p.store.Get(uid)
	if known && (prev.Pulls.Has(lifecycle.PullsDone) || prev.Pulls.Has(lifecycle.PullsGivenUp)) && !lifecycle.FailedPullCounts(prev, e) {
		// Its start-up pulls are recorded, or were given up: a restarted
		// container's pull, the same events listed again, or one that came
		// too late.
		return nil
	}
	if !p.held.holdPull(uid, p.opts.Now(), e) || !known {
		return nil
	}
	return p.fold(uid, prev)
}

// fold records what a known pod holds that can be recorded without its
// update; prev is its stored state. A pod whose own write failed is left to
// its retry, which carries its inputs.
func (p *Pipeline) fold(uid types.UID, prev lifecycle.State) error {
	if _, waiting := p.failed[uid]; waiting {
		return nil
	}
	in, containers := p.held.foldable(uid, prev)
	now := p.opts.Now()
	next, out := lifecycle.Fold(now, in, containers, prev, &p.opts.Lifecycle)
	if next != prev {
		// The pod's live metadata only labels the samples.
		meta := p.store.Meta(uid)
		if err := p.write(p.routing.change(now, uid, next, out, meta, nil), out, meta, nil); err != nil {
			return err
		}
	}
	p.held.written(uid, in, next, containers, now)
	return nil
}

// retryHeld writes what known pods hold and failed to write, for
// RetryFailed. Pods with a failed write of their own are left to that
// retry, which carries it.
func (p *Pipeline) retryHeld() (written, failed int, last error) {
	for _, uid := range p.held.unwritten() {
		prev, known := p.store.Get(uid)
		if _, waiting := p.failed[uid]; !known || waiting {
			// Its pod is not recorded yet, or its retry carries it.
			continue
		}
		if err := p.fold(uid, prev); err != nil {
			failed, last = failed+1, err
			continue
		}
		written++
	}
	return written, failed, last
}

// giveUpPulls ends the wait for the pulls of the pods whose containers
// all ran longer than lifecycle.PullsWait ago, for CheckTimeouts, which
// runs it only while the watches are current: an outage of the event
// watch delays its events, it does not lose them. A pod with a write to
// retry is left to it.
func (p *Pipeline) giveUpPulls(now time.Time) {
	for _, uid := range p.held.overdue(now.Add(-lifecycle.PullsWait)) {
		if _, waiting := p.failed[uid]; waiting {
			continue
		}
		prev, known := p.store.Get(uid)
		if !known {
			continue
		}
		next, out := lifecycle.GiveUpPulls(prev)
		if next != prev {
			meta := p.store.Meta(uid)
			if err := p.write(p.routing.change(now, uid, next, out, meta, nil), out, meta, nil); err != nil {
				p.log.Error("Recording image pulls that never came failed, will retry", "uid", uid, "err", err)
				continue
			}
		}
		_, containers := p.held.of(uid)
		p.held.written(uid, lifecycle.Inputs{}, next, containers, now)
	}
}

// expireHeld drops what waited for an unknown pod longer than heldTTL, for
// the sweep.
func (p *Pipeline) expireHeld() {
	p.held.expire(p.opts.Now().Add(-heldTTL), func(uid types.UID) bool {
		_, known := p.store.Get(uid)
		return known
	})
}
