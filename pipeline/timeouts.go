package pipeline

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/store"
)

// CheckTimeouts counts the pods whose sandbox is still not ready past the
// creation timeout. It runs on a timer because a stuck pod sends no updates.
// Since it concludes from the absence of an update, it waits while the pod
// or the FailedMount event watch is not current (an API server outage, a
// relist): a sandbox that became ready meanwhile is not seen yet, nor the
// event that makes a pod's wait its author's mistake, and a counted timeout
// cannot be taken back. The pods whose deadline passed meanwhile are
// judged once the watches are current again.
func (p *Pipeline) CheckTimeouts() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.watchesCurrent() {
		return
	}
	now := p.opts.Now()
	var live map[types.UID]struct{}
	for _, d := range p.pendingPods() {
		in, containers := p.held.of(d.uid)
		next, out := lifecycle.Timeout(now, in, d.state, &p.opts.Lifecycle)
		if out.Empty() {
			continue
		}
		if p.live != nil {
			if live == nil {
				// Only for a pod past its timeout, which is rare: the set
				// is as large as the cluster.
				live = p.live()
			}
			if _, ok := live[d.uid]; !ok {
				// No such pod any more: a deletion whose write failed before
				// a restart, which the sweep forgets. It was not pending
				// when the watch last saw it.
				continue
			}
		}
		if err := p.write(p.routing.change(now, d.uid, next, out, d.meta, nil), out, d.meta, nil); err != nil {
			p.log.Error("Recording a sandbox creation timeout failed, will retry", "uid", d.uid, "err", err)
			continue
		}
		p.held.written(d.uid, lifecycle.Inputs{UserError: in.UserError}, next, containers, now)
	}
	p.giveUpPulls(now)
}

// watchesCurrent reports whether the pod and event watches are current,
// and logs when the check starts or stops holding timeouts.
func (p *Pipeline) watchesCurrent() bool {
	if p.current != nil && !p.current() {
		if !p.timeoutsHeld {
			p.log.Warn("Holding sandbox creation timeouts: the pod or event watch is not current")
			p.timeoutsHeld = true
		}
		return false
	}
	if p.timeoutsHeld {
		p.log.Info("Pod and event watches current again, checking sandbox creation timeouts")
		p.timeoutsHeld = false
	}
	return true
}

// pendingPod is a pod still waiting for its first sandbox, as stored.
type pendingPod struct {
	uid   types.UID
	state lifecycle.State
	meta  *store.PodMeta
}

// pendingPods are the stored pods still waiting for their first sandbox
// and not timed out yet, except those with a write to retry.
func (p *Pipeline) pendingPods() []pendingPod {
	var due []pendingPod
	p.store.Pods(func(uid types.UID, st *lifecycle.State, m *store.PodMeta) {
		if !st.Pending() || st.TimedOut {
			return
		}
		if _, ok := p.failed[uid]; ok {
			// Its newest object, or its deletion, waits for a write (a
			// full disk): the stored state is older than what the watch
			// showed, and may be pending only because the deletion or the
			// sandbox that ended the wait is not written yet. RetryFailed
			// writes it; the check after judges the pod.
			return
		}
		due = append(due, pendingPod{uid, *st, m})
	})
	return due
}
