package pipeline

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/store"
)

// Sweep drops the state of pods that no longer exist: a record whose UID
// no pod has had in two sweeps in a row. Deletions seen by the watch forget
// their pods at once; this catches what a watch gap or a failed write left
// behind. It runs every Options.SweepInterval.
func (p *Pipeline) Sweep() int { return p.sweep(false) }

// sweep forgets records without a live pod. At start-up (now), once the
// first list has been handled, one look is enough; later, a record must be
// seen orphaned twice, because a deletion in flight (the key already gone,
// deletePod waiting for the lock) must be measured by deletePod, not
// vanished here. Records that moved out of this exporter's scope are
// forgotten uncounted (see handover).
func (p *Pipeline) sweep(now bool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.live == nil {
		return 0
	}
	orphans := p.orphans()
	failedOut := p.forgetMovedOut(orphans)
	forgotten := p.forgetVanished(orphans, failedOut, now)
	p.suspects, p.suspectedAt = orphans, p.opts.Now()
	if now {
		p.handover.firstSweepFinished(failedOut)
	}
	p.recordScope()
	p.expireHeld()
	return forgotten
}

// orphans are the records without a live pod that no retry owns.
func (p *Pipeline) orphans() map[types.UID]struct{} {
	live := p.live()
	orphans := map[types.UID]struct{}{}
	p.store.UIDs(func(uid types.UID) {
		if _, ok := live[uid]; ok {
			return
		}
		if _, ok := p.failed[uid]; ok {
			// RetryFailed owns it.
			return
		}
		orphans[uid] = struct{}{}
	})
	return orphans
}

// forgetMovedOut forgets, uncounted, the orphans that moved out of this
// exporter's scope, and drops them from orphans; it returns those whose
// forget failed.
func (p *Pipeline) forgetMovedOut(orphans map[types.UID]struct{}) (failed map[types.UID]struct{}) {
	failed = map[types.UID]struct{}{}
	movedOut := 0
	for uid := range orphans {
		if !p.handover.movedOut(uid) {
			continue
		}
		// Another instance owns it now, or may: it is not gone, and
		// counting it vanished would count it twice.
		prev, _ := p.store.Get(uid)
		if err := p.store.Apply(store.Change{UID: uid, State: prev, Forget: true}); err != nil {
			p.log.Error("Forgetting a pod that moved out of this exporter's scope failed", "uid", uid, "err", err)
			failed[uid] = struct{}{}
			continue
		}
		delete(orphans, uid)
		p.held.forget(uid)
		p.handover.forgotten(uid)
		movedOut++
	}
	if movedOut > 0 || len(failed) > 0 {
		p.log.Info("Forgot pods that moved out of this exporter's scope, uncounted", "pods", movedOut, "failed", len(failed))
	}
	return failed
}

// forgetVanished counts the orphans as vanished and forgets them, and drops
// them from orphans; skip are the moved-out ones that failed to go. Later
// than start-up (now), only the orphans the last sweep suspected already
// go.
func (p *Pipeline) forgetVanished(orphans, skip map[types.UID]struct{}, now bool) (forgotten int) {
	for uid := range orphans {
		if _, ok := skip[uid]; ok {
			continue
		}
		if _, seen := p.suspects[uid]; !now && !seen {
			continue
		}
		prev, _ := p.store.Get(uid)
		// The pod was gone by the sweep that first missed it: the last
		// one, or this one at start-up, right after the first list.
		goneBy := p.suspectedAt
		if now {
			goneBy = p.opts.Now()
		}
		next, out := lifecycle.Swept(goneBy, prev, &p.opts.Lifecycle)
		if prev == (lifecycle.State{UserError: true}) {
			// Only a FailedMount event ever named this pod: there was
			// nothing to measure.
			out = lifecycle.Outcome{}
		}
		change := p.routing.change(p.opts.Now(), uid, next, out, nil, nil)
		change.Forget = true
		if err := p.write(change, out, nil, nil); err != nil {
			// Not lost: the record stays, and the next sweep tries again.
			p.log.Error("Forgetting a pod that no longer exists failed", "uid", uid, "err", err)
			continue
		}
		delete(orphans, uid)
		p.held.forget(uid)
		forgotten++
	}
	return forgotten
}

// recordScope writes Options.Scope to the store once every record that
// moved out is forgotten.
func (p *Pipeline) recordScope() {
	if !p.persistScope || p.handover.pendingOut() > 0 {
		return
	}
	if err := p.store.SetSetting(scopeSetting, p.opts.Scope.Marshal()); err != nil {
		p.log.Error("Recording the exporter's scope failed, will retry", "err", err)
		return
	}
	p.persistScope = false
	p.log.Info("Recorded the exporter's scope with its state", "scope", p.opts.Scope.String())
}
