package informers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/store"
)

var everything = labels.Everything()

// DefaultResyncPeriod is the default for Options.ResyncPeriod.
const DefaultResyncPeriod = 10 * time.Minute

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
	// ResyncPeriod is how often every pod is handled again. It is what
	// retries a store write that failed (a full disk, say). Default
	// DefaultResyncPeriod.
	ResyncPeriod time.Duration
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
	if o.ResyncPeriod < 0 {
		return fmt.Errorf("resync period must not be negative, got %s", o.ResyncPeriod)
	}
	return nil
}

// Watcher runs the informers and feeds every pod through lifecycle into the
// store.
type Watcher struct {
	client  kubernetes.Interface
	store   *store.Store
	opts    Options
	log     *slog.Logger
	trim    *trimmer
	classes classResolver
	synced  atomic.Bool

	creationFamily, recreationsFamily string
}

// New returns a Watcher; Start runs it.
func New(client kubernetes.Interface, st *store.Store, opts Options) (*Watcher, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.ResyncPeriod == 0 {
		opts.ResyncPeriod = DefaultResyncPeriod
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
	types := opts.Lifecycle.SandboxConditionTypes
	if len(types) == 0 {
		types = lifecycle.DefaultSandboxConditionTypes
	}
	for _, ct := range types {
		t.conditionTypes[ct] = ct
	}
	return &Watcher{
		client: client, store: st, opts: opts, log: opts.Logger, trim: t,
		creationFamily:    lifecycle.FamilyID(lifecycle.FamilySandboxCreation, names),
		recreationsFamily: lifecycle.FamilyID(lifecycle.FamilySandboxRecreations, names),
	}, nil
}

// Synced reports whether every informer has synced, every live pod has been
// handled once, and state left by pods deleted meanwhile has been dropped.
func (w *Watcher) Synced() bool { return w.synced.Load() }

// Start runs the informers until ctx ends.
func (w *Watcher) Start(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(w.client, w.opts.ResyncPeriod, informers.WithTransform(w.trim.transform))
	pods := factory.Core().V1().Pods()
	pvcs := factory.Core().V1().PersistentVolumeClaims()
	classes := factory.Storage().V1().StorageClasses()
	w.classes = classResolver{pvcs: pvcs.Lister(), classes: classes.Lister()}
	for resource, inf := range map[string]cache.SharedIndexInformer{"persistentvolumeclaims": pvcs.Informer(), "storageclasses": classes.Informer()} {
		if _, err := inf.AddEventHandler(w.counter(resource)); err != nil {
			return fmt.Errorf("watch %s: %w", resource, err)
		}
	}
	podInformer := pods.Informer()

	factory.Start(ctx.Done())
	defer factory.Shutdown()
	// PVCs and classes first, so that the first pass over the pods already
	// resolves every storage class.
	if !cache.WaitForCacheSync(ctx.Done(), pvcs.Informer().HasSynced, classes.Informer().HasSynced, podInformer.HasSynced) {
		return w.stopped(ctx)
	}
	reg, err := podInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.opts.OnEvent("pods", "add"); w.handlePod(obj) },
		UpdateFunc: func(_, obj any) { w.opts.OnEvent("pods", "update"); w.handlePod(obj) },
		DeleteFunc: func(obj any) { w.opts.OnEvent("pods", "delete"); w.deletePod(obj) },
	})
	if err != nil {
		return fmt.Errorf("watch pods: %w", err)
	}
	if !cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return w.stopped(ctx)
	}
	n, err := w.store.DropUnseen()
	if err != nil {
		// Not fatal: stale records cost disk, not correctness.
		w.log.Error("Dropping state of pods deleted while podslo was down failed", "err", err)
	}
	w.log.Info("Informers synced", "pods", len(podInformer.GetStore().ListKeys()), "droppedStalePods", n)
	w.synced.Store(true)
	<-ctx.Done()
	return nil
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

func (w *Watcher) handlePod(obj any) {
	pod, ok := obj.(*lifecycle.Pod)
	if !ok {
		w.log.Error("Ignoring unexpected object in the pod informer", "type", fmt.Sprintf("%T", obj))
		return
	}
	if err := w.Handle(pod); err != nil {
		// The in-memory state did not move, so the next update or resync
		// of this pod makes the same change again: nothing is lost.
		w.log.Error("Recording pod failed, will retry on its next update", "pod", klogRef(pod), "err", err)
	}
}

func (w *Watcher) deletePod(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*lifecycle.Pod)
	if !ok {
		w.log.Error("Ignoring unexpected object in the pod informer", "type", fmt.Sprintf("%T", obj))
		return
	}
	// The last state may carry a transition not seen yet.
	if err := w.Handle(pod); err != nil {
		w.log.Error("Recording deleted pod failed", "pod", klogRef(pod), "err", err)
	}
	if err := w.store.Delete(pod.UID); err != nil {
		w.log.Error("Forgetting deleted pod failed", "pod", klogRef(pod), "err", err)
	}
}

// Handle runs one pod through lifecycle into the store. It is exported for
// benchmarks and tests that drive the pipeline without an API server.
func (w *Watcher) Handle(pod *lifecycle.Pod) error {
	now := w.opts.Now()
	prev, _ := w.store.Get(pod.UID)
	next, out := lifecycle.Step(now, pod, prev, &w.opts.Lifecycle)
	meta := w.meta(pod)
	change := store.Change{UID: pod.UID, State: next, Meta: meta}
	if !out.Empty() {
		dims := make([]string, 0, 2+len(meta.HistogramLabels))
		dims = append(dims, meta.RuntimeClass, meta.StorageClass)
		dims = append(dims, meta.HistogramLabels...)
		for _, o := range out.Observations {
			switch o.Kind {
			case lifecycle.SandboxCreated:
				change.Observe = append(change.Observe, store.Sample{
					Family: w.creationFamily, Labels: dims, Value: o.Seconds,
					Exemplar: &store.Exemplar{Namespace: pod.Namespace, Pod: pod.Name, Value: o.Seconds, Time: now},
				})
			case lifecycle.SandboxRecreated:
				change.Add = append(change.Add, store.Sample{Family: w.recreationsFamily, Labels: dims, Value: 1})
			}
		}
		for _, s := range out.Skips {
			change.Add = append(change.Add, store.Sample{Family: lifecycle.FamilySkipped, Labels: []string{s.SLI.String(), s.Reason.String()}, Value: 1})
			level := slog.LevelInfo
			if s.Reason == lifecycle.TooOld {
				// Expected for every old pod when podslo is first installed.
				level = slog.LevelDebug
			}
			w.log.Log(context.Background(), level, "Observation skipped", "pod", klogRef(pod), "uid", pod.UID, "sli", s.SLI.String(), "reason", s.Reason.String())
		}
	}
	return w.store.Apply(change)
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
