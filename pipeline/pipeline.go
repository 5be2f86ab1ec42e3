package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/scope"
	"github.com/podslo/podslo/sli"
	"github.com/podslo/podslo/store"
)

// Defaults of Options.
const (
	DefaultRetryPeriod          = 30 * time.Second
	DefaultSweepInterval        = 5 * time.Minute
	DefaultTimeoutCheckInterval = 5 * time.Second
)

// Options configures the Pipeline.
type Options struct {
	// Lifecycle tunes the SLI logic.
	Lifecycle lifecycle.Config
	// PodLabels are the pod label keys copied onto per-pod series. Default
	// none.
	PodLabels []string
	// HistogramLabels are extra dimensions of aggregated series, as
	// sli.ParseHistogramLabels returned them: the pipeline does not check
	// them again. Default none.
	HistogramLabels sli.HistogramLabels
	// RetryPeriod is how often a pod whose state could not be written (a
	// full disk, say) is handled again, if no update of it came first.
	// Default DefaultRetryPeriod.
	RetryPeriod time.Duration
	// TimeoutCheckInterval is how often pods waiting for their first
	// sandbox are checked against the creation timeout. Default
	// DefaultTimeoutCheckInterval.
	TimeoutCheckInterval time.Duration
	// SweepInterval is how often the state of pods that no longer exist is
	// dropped. A record is dropped when two sweeps in a row find no pod
	// with its UID. Default DefaultSweepInterval.
	SweepInterval time.Duration
	// Logger receives the pipeline's logs. Default: discard.
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Scope is which pods this exporter instance owns. It is persisted in
	// the store; when it differs from the one the state was written under,
	// the pipeline hands pods over (see handover). Required, as the
	// exporter resolved and validated it (scope.Unscoped for the whole
	// cluster): a scope the store cannot read back would be handed over
	// at every start.
	Scope scope.Scope
}

// Validate reports the first invalid option.
func (o *Options) Validate() error {
	for name, d := range map[string]time.Duration{"retry period": o.RetryPeriod, "sweep interval": o.SweepInterval, "timeout check interval": o.TimeoutCheckInterval} {
		if d < 0 {
			return fmt.Errorf("%s must not be negative, got %s", name, d)
		}
	}
	return nil
}

// Pipeline is the stage between the watch and the store: for each pod it
// reads the remembered state, runs lifecycle's step, and writes the change.
// It owns the retries of failed writes, the sweep of state left by pods that
// no longer exist, and the creation-timeout check. It implements
// informers.Handler.
//
// Its duties live in one file each: handling a pod and its deletion (this
// file), turning an outcome into a store change (change.go), the sweep of
// orphaned state (sweep.go) and the handover between scopes (handover.go),
// the creation-timeout check (timeouts.go), the inputs its events bring,
// held until written (held.go), and the retries of failed writes
// (retry.go).
type Pipeline struct {
	store    Store
	opts     Options
	log      *slog.Logger
	synced   atomic.Bool
	syncedCh chan struct{}
	// routing builds each store change.
	routing routing

	// mu serializes every read-modify-write of a pod's record, from the
	// watch handlers and the periodic loops alike, and guards every field
	// below. The exported methods and sweep take it; every other
	// unexported method runs with it held (docs/architecture.md, "The
	// pipeline's lock").
	mu sync.Mutex
	// failed holds, by UID, what could not be written for each pod, for
	// RetryFailed. No cache holds pods, so this is the only copy left to
	// retry from.
	failed map[types.UID]retry
	// held are the inputs of pods that their events brought and no write
	// recorded yet, and the containers that a pod's pulls wait for.
	held held
	// live lists the UIDs of the pods that exist, from the watch; nil until
	// Synced.
	live func() map[types.UID]struct{}
	// current reports whether the pod watch is current; nil until Synced.
	// timeoutsHeld: the last check found it not current.
	current      func() bool
	timeoutsHeld bool
	// suspects are the UIDs in the store that the last sweep found no pod
	// for.
	suspects map[types.UID]struct{}
	// suspectedAt is when the last sweep ran: a suspect was gone by then.
	suspectedAt time.Time
	// handover is set when the state was written under another scope, or
	// under an unknown one.
	handover *handover
	// persistScope: Options.Scope is still to be written to the store,
	// once the first sweep has handed over what moved out.
	persistScope bool
}

// New returns a Pipeline writing to st (a *store.Store); Start runs its
// periodic work.
func New(st Store, opts Options) (*Pipeline, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.RetryPeriod == 0 {
		opts.RetryPeriod = DefaultRetryPeriod
	}
	if opts.SweepInterval == 0 {
		opts.SweepInterval = DefaultSweepInterval
	}
	if opts.TimeoutCheckInterval == 0 {
		opts.TimeoutCheckInterval = DefaultTimeoutCheckInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	p := &Pipeline{store: st, opts: opts, log: opts.Logger, syncedCh: make(chan struct{}),
		routing: newRouting(opts.HistogramLabels, opts.PodLabels),
		failed:  map[types.UID]retry{}, suspects: map[types.UID]struct{}{}, held: newHeld()}
	p.handover, p.persistScope = newHandover(st, &opts.Scope, opts.Now(), p.log)
	return p, nil
}

// Ready reports whether every pod of the watch's first list has been
// handled and state left by pods deleted meanwhile has been dropped.
func (p *Pipeline) Ready() bool { return p.synced.Load() }

// SyncedCh is closed once every pod of the first list has been handled.
func (p *Pipeline) SyncedCh() <-chan struct{} { return p.syncedCh }

// Start runs, once the watch has synced, the retries of failed writes, the
// sweep and the creation-timeout check, until ctx ends.
func (p *Pipeline) Start(ctx context.Context) error {
	select {
	case <-ctx.Done():
		return nil
	case <-p.syncedCh:
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { wait.UntilWithContext(ctx, func(context.Context) { p.RetryFailed() }, p.opts.RetryPeriod) })
	wg.Go(func() {
		// The first sweep ran in Synced.
		t := time.NewTicker(p.opts.SweepInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				p.Sweep()
			}
		}
	})
	wait.UntilWithContext(ctx, func(context.Context) { p.CheckTimeouts() }, p.opts.TimeoutCheckInterval)
	return nil
}

// Synced implements informers.Handler: every pod of the first list has been
// handled, so a record without a live pod now is a pod deleted while podslo
// was down.
func (p *Pipeline) Synced(live func() map[types.UID]struct{}, current func() bool) {
	p.mu.Lock()
	p.live, p.current = live, current
	p.mu.Unlock()
	gone := p.sweep(true)
	p.log.Info("Pipeline synced", "podsDeletedWhileDown", gone)
	if p.synced.CompareAndSwap(false, true) {
		close(p.syncedCh)
	}
}

// Pod implements informers.Handler.
func (p *Pipeline) Pod(pod *lifecycle.Pod) {
	if err := p.Handle(pod); err != nil {
		// The in-memory state did not move, so handling the pod again
		// (its next update, or RetryFailed) makes the same change: nothing
		// is lost.
		p.log.Error("Recording pod failed, will retry", "pod", klogRef(pod), "err", err)
	}
}

// Deleted implements informers.Handler: the pod is gone. final is its last
// object, nil when it was deleted while the watch was down.
func (p *Pipeline) Deleted(uid types.UID, ref string, final *lifecycle.Pod) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var first *lifecycle.Pod
	if r, ok := p.failed[uid]; ok && !r.deleted {
		if final == nil {
			// The last update never made it to the store: it is all there
			// is of the pod's end.
			final, first = r.pod, r.first
		} else {
			keepFirstDeletion(r.pod, final)
			first = olderFirst(r)
		}
	}
	if err := p.replayFirst(first); err != nil {
		p.failed[uid] = retry{pod: final, first: first, deleted: true, ref: ref}
		p.log.Error("Recording deleted pod failed, will retry", "pod", ref, "err", err)
		return
	}
	if err := p.forgetLocked(uid, final); err != nil {
		p.failed[uid] = retry{pod: final, deleted: true, ref: ref}
		p.log.Error("Recording deleted pod failed, will retry", "pod", ref, "err", err)
		return
	}
	delete(p.failed, uid)
}

// forgetLocked records a pod's deletion and drops its state in one
// transaction. final is its last object, when known: it may carry a
// transition not seen yet, and what it never showed counts as vanished.
func (p *Pipeline) forgetLocked(uid types.UID, final *lifecycle.Pod) error {
	prev, known := p.store.Get(uid)
	if !known {
		if _, waiting := p.failed[uid]; !waiting {
			// Already forgotten (a sweep, or the deletion seen twice): a
			// late event must not bring it back.
			return nil
		}
		// Its first write failed: its whole story is in final.
	}
	next, out := prev, lifecycle.Outcome{}
	var meta *store.PodMeta
	if final != nil {
		in, _ := p.held.of(uid)
		next, out = lifecycle.Step(p.opts.Now(), final, in, prev, &p.opts.Lifecycle)
		meta = p.routing.meta(final)
	}
	next, gone := lifecycle.Vanish(next)
	out.Skips = append(out.Skips, gone.Skips...)
	change := p.routing.change(p.opts.Now(), uid, next, out, meta, final)
	change.Forget = true
	if err := p.write(change, out, meta, final); err != nil {
		return err
	}
	p.held.forget(uid)
	return nil
}

// Handle runs one pod through lifecycle into the store. It is exported for
// benchmarks and tests that drive the pipeline without an API server.
func (p *Pipeline) Handle(pod *lifecycle.Pod) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	var first *lifecycle.Pod
	if r, ok := p.failed[pod.UID]; ok {
		keepFirstDeletion(r.pod, pod)
		if !r.deleted {
			first = olderFirst(r)
		}
	}
	if err := p.replayFirst(first); err != nil {
		p.failed[pod.UID] = retry{pod: pod, first: first, ref: klogRef(pod)}
		return err
	}
	err := p.handleLocked(pod)
	if err != nil {
		p.failed[pod.UID] = retry{pod: pod, ref: klogRef(pod)}
	} else {
		delete(p.failed, pod.UID)
	}
	return err
}

// olderFirst is what of r a newer object of the pod comes after: its first
// object not written, or else its newest.
func olderFirst(r retry) *lifecycle.Pod {
	if r.first != nil {
		return r.first
	}
	return r.pod
}

func (p *Pipeline) handleLocked(pod *lifecycle.Pod) error {
	prev, known := p.store.Get(pod.UID)
	in, _ := p.held.of(pod.UID)
	now := p.opts.Now()
	var next lifecycle.State
	var out lifecycle.Outcome
	if !known && p.handover.adopts(pod) {
		next, out = p.handover.adopt(now, pod, in, prev, &p.opts.Lifecycle)
		p.log.Debug("Pod moved into this exporter's scope: what happened before the change is its previous owner's", "pod", klogRef(pod), "uid", pod.UID)
	} else {
		next, out = lifecycle.Step(now, pod, in, prev, &p.opts.Lifecycle)
	}
	meta := p.routing.meta(pod)
	if err := p.write(p.routing.change(now, pod.UID, next, out, meta, pod), out, meta, pod); err != nil {
		return err
	}
	p.held.written(pod.UID, in, next, int(pod.Containers)+int(pod.InitContainers), now)
	return nil
}

// write applies c, the change that out makes, and once it is recorded logs
// what an operator looks for in out. meta and pod may be nil.
func (p *Pipeline) write(c store.Change, out lifecycle.Outcome, meta *store.PodMeta, pod *lifecycle.Pod) error {
	if err := p.store.Apply(c); err != nil {
		return err
	}
	p.logTimeouts(c.UID, out, meta)
	p.logSkips(c.UID, out, pod)
	p.logRecorded(c)
	return nil
}

// logRecorded logs at debug level, once recorded, every sample c added to
// an aggregated family: the one place that ties a histogram's observation
// to its pod, which the chaos run reads when a family disagrees with its
// ground truth.
func (p *Pipeline) logRecorded(c store.Change) {
	if len(c.Observe)+len(c.Add) == 0 || !p.log.Enabled(context.Background(), slog.LevelDebug) {
		return
	}
	for _, s := range slices.Concat(c.Observe, c.Add) {
		p.log.Debug("Recorded", "uid", c.UID, "family", p.routing.names[s.Family], "labels", strings.Join(s.Labels, ","), "value", s.Value)
	}
}

// logTimeouts logs, once they are recorded, the pod's sandbox creation
// timeout or its exclusion: each is counted once per pod and names no pod
// in its series, so the log is where an operator finds the stuck pod (and
// the chaos run checks the count pod by pod). meta may be nil.
func (p *Pipeline) logTimeouts(uid types.UID, out lifecycle.Outcome, meta *store.PodMeta) {
	for _, o := range out.Observations {
		var msg string
		switch o.Kind {
		case lifecycle.SandboxTimedOut:
			msg = "Sandbox creation timed out"
		case lifecycle.SandboxExcluded:
			msg = "Sandbox creation left out of the SLI: user error"
		default:
			continue
		}
		ref := ""
		if meta != nil {
			ref = meta.Namespace + "/" + meta.Name
		}
		p.log.Info(msg, "pod", ref, "uid", uid)
	}
}

// logSkips logs each skipped observation; pod may be nil.
func (p *Pipeline) logSkips(uid types.UID, out lifecycle.Outcome, pod *lifecycle.Pod) {
	for _, s := range out.Skips {
		level := slog.LevelInfo
		if s.Reason == lifecycle.TooOld || s.Reason == lifecycle.TerminatedBeforeDelete {
			// Expected for every old pod when podslo is first installed, and
			// for every completed pod that is cleaned up.
			level = slog.LevelDebug
		}
		if pod != nil {
			p.log.Log(context.Background(), level, "Observation skipped", "pod", klogRef(pod), "uid", uid, "sli", s.SLI.String(), "reason", s.Reason.String())
		} else {
			p.log.Log(context.Background(), level, "Observation skipped", "uid", uid, "sli", s.SLI.String(), "reason", s.Reason.String())
		}
	}
}

func klogRef(p *lifecycle.Pod) string { return p.Namespace + "/" + p.Name }
