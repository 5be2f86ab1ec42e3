package pipeline

import (
	"time"

	"github.com/podslo/podslo/lifecycle"
)

// retry is a pod write to try again: its newest object, or its deletion.
type retry struct {
	// pod is the newest object; nil for a pod deleted while the watch was
	// down, whose final object is unknown.
	pod *lifecycle.Pod
	// first is the oldest object not written since the pod's last write,
	// when an update came after it: it is handled before pod, so that the
	// transitions it first showed keep its receive time (a later object's
	// is later, by the time the disk was full), as if the writes had not
	// failed. nil when pod is the only one.
	first *lifecycle.Pod
	// deleted: what failed was forgetting the pod.
	deleted bool
	// ref names the pod for logs.
	ref string
}

// RetryFailed handles again every pod whose last state write failed and
// that has had no update since, and writes what known pods hold of their
// events and failed to write. It runs every Options.RetryPeriod.
func (p *Pipeline) RetryFailed() {
	p.mu.Lock()
	defer p.mu.Unlock()
	ok, failed, last := p.retryHeld()
	for uid, r := range p.failed {
		if err := p.replayFirst(r.first); err != nil {
			failed, last = failed+1, err
			continue
		}
		r.first = nil
		p.failed[uid] = r
		var err error
		if r.deleted {
			err = p.forgetLocked(uid, r.pod)
		} else {
			err = p.handleLocked(r.pod)
		}
		if err != nil {
			failed, last = failed+1, err
			continue
		}
		delete(p.failed, uid)
		ok++
	}
	if ok == 0 && failed == 0 {
		return
	}
	// One line per round, not per pod: on a full disk every pod fails.
	if failed > 0 {
		p.log.Error("Retrying failed pod writes", "recorded", ok, "stillFailing", failed, "err", last)
	} else {
		p.log.Info("Retrying failed pod writes", "recorded", ok, "stillFailing", 0)
	}
}

// replayFirst handles first, the oldest object of a pod not written, if
// any, before the caller handles a newer one.
func (p *Pipeline) replayFirst(first *lifecycle.Pod) error {
	if first == nil {
		return nil
	}
	return p.handleLocked(first)
}

// keepFirstDeletion carries the first deletion request of a pod whose
// write failed into the newer object that replaces it. lifecycle measures a
// termination from the first request it sees, and a later delete moves
// deletionTimestamp (the kubelet's or kwok's final delete with grace 0 sets
// it to the removal): retried from the newest object alone, the sandbox
// would look gone before the deletion was requested.
func keepFirstDeletion(older, newer *lifecycle.Pod) {
	if older == nil || newer == nil || older.DeletionTimestamp == nil {
		return
	}
	requested := func(p *lifecycle.Pod) time.Time {
		var grace int64
		if p.DeletionGracePeriodSeconds != nil {
			grace = *p.DeletionGracePeriodSeconds
		}
		return p.DeletionTimestamp.Add(-time.Duration(grace) * time.Second)
	}
	if newer.DeletionTimestamp == nil || requested(older).Before(requested(newer)) {
		newer.DeletionTimestamp = older.DeletionTimestamp
		newer.DeletionGracePeriodSeconds = older.DeletionGracePeriodSeconds
	}
}
