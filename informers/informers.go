package informers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/podslo/podslo/lifecycle"
)

// Handler receives what the watches see, in order per pod. It is the next
// stage of the data flow (the pipeline); the watch itself knows nothing of
// SLIs or of the store.
type Handler interface {
	// Pod is an added or updated pod: its newest object, trimmed, with its
	// classes resolved.
	Pod(pod *lifecycle.Pod)
	// Deleted is a pod that no longer exists. final is its last object,
	// nil when it was deleted while the watch was down; ref names it for
	// logs.
	Deleted(uid types.UID, ref string, final *lifecycle.Pod)
	// UserError is a FailedMount event that blames the pod's own spec (a
	// missing Secret or ConfigMap).
	UserError(uid types.UID, ref string)
	// Synced is called once every pod of the first list has been handed to
	// Pod. live returns the UIDs of the pods that exist at the time of the
	// call; current whether the pod watch is open and every pod of its
	// newest list handled, i.e. whether the absence of an update can be
	// trusted. Both stay valid for as long as the watch runs.
	Synced(live func() map[types.UID]struct{}, current func() bool)
}

// Options configures the Watcher.
type Options struct {
	// SandboxConditionTypes and StableConditionType name the conditions the
	// trim keeps, besides PodScheduled, Initialized and Ready. Defaults
	// lifecycle's.
	SandboxConditionTypes []corev1.PodConditionType
	StableConditionType   corev1.PodConditionType
	// PodLabels and PodAnnotations are the label and annotation keys the
	// trim keeps. Default none.
	PodLabels, PodAnnotations []string
	// PodLabelsHandler, if set, receives every pod's labels, all of them:
	// the trim then keeps every label (interned), not only PodLabels.
	PodLabelsHandler PodLabelsHandler
	// UserErrorEventRegex matches the FailedMount event messages that mark
	// a pod as blocked by its own spec. Default DefaultUserErrorEventRegex.
	UserErrorEventRegex string
	// OnEvent, if set, is called for every event handled.
	OnEvent func(resource, event string)
	// Logger receives the watcher's logs. Default: discard.
	Logger *slog.Logger
}

// Validate reports the first invalid option.
func (o *Options) Validate() error {
	_, err := compileUserErrorRegex(o.UserErrorEventRegex)
	return err
}

// Watcher lists and watches pods, PVCs, StorageClasses and FailedMount
// events, trims them, and hands each pod to its Handler.
type Watcher struct {
	client    kubernetes.Interface
	handler   Handler
	opts      Options
	log       *slog.Logger
	trim      *trimmer
	classes   classResolver
	userError *regexp.Regexp
	current   *currency
}

// New returns a Watcher handing pods to h; Start runs it.
func New(client kubernetes.Interface, h Handler, opts Options) (*Watcher, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.OnEvent == nil {
		opts.OnEvent = func(string, string) {}
	}
	t := &trimmer{podLabels: map[string]bool{}, podAnnotations: map[string]bool{}, conditionTypes: map[corev1.PodConditionType]corev1.PodConditionType{corev1.PodScheduled: corev1.PodScheduled}}
	for _, k := range opts.PodLabels {
		t.podLabels[k] = true
	}
	t.allPodLabels = opts.PodLabelsHandler != nil
	for _, k := range opts.PodAnnotations {
		t.podAnnotations[k] = true
	}
	condTypes := append([]corev1.PodConditionType{corev1.PodReady, corev1.PodInitialized}, opts.SandboxConditionTypes...)
	if len(opts.SandboxConditionTypes) == 0 {
		condTypes = append(condTypes, lifecycle.DefaultSandboxConditionTypes...)
	}
	stable := opts.StableConditionType
	if stable == "" {
		stable = lifecycle.DefaultStableConditionType
	}
	condTypes = append(condTypes, stable)
	for _, ct := range condTypes {
		t.conditionTypes[ct] = ct
	}
	re, _ := compileUserErrorRegex(opts.UserErrorEventRegex) // validated above
	return &Watcher{client: client, handler: h, opts: opts, log: opts.Logger, trim: t, userError: re, current: newCurrency(time.Now)}, nil
}

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
		return stopped(ctx)
	}
	pods, keys := w.podController()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { pods.RunWithContext(ctx) })
	// The controller's HasSynced turns true only once the handler has
	// returned for every pod of the first list: the queue calls it under
	// the lock that HasSynced takes.
	if !cache.WaitForCacheSync(ctx.Done(), pods.HasSynced) {
		return stopped(ctx)
	}
	w.log.Info("Informers synced", "pods", keys.len())
	w.handler.Synced(keys.live, w.current.Current)
	<-ctx.Done()
	return nil
}

func stopped(ctx context.Context) error {
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

// deliver resolves the pod's classes and hands it on.
func (w *Watcher) deliver(pod *lifecycle.Pod) {
	pod.RuntimeClass = RuntimeClass(pod)
	pod.StorageClass = w.classes.StorageClass(pod)
	w.handler.Pod(pod)
}

func (w *Watcher) deletePod(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	switch pod := obj.(type) {
	case *lifecycle.Pod:
		pod.RuntimeClass = RuntimeClass(pod)
		pod.StorageClass = w.classes.StorageClass(pod)
		w.handler.Deleted(pod.UID, klogRef(pod), pod)
	case *podRef:
		// Deleted while the watch was down (a relist no longer has it, or
		// has its name with another UID): its final object is gone.
		w.handler.Deleted(pod.UID, pod.Namespace+"/"+pod.Name, nil)
	default:
		w.log.Error("Ignoring unexpected object in the pod watch", "type", fmt.Sprintf("%T", obj))
	}
}

func klogRef(p *lifecycle.Pod) string { return p.Namespace + "/" + p.Name }
