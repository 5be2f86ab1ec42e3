package lifecycle

import (
	"math"
	"time"
)

// The image pulls of a pod come from the kubelet's Events on it, not from
// the pod: a Pulled event per container says how long its image took
// ("Successfully pulled image "x" in 1.2s (1.5s including waiting)") or
// that it was already present. The events are listed again after an
// exporter restart (they live an hour), so until a pod's pulls are done
// the pipeline holds them in memory (Pulls, an Inputs field) and the state
// holds nothing of them; once every container's image is in, Step or Fold
// records the sum in the state, once, and later events of the pod change
// nothing.

// PullResult is what one event says of a container's image.
type PullResult uint8

const (
	// PullFailed: the pull failed (ErrImagePull, or a back-off after one).
	PullFailed PullResult = iota + 1
	// PullCached: the image was already present on the node.
	PullCached
	// PullDone: the image was pulled; PullEvent.Ms says how long it took.
	PullDone
)

// PullEvent is one kubelet event about a container's image.
type PullEvent struct {
	// Container names the container as the event's
	// involvedObject.fieldPath does (spec.containers{app}); empty for an
	// event about the pod (kwok's stages), which counts for a
	// one-container pod only (Pulls.counted).
	Container string
	// Init: the container is an init container.
	Init   bool
	Result PullResult
	// Ms is the pull's duration including its wait in the kubelet's pull
	// queue, in milliseconds: the span the kubelet's own start-up SLI
	// takes off for this image (PullDone only).
	Ms uint32
	// Bytes is the image's size as the message gives it (PullDone, from
	// kubelet 1.29 on); 0 when it gives none.
	Bytes uint64
}

// Pulls is what a pod's events showed of its image pulls: the first
// success of each container (a restarted container pulls again, which is
// no longer start-up) and whether any pull failed.
type Pulls struct {
	byContainer map[string]PullEvent
	failed      bool
}

// Add records e and reports whether it told something new.
func (p *Pulls) Add(e PullEvent) bool {
	if e.Result == PullFailed {
		changed := !p.failed
		p.failed = true
		return changed
	}
	if _, ok := p.byContainer[e.Container]; ok {
		return false
	}
	if p.byContainer == nil {
		p.byContainer = map[string]PullEvent{}
	}
	p.byContainer[e.Container] = e
	return true
}

// complete reports whether every one of the pod's containers (init
// containers included) has its image; containers is 0 when unknown.
func (p *Pulls) complete(containers int) bool {
	return p != nil && containers > 0 && len(p.counted(containers)) >= containers
}

// counted are the events that count for a pod of containers containers. An
// event about no container (no involvedObject.fieldPath, Container "") is
// what kwok's stages write, which cannot name one: it stands for the only
// container of a one-container pod, and is ignored beside an event about a
// container, or for a pod of more.
func (p *Pulls) counted(containers int) map[string]PullEvent {
	if _, pod := p.byContainer[""]; !pod || (containers == 1 && len(p.byContainer) == 1) {
		return p.byContainer
	}
	out := make(map[string]PullEvent, len(p.byContainer))
	for k, e := range p.byContainer {
		if k != "" {
			out[k] = e
		}
	}
	return out
}

// maxMs keeps a sum of milliseconds within the state's int32 (24 days).
const maxMs = 1<<31 - 1

// pulls folds a pod's pulls into its state (Step, Fold): a first failed
// pull counts once (ImagePullFailedOnce), and once every one of its
// containers (and init containers, together containers; 0 when the pod's
// spec is not known) has its image, their sum is observed once
// (ImagesPulled) and the start-up SLI may end (startup.go). pulls may be
// nil.
func (c *stepper) pulls(pulls *Pulls, containers int) {
	n := c.next
	if pulls == nil || n.Pulls.Has(PullsGivenUp) {
		return
	}
	c.pullFailed(pulls)
	if n.Pulls.Has(PullsDone) || !pulls.complete(containers) {
		return
	}
	var sum, init int64
	var kib uint64
	cached := true
	for _, e := range pulls.counted(containers) {
		sum += int64(e.Ms)
		if e.Init {
			init += int64(e.Ms)
		}
		// Rounded up, so that a pulled image with a size is never 0.
		kib += e.Bytes/1024 + min(e.Bytes%1024, 1)
		cached = cached && e.Result == PullCached
	}
	n.Pulls |= PullsDone
	if cached {
		n.Pulls |= PullsCached
	}
	n.ImagePull = uint32(min(sum, maxMs))
	n.ImagePullInit = uint32(min(init, maxMs))
	n.ImagePullKiB = uint32(min(kib, math.MaxUint32))
	if r, skip := c.startupUnseen(c.now); skip {
		c.skipOnce(Skip{ImagePull, r})
	} else {
		// Exact: the kubelet writes each duration to the millisecond.
		c.out.observe(Observation{Kind: ImagesPulled, Seconds: float64(n.ImagePull) / 1000, Precise: true, Cached: cached})
	}
	if n.Pulls.Has(StartupEndSeen) {
		// Else the start-up's end comes with a later update (startup.go).
		c.finishStartup()
	}
}

// FailedPullCounts reports whether e, for a pod whose pulls are recorded
// (State.PullsDone), still counts: a failed pull listed after the pod's
// Pulled events, before its start-up ended (pulls).
func FailedPullCounts(s State, e PullEvent) bool {
	return e.Result == PullFailed && s.Pulls.Has(PullsDone) && !s.Pulls.Has(PullsGivenUp) &&
		!s.Pulls.Has(PullFailedCounted) && !s.Pulls.Has(StartupDone)
}

// pullFailed counts a pod's first failed pull (ImagePullFailedOnce), and
// ends its start-up without it. A failed pull counts until the start-up
// ends, also once every image is in: the kubelet writes it before the
// image's Pulled event, but a list (a restart, a relist) hands the events
// over in name order. After the start-up, it is a restarted container's.
// Step calls it before the start-up's end (startup.go), which a failure
// held in memory must come before.
func (c *stepper) pullFailed(pulls *Pulls) {
	n := c.next
	if pulls == nil || !pulls.failed || n.Pulls.Has(PullFailedCounted) || n.Pulls.Has(PullsGivenUp) ||
		(n.Pulls.Has(PullsDone) && n.Pulls.Has(StartupDone)) {
		return
	}
	n.Pulls |= PullFailedCounted
	if !n.SeenLate && !n.SeenRecreated {
		c.out.observe(Observation{Kind: ImagePullFailedOnce})
	}
	if n.Pulls.Has(StartupEndSeen) {
		c.finishStartup()
	}
}

// PullsWait is how long after a pod's containers were first seen all
// running its image events may still come. The kubelet writes a
// container's Pulled event before it starts the container, and the event
// watch lags the pod watch by seconds, even across a relist (events live
// an hour): an event not in by then was dropped by the kubelet's event
// recorder, or merged into a "(combined from similar events)" message.
// It is also how long an unknown pod's events wait for it (pipeline).
const PullsWait = 10 * time.Minute

// AwaitsPulls reports whether the pod's containers were all seen running
// and its pulls are still awaited, by its own SLI or by the start-up's.
func (s *State) AwaitsPulls() bool {
	return !s.Pulls.Has(PullsDone) && !s.Pulls.Has(PullsGivenUp) &&
		(s.Pulls.Has(StartupEndSeen) || s.Pulls.Has(StartupDone))
}

// GiveUpPulls ends the wait for the pulls of a pod whose containers all
// ran but whose image events never all came (AwaitsPulls): PullsWait
// after its containers were first seen running, or when the pod goes
// (Vanish). Its pulls and its start-up SLI are skipped as PullsUnknown,
// once; an image event that comes later is ignored.
func GiveUpPulls(prev State) (State, Outcome) {
	var out Outcome
	if prev.AwaitsPulls() {
		c := stepper{next: &prev, out: &out}
		c.giveUpPulls()
	}
	return prev, out
}

func (c *stepper) giveUpPulls() {
	n := c.next
	n.Pulls |= PullsGivenUp
	c.skipOnce(Skip{ImagePull, PullsUnknown})
	switch {
	case n.Pulls.Has(StartupDone):
	case n.UserError:
		// As finishStartup: the sandbox exclusion counts the pod.
		n.Pulls |= StartupDone
	default:
		c.startupSkipped(PullsUnknown)
	}
}
