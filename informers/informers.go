package informers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/store"
)

var everything = labels.Everything()

// DefaultRetryPeriod is the default for Options.RetryPeriod.
const DefaultRetryPeriod = 30 * time.Second

// DefaultSweepInterval is the default for Options.SweepInterval.
const DefaultSweepInterval = 5 * time.Minute

// pendingUserErrorTTL is how long a FailedMount event for a pod not (or no
// longer) known waits for that pod: long enough for a lagging pod watch,
// short enough that events of deleted pods do not pile up.
const pendingUserErrorTTL = 10 * time.Minute

// Source is where an extra histogram dimension is read from.
type Source string

const (
	FromLabel      Source = "label"
	FromAnnotation Source = "annotation"
)

// HistogramLabel is one extra dimension of the aggregated series, read from a
// pod label or annotation (--histogram-label NAME=label:KEY).
type HistogramLabel struct {
	Name   string
	Source Source
	Key    string
}

var labelNameRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// Options configures the Watcher.
type Options struct {
	// Lifecycle tunes the SLI logic.
	Lifecycle lifecycle.Config
	// PodLabels are the pod label keys copied onto per-pod series. Default
	// none.
	PodLabels []string
	// HistogramLabels are extra dimensions of aggregated series. Default
	// none.
	HistogramLabels []HistogramLabel
	// RetryPeriod is how often a pod whose state could not be written (a
	// full disk, say) is handled again, if no update of it came first.
	// Default DefaultRetryPeriod.
	RetryPeriod time.Duration
	// UserErrorEventRegex matches the FailedMount event messages that mark
	// a pod as blocked by its own spec. Default DefaultUserErrorEventRegex.
	UserErrorEventRegex string
	// TimeoutCheckInterval is how often pods waiting for their first
	// sandbox are checked against the creation timeout. Default 5s.
	TimeoutCheckInterval time.Duration
	// SweepInterval is how often the state of pods that no longer exist is
	// dropped. A record is dropped when two sweeps in a row find no pod
	// with its UID. Default DefaultSweepInterval.
	SweepInterval time.Duration
	// OnEvent, if set, is called for every event handled.
	OnEvent func(resource, event string)
	// Logger receives the watcher's logs. Default: discard.
	Logger *slog.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Validate reports the first invalid option.
func (o *Options) Validate() error {
	seen := map[string]bool{"runtime_class": true, "storage_class": true}
	for _, h := range o.HistogramLabels {
		if !labelNameRE.MatchString(h.Name) || len(h.Name) >= 2 && h.Name[:2] == "__" {
			return fmt.Errorf("histogram label name %q is not a valid Prometheus label name", h.Name)
		}
		if seen[h.Name] {
			return fmt.Errorf("histogram label name %q is used twice or clashes with a built-in label", h.Name)
		}
		seen[h.Name] = true
		if h.Source != FromLabel && h.Source != FromAnnotation {
			return fmt.Errorf("histogram label %q: source must be %q or %q, got %q", h.Name, FromLabel, FromAnnotation, h.Source)
		}
		if h.Key == "" {
			return fmt.Errorf("histogram label %q: key must not be empty", h.Name)
		}
	}
	if o.RetryPeriod < 0 {
		return fmt.Errorf("retry period must not be negative, got %s", o.RetryPeriod)
	}
	if o.SweepInterval < 0 {
		return fmt.Errorf("sweep interval must not be negative, got %s", o.SweepInterval)
	}
	if _, err := compileUserErrorRegex(o.UserErrorEventRegex); err != nil {
		return err
	}
	return nil
}

// Watcher runs the informers and feeds every pod through lifecycle into the
// store.
type Watcher struct {
	client    kubernetes.Interface
	store     *store.Store
	opts      Options
	log       *slog.Logger
	trim      *trimmer
	classes   classResolver
	userError *regexp.Regexp
	synced    atomic.Bool
	// families are the store's family IDs, with the configured histogram
	// label names, by lifecycle family.
	families map[string]string

	// mu serializes every read-modify-write of a pod's state: the pod and
	// event handlers and the timeout check run on their own goroutines.
	mu sync.Mutex
	// failed holds, by UID, what could not be written for each pod, for
	// RetryFailed; guarded by mu. No cache holds pods, so this is the only
	// copy left to retry from.
	failed map[types.UID]retry
	// keys are the pods that exist, from the pod watch; nil until Start.
	keys *podKeys
	// suspects are the UIDs in the store that the last sweep found no pod
	// for; guarded by mu.
	suspects map[types.UID]struct{}
	// pendingUserErrors holds FailedMount events for UIDs the store has no
	// record of, until the pod comes or the entry expires; guarded by mu.
	// Writing them to the store would resurrect a deleted pod.
	pendingUserErrors map[types.UID]time.Time
	// apply is store.Apply; tests make it fail.
	apply func(store.Change) error
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

// New returns a Watcher; Start runs it.
func New(client kubernetes.Interface, st *store.Store, opts Options) (*Watcher, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.RetryPeriod == 0 {
		opts.RetryPeriod = DefaultRetryPeriod
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.OnEvent == nil {
		opts.OnEvent = func(string, string) {}
	}
	t := &trimmer{podLabels: map[string]bool{}, podAnnotations: map[string]bool{}, conditionTypes: map[corev1.PodConditionType]corev1.PodConditionType{corev1.PodScheduled: corev1.PodScheduled}}
	for _, k := range opts.PodLabels {
		t.podLabels[k] = true
	}
	names := make([]string, 0, len(opts.HistogramLabels))
	for _, h := range opts.HistogramLabels {
		if h.Source == FromLabel {
			t.podLabels[h.Key] = true
		} else {
			t.podAnnotations[h.Key] = true
		}
		names = append(names, h.Name)
	}
	condTypes := append([]corev1.PodConditionType{corev1.PodReady, corev1.PodInitialized}, opts.Lifecycle.SandboxConditionTypes...)
	if len(opts.Lifecycle.SandboxConditionTypes) == 0 {
		condTypes = append(condTypes, lifecycle.DefaultSandboxConditionTypes...)
	}
	stable := opts.Lifecycle.StableConditionType
	if stable == "" {
		stable = lifecycle.DefaultStableConditionType
	}
	condTypes = append(condTypes, stable)
	for _, ct := range condTypes {
		t.conditionTypes[ct] = ct
	}
	if opts.TimeoutCheckInterval <= 0 {
		opts.TimeoutCheckInterval = 5 * time.Second
	}
	if opts.SweepInterval == 0 {
		opts.SweepInterval = DefaultSweepInterval
	}
	re, _ := compileUserErrorRegex(opts.UserErrorEventRegex) // validated above
	families := map[string]string{}
	for _, f := range []string{
		lifecycle.FamilySandboxCreation, lifecycle.FamilySandboxRecreations, lifecycle.FamilySandboxCreationTimeouts,
		lifecycle.FamilySandboxCreationsExcl, lifecycle.FamilyTermination, lifecycle.FamilyTerminationsOverGrace,
		lifecycle.FamilyReadiness, lifecycle.FamilyStartupPhase, lifecycle.FamilyStabilization, lifecycle.FamilyStableTransitions,
	} {
		families[f] = lifecycle.FamilyID(f, names)
	}
	w := &Watcher{client: client, store: st, opts: opts, log: opts.Logger, trim: t, userError: re, families: families,
		failed: map[types.UID]retry{}, suspects: map[types.UID]struct{}{}, pendingUserErrors: map[types.UID]time.Time{}}
	if st != nil {
		w.apply = st.Apply
	}
	return w, nil
}

// Synced reports whether every informer has synced, every live pod has been
// handled once, and state left by pods deleted meanwhile has been dropped.
func (w *Watcher) Synced() bool { return w.synced.Load() }

// Start runs the informers until ctx ends.
func (w *Watcher) Start(ctx context.Context) error {
	// No resync for these either: their handlers only count events, and
	// the class resolver reads the listers' current state.
	factory := informers.NewSharedInformerFactoryWithOptions(w.client, 0, informers.WithTransform(w.trim.transform))
	events := informers.NewSharedInformerFactoryWithOptions(w.client, 0,
		informers.WithTransform(w.trim.transform),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = failedMountSelector }))
	pvcs := factory.Core().V1().PersistentVolumeClaims()
	classes := factory.Storage().V1().StorageClasses()
	eventInformer := events.Core().V1().Events().Informer()
	w.classes = classResolver{pvcs: pvcs.Lister(), classes: classes.Lister()}
	for resource, inf := range map[string]cache.SharedIndexInformer{"persistentvolumeclaims": pvcs.Informer(), "storageclasses": classes.Informer()} {
		if _, err := inf.AddEventHandler(w.counter(resource)); err != nil {
			return fmt.Errorf("watch %s: %w", resource, err)
		}
	}
	if _, err := eventInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.opts.OnEvent("events", "add"); w.handleEvent(obj) },
		UpdateFunc: func(_, obj any) { w.opts.OnEvent("events", "update"); w.handleEvent(obj) },
		DeleteFunc: func(any) { w.opts.OnEvent("events", "delete") },
	}); err != nil {
		return fmt.Errorf("watch events: %w", err)
	}

	factory.Start(ctx.Done())
	events.Start(ctx.Done())
	defer factory.Shutdown()
	defer events.Shutdown()
	// PVCs, classes and FailedMount events first, so that the first pass
	// over the pods already resolves every storage class and knows every
	// user error.
	if !cache.WaitForCacheSync(ctx.Done(), pvcs.Informer().HasSynced, classes.Informer().HasSynced, eventInformer.HasSynced) {
		return w.stopped(ctx)
	}
	pods, keys := w.podController()
	w.mu.Lock()
	w.keys = keys
	w.mu.Unlock()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { pods.RunWithContext(ctx) })
	// The controller's HasSynced turns true only once the handler has
	// returned for every pod of the first list: the queue calls it under
	// the lock that HasSynced takes.
	if !cache.WaitForCacheSync(ctx.Done(), pods.HasSynced) {
		return w.stopped(ctx)
	}
	// Every pod of the first list has been handled: a record without a
	// live pod now is a pod deleted while podslo was down.
	gone := w.sweep(true)
	w.log.Info("Informers synced", "pods", keys.len(), "podsDeletedWhileDown", gone)
	w.synced.Store(true)

	wg.Go(func() { wait.UntilWithContext(ctx, func(context.Context) { w.RetryFailed() }, w.opts.RetryPeriod) })
	wg.Go(func() {
		// The first sweep ran above.
		t := time.NewTicker(w.opts.SweepInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				w.Sweep()
			}
		}
	})
	wait.UntilWithContext(ctx, func(context.Context) { w.CheckTimeouts() }, w.opts.TimeoutCheckInterval)
	return nil
}

// Sweep drops the state of pods that no longer exist: a record whose UID
// no pod has had in two sweeps in a row. Deletions seen by the watch forget
// their pods at once; this catches what a watch gap or a failed write left
// behind. It runs every Options.SweepInterval.
func (w *Watcher) Sweep() int { return w.sweep(false) }

// sweep forgets records without a live pod. At start-up (now), once the
// first list has been handled, one look is enough; later, a record must be
// seen orphaned twice, because a deletion in flight (the key already gone,
// deletePod waiting for the lock) must be measured by deletePod, not
// vanished here.
func (w *Watcher) sweep(now bool) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.keys == nil {
		return 0
	}
	live := w.keys.live()
	orphans := map[types.UID]struct{}{}
	w.store.UIDs(func(uid types.UID) {
		if _, ok := live[uid]; ok {
			return
		}
		if _, ok := w.failed[uid]; ok {
			// RetryFailed owns it.
			return
		}
		orphans[uid] = struct{}{}
	})
	forgotten := 0
	for uid := range orphans {
		if _, seen := w.suspects[uid]; !now && !seen {
			continue
		}
		prev, _ := w.store.Get(uid)
		next, out := lifecycle.Vanish(prev)
		if prev == (lifecycle.State{UserError: true}) {
			// Only a FailedMount event ever named this pod: there was
			// nothing to measure.
			out = lifecycle.Outcome{}
		}
		change := w.change(uid, next, out, nil, nil)
		change.Forget = true
		if err := w.apply(change); err != nil {
			// Not lost: the record stays, and the next sweep tries again.
			w.log.Error("Forgetting a pod that no longer exists failed", "uid", uid, "err", err)
			continue
		}
		delete(orphans, uid)
		forgotten++
	}
	w.suspects = orphans
	cutoff := w.opts.Now().Add(-pendingUserErrorTTL)
	for uid, at := range w.pendingUserErrors {
		if at.Before(cutoff) {
			delete(w.pendingUserErrors, uid)
		}
	}
	return forgotten
}

// CheckTimeouts counts the pods whose sandbox is still not ready past the
// creation timeout. It runs on a timer because a stuck pod sends no updates.
func (w *Watcher) CheckTimeouts() {
	w.mu.Lock()
	defer w.mu.Unlock()
	type pending struct {
		uid   types.UID
		state lifecycle.State
		meta  *store.PodMeta
	}
	var due []pending
	now := w.opts.Now()
	w.store.Pods(func(uid types.UID, st *lifecycle.State, m *store.PodMeta) {
		if st.Pending() && !st.TimedOut {
			due = append(due, pending{uid, *st, m})
		}
	})
	for _, p := range due {
		next, out := lifecycle.Timeout(now, p.state, &w.opts.Lifecycle)
		if out.Empty() {
			continue
		}
		if err := w.apply(w.change(p.uid, next, out, p.meta, nil)); err != nil {
			w.log.Error("Recording a sandbox creation timeout failed, will retry", "uid", p.uid, "err", err)
		}
	}
}

func (w *Watcher) stopped(ctx context.Context) error {
	if err := ctx.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("wait for informer caches: %w", err)
	}
	return nil
}

func (w *Watcher) counter(resource string) cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.opts.OnEvent(resource, "add") },
		UpdateFunc: func(any, any) { w.opts.OnEvent(resource, "update") },
		DeleteFunc: func(any) { w.opts.OnEvent(resource, "delete") },
	}
}

func (w *Watcher) handlePod(pod *lifecycle.Pod) {
	if err := w.Handle(pod); err != nil {
		// The in-memory state did not move, so handling the pod again
		// (its next update, or RetryFailed) makes the same change: nothing
		// is lost.
		w.log.Error("Recording pod failed, will retry", "pod", klogRef(pod), "err", err)
	}
}

// RetryFailed handles again every pod whose last state write failed and
// that has had no update since. It runs every Options.RetryPeriod.
func (w *Watcher) RetryFailed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.failed) == 0 {
		return
	}
	var ok, failed int
	var last error
	for uid, r := range w.failed {
		var err error
		if r.deleted {
			err = w.forgetLocked(uid, r.pod)
		} else {
			err = w.handleLocked(r.pod)
		}
		if err != nil {
			failed, last = failed+1, err
			continue
		}
		delete(w.failed, uid)
		ok++
	}
	// One line per round, not per pod: on a full disk every pod fails.
	if failed > 0 {
		w.log.Error("Retrying failed pod writes", "recorded", ok, "stillFailing", failed, "err", last)
	} else {
		w.log.Info("Retrying failed pod writes", "recorded", ok, "stillFailing", 0)
	}
}

func (w *Watcher) deletePod(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var (
		uid   types.UID
		final *lifecycle.Pod
		ref   string
	)
	switch pod := obj.(type) {
	case *lifecycle.Pod:
		uid, final, ref = pod.UID, pod, klogRef(pod)
	case *podRef:
		// Deleted while the watch was down (a relist no longer has it, or
		// has its name with another UID): its final object is gone.
		uid, ref = pod.UID, pod.Namespace+"/"+pod.Name
	default:
		w.log.Error("Ignoring unexpected object in the pod watch", "type", fmt.Sprintf("%T", obj))
		return
	}
	if r, ok := w.failed[uid]; ok && !r.deleted && final == nil {
		// The last update never made it to the store: it is all there is
		// of the pod's end.
		final = r.pod
	}
	if err := w.forgetLocked(uid, final); err != nil {
		w.failed[uid] = retry{pod: final, deleted: true, ref: ref}
		w.log.Error("Recording deleted pod failed, will retry", "pod", ref, "err", err)
		return
	}
	delete(w.failed, uid)
}

// forgetLocked records a pod's deletion and drops its state in one
// transaction. final is its last object, when known: it may carry a
// transition not seen yet, and what it never showed counts as vanished.
func (w *Watcher) forgetLocked(uid types.UID, final *lifecycle.Pod) error {
	prev, known := w.store.Get(uid)
	if !known {
		if _, waiting := w.failed[uid]; !waiting {
			// Already forgotten (a sweep, or the deletion seen twice): a
			// late event must not bring it back.
			return nil
		}
		// Its first write failed: its whole story is in final.
	}
	next, out := prev, lifecycle.Outcome{}
	var meta *store.PodMeta
	if final != nil {
		next, out = lifecycle.Step(w.opts.Now(), final, prev, &w.opts.Lifecycle)
		meta = w.meta(final)
	}
	next, gone := lifecycle.Vanish(next)
	out.Skips = append(out.Skips, gone.Skips...)
	change := w.change(uid, next, out, meta, final)
	change.Forget = true
	return w.apply(change)
}

// Handle runs one pod through lifecycle into the store. It is exported for
// benchmarks and tests that drive the pipeline without an API server.
func (w *Watcher) Handle(pod *lifecycle.Pod) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.handleLocked(pod)
	if err != nil {
		w.failed[pod.UID] = retry{pod: pod, ref: klogRef(pod)}
	} else {
		delete(w.failed, pod.UID)
	}
	return err
}

func (w *Watcher) handleLocked(pod *lifecycle.Pod) error {
	prev, known := w.store.Get(pod.UID)
	_, userError := w.pendingUserErrors[pod.UID]
	if !known && userError {
		prev = lifecycle.MarkUserError(prev)
	}
	next, out := lifecycle.Step(w.opts.Now(), pod, prev, &w.opts.Lifecycle)
	if err := w.apply(w.change(pod.UID, next, out, w.meta(pod), pod)); err != nil {
		return err
	}
	if userError {
		delete(w.pendingUserErrors, pod.UID)
	}
	return nil
}

// change turns a lifecycle outcome into the store's samples: the series of
// each observation, labelled with the pod's classes and histogram labels.
// pod, when known, names the exemplars.
func (w *Watcher) change(uid types.UID, next lifecycle.State, out lifecycle.Outcome, meta *store.PodMeta, pod *lifecycle.Pod) store.Change {
	change := store.Change{UID: uid, State: next, Meta: meta}
	if out.Empty() {
		return change
	}
	if meta == nil {
		// A pod podslo never saw live: its classes are unknown.
		meta = &store.PodMeta{RuntimeClass: ClassUnknown, StorageClass: ClassUnknown, HistogramLabels: make([]string, len(w.opts.HistogramLabels))}
	}
	now := w.opts.Now()
	// dims are the label values of the aggregated series, extra is one more
	// label before the histogram labels (phase, reason).
	dims := func(extra ...string) []string {
		d := make([]string, 0, 3+len(meta.HistogramLabels))
		d = append(d, meta.RuntimeClass, meta.StorageClass)
		d = append(d, extra...)
		return append(d, meta.HistogramLabels...)
	}
	exemplar := func(v float64) *store.Exemplar {
		if pod == nil {
			return nil
		}
		return &store.Exemplar{Namespace: pod.Namespace, Pod: pod.Name, Value: v, Time: now}
	}
	observe := func(family string, labels []string, v float64) {
		change.Observe = append(change.Observe, store.Sample{Family: w.families[family], Labels: labels, Value: v, Exemplar: exemplar(v)})
	}
	count := func(family string, labels []string) {
		change.Add = append(change.Add, store.Sample{Family: w.families[family], Labels: labels, Value: 1})
	}
	for _, o := range out.Observations {
		switch o.Kind {
		case lifecycle.SandboxCreated:
			observe(lifecycle.FamilySandboxCreation, dims(), o.Seconds)
		case lifecycle.SandboxRecreated:
			count(lifecycle.FamilySandboxRecreations, dims())
		case lifecycle.SandboxTimedOut:
			count(lifecycle.FamilySandboxCreationTimeouts, dims())
		case lifecycle.SandboxExcluded:
			count(lifecycle.FamilySandboxCreationsExcl, dims("user_error"))
		case lifecycle.Terminated:
			observe(lifecycle.FamilyTermination, dims(), o.Seconds)
			if o.OverGrace {
				count(lifecycle.FamilyTerminationsOverGrace, dims())
			}
		case lifecycle.BecameReady:
			observe(lifecycle.FamilyReadiness, dims(), o.Seconds)
		case lifecycle.PhaseDone:
			observe(lifecycle.FamilyStartupPhase, dims(o.Phase.String()), o.Seconds)
		case lifecycle.Stabilized:
			observe(lifecycle.FamilyStabilization, dims(), o.Seconds)
		case lifecycle.StabilityLost:
			count(lifecycle.FamilyStableTransitions, dims("false"))
		}
	}
	for _, s := range out.Skips {
		change.Add = append(change.Add, store.Sample{Family: lifecycle.FamilySkipped, Labels: []string{s.SLI.String(), s.Reason.String()}, Value: 1})
		level := slog.LevelInfo
		if s.Reason == lifecycle.TooOld || s.Reason == lifecycle.TerminatedBeforeDelete {
			// Expected for every old pod when podslo is first installed, and
			// for every completed pod that is cleaned up.
			level = slog.LevelDebug
		}
		if pod != nil {
			w.log.Log(context.Background(), level, "Observation skipped", "pod", klogRef(pod), "uid", uid, "sli", s.SLI.String(), "reason", s.Reason.String())
		} else {
			w.log.Log(context.Background(), level, "Observation skipped", "uid", uid, "sli", s.SLI.String(), "reason", s.Reason.String())
		}
	}
	return change
}

func (w *Watcher) meta(pod *lifecycle.Pod) *store.PodMeta {
	m := &store.PodMeta{
		Namespace:    pod.Namespace,
		Name:         pod.Name,
		Node:         pod.NodeName,
		RuntimeClass: RuntimeClass(pod),
		StorageClass: w.classes.StorageClass(pod),
	}
	if len(w.opts.PodLabels) > 0 {
		m.PodLabels = make([]string, len(w.opts.PodLabels))
		for i, k := range w.opts.PodLabels {
			m.PodLabels[i] = pod.Labels[k]
		}
	}
	if len(w.opts.HistogramLabels) > 0 {
		m.HistogramLabels = make([]string, len(w.opts.HistogramLabels))
		for i, h := range w.opts.HistogramLabels {
			if h.Source == FromLabel {
				m.HistogramLabels[i] = pod.Labels[h.Key]
			} else {
				m.HistogramLabels[i] = pod.Annotations[h.Key]
			}
		}
	}
	return m
}

func klogRef(p *lifecycle.Pod) string { return p.Namespace + "/" + p.Name }
