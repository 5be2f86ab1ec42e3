package pipeline

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/store"
)

// pendingPulls are a pod's image events until its pulls are done: they are
// not in the store (a relist after a restart hands them on again, and
// until the pulls are done nothing of them is persisted), so a pod's entry
// lives in memory until lifecycle.PullsSeen records the sum, the pod is
// forgotten, or, for a pod the store does not know, pendingUserErrorTTL
// has passed since its first event (the pod watch lags the event watches,
// or the events outlived their pod).
type pendingPulls struct {
	pulls lifecycle.Pulls
	// since is when the first event was held.
	since time.Time
	// dirty: an event was added that is not folded into the store yet (the
	// pod is unknown, or its write failed).
	dirty bool
}

// ImagePull implements informers.Handler.
func (p *Pipeline) ImagePull(uid types.UID, ref string, e lifecycle.PullEvent) {
	if err := p.RecordImagePull(uid, e); err != nil {
		p.log.Error("Recording an image pull failed, will retry", "pod", ref, "err", err)
	}
}

// RecordImagePull adds one of the kubelet's image events to its pod's
// pulls, and records what they complete. An event for a pod the store
// does not know (yet) waits in memory for the pod's next update.
func (p *Pipeline) RecordImagePull(uid types.UID, e lifecycle.PullEvent) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	prev, known := p.store.Get(uid)
	if known && prev.Pulls.Has(lifecycle.PullsDone) {
		// Its start-up pulls are recorded: a restarted container's pull,
		// or the same events listed again.
		return nil
	}
	pp := p.pulls[uid]
	if pp == nil {
		pp = &pendingPulls{since: p.opts.Now()}
		p.pulls[uid] = pp
	}
	if !pp.pulls.Add(e) {
		return nil
	}
	pp.dirty = true
	meta := p.store.Meta(uid)
	if !known || meta == nil {
		// Not seen live yet: the pod's update folds the pulls in, with
		// the pod's containers.
		return nil
	}
	if _, waiting := p.failed[uid]; waiting {
		// Its own retry carries the pulls.
		return nil
	}
	return p.foldPulls(uid, prev, meta.Containers, meta, nil)
}

// foldPulls records what a pod's pulls complete, given the state prev and
// the pod's number of containers; called with mu held. pod, when the fold
// comes with its update, names the exemplars.
func (p *Pipeline) foldPulls(uid types.UID, prev lifecycle.State, containers int, meta *store.PodMeta, pod *lifecycle.Pod) error {
	pp := p.pulls[uid]
	if pp == nil {
		return nil
	}
	_, userError := p.pendingUserErrors[uid]
	now := p.opts.Now()
	next, out := lifecycle.PullsSeen(now, p.withUserError(uid, prev), &pp.pulls, containers, &p.opts.Lifecycle)
	if next != prev {
		if err := p.write(p.routing.change(now, uid, next, out, meta, pod), out, meta, pod); err != nil {
			return err
		}
		if userError {
			p.userErrorWritten(uid)
		}
	}
	pp.dirty = false
	if next.Pulls.Has(lifecycle.PullsDone) {
		delete(p.pulls, uid)
	}
	return nil
}

// pullsOf folds the pod's held pulls into the outcome of its update, so
// that both are written in one change; called with mu held.
func (p *Pipeline) pullsOf(pod *lifecycle.Pod, next lifecycle.State, out lifecycle.Outcome) (lifecycle.State, lifecycle.Outcome) {
	pp := p.pulls[pod.UID]
	if pp == nil {
		return next, out
	}
	next, more := lifecycle.PullsSeen(p.opts.Now(), next, &pp.pulls, int(pod.Containers)+int(pod.InitContainers), &p.opts.Lifecycle)
	out.Observations = append(out.Observations, more.Observations...)
	out.Skips = append(out.Skips, more.Skips...)
	return next, out
}

// pullsWritten drops what a written change carried of a pod's pulls;
// called with mu held.
func (p *Pipeline) pullsWritten(uid types.UID, next lifecycle.State) {
	if pp := p.pulls[uid]; pp != nil {
		pp.dirty = false
		if next.Pulls.Has(lifecycle.PullsDone) {
			delete(p.pulls, uid)
		}
	}
}

// retryPulls folds the pulls of known pods whose write failed; called with
// mu held, by RetryFailed. Pods with a failed write of their own are left
// to that retry.
func (p *Pipeline) retryPulls() (written, failed int, last error) {
	for uid, pp := range p.pulls {
		if !pp.dirty {
			continue
		}
		prev, known := p.store.Get(uid)
		meta := p.store.Meta(uid)
		if _, waiting := p.failed[uid]; !known || meta == nil || waiting {
			continue
		}
		if err := p.foldPulls(uid, prev, meta.Containers, meta, nil); err != nil {
			failed, last = failed+1, err
			continue
		}
		written++
	}
	return written, failed, last
}

// expirePulls drops the pulls that waited for an unknown pod longer than
// pendingUserErrorTTL; called with mu held, by the sweep.
func (p *Pipeline) expirePulls() {
	cutoff := p.opts.Now().Add(-pendingUserErrorTTL)
	for uid, pp := range p.pulls {
		if _, known := p.store.Get(uid); known {
			continue
		}
		if pp.since.Before(cutoff) {
			delete(p.pulls, uid)
		}
	}
}
