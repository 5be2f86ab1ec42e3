package pipeline

import (
	"context"
	"fmt"
	"log/slog"
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

// pendingUserErrorTTL is how long a FailedMount event for a pod not (or no
// longer) known waits for that pod: long enough for a lagging pod watch,
// short enough that events of deleted pods do not pile up.
const pendingUserErrorTTL = 10 * time.Minute

// ClassNeverSeen is the runtime_class and storage_class value of a pod
// podslo never saw live (deleted while it was down), whose classes it
// cannot know.
const ClassNeverSeen = "unknown"

// Options configures the Pipeline.
type Options struct {
	// Lifecycle tunes the SLI logic.
	Lifecycle lifecycle.Config
	// PodLabels are the pod label keys copied onto per-pod series. Default
	// none.
	PodLabels []string
	// HistogramLabels are extra dimensions of aggregated series. Default
	// none.
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
	// the pipeline hands pods over (see handover). Default
	// scope.Unscoped.
	Scope scope.Scope
}

// Validate reports the first invalid option.
func (o *Options) Validate() error {
	if err := o.HistogramLabels.Validate(); err != nil {
		return err
	}
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
type Pipeline struct {
	store    *store.Store
	opts     Options
	log      *slog.Logger
	synced   atomic.Bool
	syncedCh chan struct{}
	// routes are, by lifecycle.Kind, the aggregates an observation feeds
	// and their store family IDs under the configured histogram labels.
	routes [][]route

	// mu serializes every read-modify-write of a pod's state: the watch
	// handlers and the periodic loops run on their own goroutines.
	mu sync.Mutex
	// failed holds, by UID, what could not be written for each pod, for
	// RetryFailed; guarded by mu. No cache holds pods, so this is the only
	// copy left to retry from.
	failed map[types.UID]retry
	// live lists the UIDs of the pods that exist, from the watch; nil until
	// Synced. Guarded by mu.
	live func() map[types.UID]struct{}
	// current reports whether the pod watch is current; nil until Synced.
	// Guarded by mu, as is timeoutsHeld: the last check found it not
	// current.
	current      func() bool
	timeoutsHeld bool
	// suspects are the UIDs in the store that the last sweep found no pod
	// for; guarded by mu.
	suspects map[types.UID]struct{}
	// pendingUserErrors holds the FailedMount marks that are not in the
	// store yet; guarded by mu. For a UID the store has no record of, the
	// mark waits for the pod until the entry expires: writing it would
	// resurrect a deleted pod. For a known pod whose mark failed to write (a
	// full disk), it stays until a write carries it: the event is not
	// delivered again, and without the mark the pod's timeout would count
	// as the platform's.
	pendingUserErrors map[types.UID]time.Time
	// apply is store.Apply; tests make it fail.
	apply func(store.Change) error
	// handover is set when the state was written under another scope, or
	// under an unknown one; guarded by mu.
	handover *handover
	// persistScope: Options.Scope is still to be written to the store,
	// once the first sweep has handed over what moved out; guarded by mu.
	persistScope bool
}

// retry is a pod write to try again: its newest object, or its deletion.
type retry struct {
	// pod is the newest object; nil for a pod deleted while the watch was
	// down, whose final object is unknown.
	pod *lifecycle.Pod
	// deleted: what failed was forgetting the pod.
	deleted bool
	// ref names the pod for logs.
	ref string
}

// New returns a Pipeline writing to st; Start runs its periodic work.
func New(st *store.Store, opts Options) (*Pipeline, error) {
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
	if opts.Scope.TotalShards == 0 {
		opts.Scope = scope.Unscoped
	}
	p := &Pipeline{store: st, opts: opts, log: opts.Logger, syncedCh: make(chan struct{}),
		routes: routes(opts.HistogramLabels.Names()),
		failed: map[types.UID]retry{}, suspects: map[types.UID]struct{}{}, pendingUserErrors: map[types.UID]time.Time{}}
	if st != nil {
		p.apply = st.Apply
		p.handover, p.persistScope = newHandover(st, &opts.Scope, opts.Now(), p.log)
	}
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
	if r, ok := p.failed[uid]; ok && !r.deleted {
		if final == nil {
			// The last update never made it to the store: it is all there
			// is of the pod's end.
			final = r.pod
		} else {
			keepFirstDeletion(r.pod, final)
		}
	}
	if err := p.forgetLocked(uid, final); err != nil {
		p.failed[uid] = retry{pod: final, deleted: true, ref: ref}
		p.log.Error("Recording deleted pod failed, will retry", "pod", ref, "err", err)
		return
	}
	delete(p.failed, uid)
}

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
	if err := p.apply(store.Change{UID: uid, State: lifecycle.MarkUserError(prev)}); err != nil {
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

// Sweep drops the state of pods that no longer exist: a record whose UID
// no pod has had in two sweeps in a rop. Deletions seen by the watch forget
// their pods at once; this catches what a watch gap or a failed write left
// behind. It runs every Options.SweepInterval.
func (p *Pipeline) Sweep() int { return p.sweep(false) }

// sweep forgets records without a live pod. At start-up (now), once the
// first list has been handled, one look is enough; later, a record must be
// seen orphaned twice, because a deletion in flight (the key already gone,
// deletePod waiting for the lock) must be measured by deletePod, not
// vanished here.
func (p *Pipeline) sweep(now bool) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.live == nil {
		return 0
	}
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
	forgotten, movedOut := 0, 0
	failedOut := map[types.UID]struct{}{}
	for uid := range orphans {
		if p.handover.movedOut(uid) {
			// Another instance owns it now, or may: it is not gone, and
			// counting it vanished would count it twice.
			prev, _ := p.store.Get(uid)
			if err := p.apply(store.Change{UID: uid, State: prev, Forget: true}); err != nil {
				p.log.Error("Forgetting a pod that moved out of this exporter's scope failed", "uid", uid, "err", err)
				failedOut[uid] = struct{}{}
				continue
			}
			delete(orphans, uid)
			if p.handover.firstSweepDone {
				delete(p.handover.inherited, uid)
			}
			movedOut++
			continue
		}
		if _, seen := p.suspects[uid]; !now && !seen {
			continue
		}
		prev, _ := p.store.Get(uid)
		next, out := lifecycle.Vanish(prev)
		if prev == (lifecycle.State{UserError: true}) {
			// Only a FailedMount event ever named this pod: there was
			// nothing to measure.
			out = lifecycle.Outcome{}
		}
		change := p.change(uid, next, out, nil, nil)
		change.Forget = true
		if err := p.apply(change); err != nil {
			// Not lost: the record stays, and the next sweep tries again.
			p.log.Error("Forgetting a pod that no longer exists failed", "uid", uid, "err", err)
			continue
		}
		delete(orphans, uid)
		forgotten++
	}
	p.suspects = orphans
	if movedOut > 0 || len(failedOut) > 0 {
		p.log.Info("Forgot pods that moved out of this exporter's scope, uncounted", "pods", movedOut, "failed", len(failedOut))
	}
	if p.handover != nil && now && !p.handover.firstSweepDone {
		// Every other inherited record has a live pod this scope owns: from
		// now on it is this scope's. Those that failed to go are retried.
		p.handover.inherited = failedOut
		p.handover.firstSweepDone = true
	}
	if p.persistScope && p.handover.pendingOut() == 0 {
		if err := p.store.SetSetting(scopeSetting, p.opts.Scope.Marshal()); err != nil {
			p.log.Error("Recording the exporter's scope failed, will retry", "err", err)
		} else {
			p.persistScope = false
			p.log.Info("Recorded the exporter's scope with its state", "scope", p.opts.Scope.String())
		}
	}
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
	return forgotten
}

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
	if p.current != nil && !p.current() {
		if !p.timeoutsHeld {
			p.log.Warn("Holding sandbox creation timeouts: the pod or event watch is not current")
			p.timeoutsHeld = true
		}
		return
	}
	if p.timeoutsHeld {
		p.log.Info("Pod and event watches current again, checking sandbox creation timeouts")
		p.timeoutsHeld = false
	}
	type pending struct {
		uid   types.UID
		state lifecycle.State
		meta  *store.PodMeta
	}
	var due []pending
	now := p.opts.Now()
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
		due = append(due, pending{uid, *st, m})
	})
	var live map[types.UID]struct{}
	for _, d := range due {
		next, out := lifecycle.Timeout(now, p.withUserError(d.uid, d.state), &p.opts.Lifecycle)
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
		if err := p.apply(p.change(d.uid, next, out, d.meta, nil)); err != nil {
			p.log.Error("Recording a sandbox creation timeout failed, will retry", "uid", d.uid, "err", err)
			continue
		}
		p.logTimeouts(d.uid, out, d.meta)
		delete(p.pendingUserErrors, d.uid)
	}
}

// RetryFailed handles again every pod whose last state write failed and
// that has had no update since, and writes the FailedMount marks of known
// pods that failed to write. It runs every Options.RetryPeriod.
func (p *Pipeline) RetryFailed() {
	p.mu.Lock()
	defer p.mu.Unlock()
	var ok, failed int
	var last error
	for uid := range p.pendingUserErrors {
		prev, known := p.store.Get(uid)
		if _, waiting := p.failed[uid]; !known || waiting {
			// Its pod is not recorded yet, or its retry below carries it.
			continue
		}
		if !prev.UserError {
			if err := p.apply(store.Change{UID: uid, State: lifecycle.MarkUserError(prev)}); err != nil {
				failed, last = failed+1, err
				continue
			}
			ok++
		}
		delete(p.pendingUserErrors, uid)
	}
	for uid, r := range p.failed {
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
		next, out = lifecycle.Step(p.opts.Now(), final, p.withUserError(uid, prev), &p.opts.Lifecycle)
		meta = p.meta(final)
	}
	next, gone := lifecycle.Vanish(next)
	out.Skips = append(out.Skips, gone.Skips...)
	change := p.change(uid, next, out, meta, final)
	change.Forget = true
	if err := p.apply(change); err != nil {
		return err
	}
	p.logTimeouts(uid, out, meta)
	delete(p.pendingUserErrors, uid)
	return nil
}

// Handle runs one pod through lifecycle into the store. It is exported for
// benchmarks and tests that drive the pipeline without an API server.
func (p *Pipeline) Handle(pod *lifecycle.Pod) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if r, ok := p.failed[pod.UID]; ok {
		keepFirstDeletion(r.pod, pod)
	}
	err := p.handleLocked(pod)
	if err != nil {
		p.failed[pod.UID] = retry{pod: pod, ref: klogRef(pod)}
	} else {
		delete(p.failed, pod.UID)
	}
	return err
}

func (p *Pipeline) handleLocked(pod *lifecycle.Pod) error {
	prev, known := p.store.Get(pod.UID)
	_, userError := p.pendingUserErrors[pod.UID]
	prev = p.withUserError(pod.UID, prev)
	now := p.opts.Now()
	var next lifecycle.State
	var out lifecycle.Outcome
	if !known && p.handover.adopts(pod) {
		next, out = p.handover.adopt(now, pod, prev, &p.opts.Lifecycle)
		p.log.Debug("Pod moved into this exporter's scope: what happened before the change is its previous owner's", "pod", klogRef(pod), "uid", pod.UID)
	} else {
		next, out = lifecycle.Step(now, pod, prev, &p.opts.Lifecycle)
	}
	meta := p.meta(pod)
	if err := p.apply(p.change(pod.UID, next, out, meta, pod)); err != nil {
		return err
	}
	p.logTimeouts(pod.UID, out, meta)
	if userError {
		delete(p.pendingUserErrors, pod.UID)
	}
	return nil
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

// change turns a lifecycle outcome into the store's samples: the series of
// each observation, labelled with the pod's classes and histogram labels.
// pod, when known, names the exemplars.
func (p *Pipeline) change(uid types.UID, next lifecycle.State, out lifecycle.Outcome, meta *store.PodMeta, pod *lifecycle.Pod) store.Change {
	change := store.Change{UID: uid, State: next, Meta: meta}
	if out.Empty() {
		return change
	}
	if meta == nil {
		// A pod podslo never saw live: its classes are unknown.
		meta = &store.PodMeta{RuntimeClass: ClassNeverSeen, StorageClass: ClassNeverSeen, HistogramLabels: make([]string, len(p.opts.HistogramLabels))}
	}
	now := p.opts.Now()
	exemplar := func(v float64) *store.Exemplar {
		if pod == nil {
			return nil
		}
		return &store.Exemplar{Namespace: pod.Namespace, Pod: pod.Name, Value: v, Time: now}
	}
	observe := func(family string, labels []string, v float64) {
		change.Observe = append(change.Observe, store.Sample{Family: family, Labels: labels, Value: v, Exemplar: exemplar(v)})
	}
	count := func(family string, labels []string) {
		change.Add = append(change.Add, store.Sample{Family: family, Labels: labels, Value: 1})
	}
	for _, o := range out.Observations {
		if int(o.Kind) >= len(p.routes) {
			continue
		}
		for _, r := range p.routes[o.Kind] {
			a := r.aggregate
			if a.When != nil && !a.When(o) {
				continue
			}
			labels := a.LabelValues(meta.RuntimeClass, meta.StorageClass, o, meta.HistogramLabels)
			if a.Type == sli.Histogram {
				observe(r.id, labels, o.Seconds)
			} else {
				count(r.id, labels)
			}
		}
	}
	for _, s := range out.Skips {
		change.Add = append(change.Add, store.Sample{Family: sli.FamilySkipped, Labels: []string{s.SLI.String(), s.Reason.String()}, Value: 1})
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
	return change
}

func (p *Pipeline) meta(pod *lifecycle.Pod) *store.PodMeta {
	m := &store.PodMeta{
		Namespace:    pod.Namespace,
		Name:         pod.Name,
		Node:         pod.NodeName,
		RuntimeClass: pod.RuntimeClass,
		StorageClass: pod.StorageClass,
	}
	if len(p.opts.PodLabels) > 0 {
		m.PodLabels = make([]string, len(p.opts.PodLabels))
		for i, k := range p.opts.PodLabels {
			m.PodLabels[i] = pod.Labels[k]
		}
	}
	m.HistogramLabels = p.opts.HistogramLabels.Values(pod.Labels, pod.Annotations)
	return m
}

// route is an aggregate an observation feeds, and its store family ID.
type route struct {
	aggregate *sli.AggregateSpec
	id        string
}

// routes indexes sli's aggregates by the kind that feeds them, with their
// store family IDs under the configured histogram label names: change runs
// for every observation, so it looks up a slice, not the table.
func routes(histogramLabels []string) [][]route {
	var out [][]route
	for _, a := range sli.Aggregates() {
		for int(a.Kind) >= len(out) {
			out = append(out, nil)
		}
		out[a.Kind] = append(out[a.Kind], route{aggregate: a, id: a.ID(histogramLabels)})
	}
	return out
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

func klogRef(p *lifecycle.Pod) string { return p.Namespace + "/" + p.Name }
