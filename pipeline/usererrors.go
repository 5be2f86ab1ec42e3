package pipeline

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/store"
)

// pendingUserErrorTTL is how long a FailedMount event for a pod not (or no
// longer) known waits for that pod: long enough for a lagging pod watch,
// short enough that events of deleted pods do not pile up.
const pendingUserErrorTTL = 10 * time.Minute

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
	if !known {
		if _, waiting := p.failed[uid]; !waiting {
			p.holdUserError(uid)
			return nil
		}
	}
	if prev.UserError {
		return nil
	}
	p.log.Info("Pod blocked by a missing Secret or ConfigMap, left out of the sandbox SLIs", "uid", uid)
	if err := p.store.Apply(store.Change{UID: uid, State: lifecycle.MarkUserError(prev)}); err != nil {
		p.holdUserError(uid)
		return err
	}
	delete(p.pendingUserErrors, uid)
	return nil
}

// holdUserError keeps a FailedMount mark in memory until a write carries
// it; called with mu held.
func (p *Pipeline) holdUserError(uid types.UID) {
	if _, ok := p.pendingUserErrors[uid]; !ok {
		p.pendingUserErrors[uid] = p.opts.Now()
	}
}

// withUserError is prev with the pod's FailedMount mark if one waits in
// memory; called with mu held. Every path that judges a pod goes through
// it, so that a mark the store does not have yet still decides between a
// timeout and an exclusion.
func (p *Pipeline) withUserError(uid types.UID, prev lifecycle.State) lifecycle.State {
	if _, ok := p.pendingUserErrors[uid]; ok && !prev.UserError {
		return lifecycle.MarkUserError(prev)
	}
	return prev
}

// userErrorWritten drops a mark once a write carried it; called with mu
// held.
func (p *Pipeline) userErrorWritten(uid types.UID) { delete(p.pendingUserErrors, uid) }

// retryUserErrors writes the marks of known pods that failed to write;
// called with mu held, by RetryFailed. The marks of pods with a failed
// write of their own are left to that retry, which carries them.
func (p *Pipeline) retryUserErrors() (written, failed int, last error) {
	for uid := range p.pendingUserErrors {
		prev, known := p.store.Get(uid)
		if _, waiting := p.failed[uid]; !known || waiting {
			// Its pod is not recorded yet, or its retry carries it.
			continue
		}
		if !prev.UserError {
			if err := p.store.Apply(store.Change{UID: uid, State: lifecycle.MarkUserError(prev)}); err != nil {
				failed, last = failed+1, err
				continue
			}
			written++
		}
		delete(p.pendingUserErrors, uid)
	}
	return written, failed, last
}

// expireUserErrors drops the marks that waited for an unknown pod longer
// than pendingUserErrorTTL; called with mu held, by the sweep.
func (p *Pipeline) expireUserErrors() {
	cutoff := p.opts.Now().Add(-pendingUserErrorTTL)
	for uid, at := range p.pendingUserErrors {
		if _, known := p.store.Get(uid); known {
			// A mark to write, not a pod to wait for: RetryFailed owns it.
			continue
		}
		if at.Before(cutoff) {
			delete(p.pendingUserErrors, uid)
		}
	}
}
