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
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/podslo/podslo/internal/kube"
	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/scope"
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
	// ImagePull is a kubelet event about one of the pod's images: pulled
	// (with its duration), already present, or failed. A relist hands the
	// same events on again.
	ImagePull(uid types.UID, ref string, e lifecycle.PullEvent)
	// Synced is called once every pod of the first list has been handed to
	// Pod. live returns the UIDs of the pods that exist at the time of the
	// call; current whether the pod and FailedMount event watches are
	// open and every object of their newest lists handled, i.e. whether
	// the absence of an update (or of a user-error event) can be trusted.
	// Both stay valid for as long as the watches run.
	Synced(live func() map[types.UID]struct{}, current func() bool)
}

// Options configures the Watcher.
type Options struct {
	// Lifecycle is the configuration the pipeline runs lifecycle.Step
	// with: the trim keeps the pod conditions it reads
	// (lifecycle.Config.ConditionTypes). Default lifecycle's defaults.
	Lifecycle lifecycle.Config
	// PodLabels and PodAnnotations are the label and annotation keys the
	// trim keeps. Default none.
	PodLabels, PodAnnotations []string
	// PodLabelsHandler, if set, receives every pod's labels, all of them:
	// the trim then keeps every label (interned), not only PodLabels.
	PodLabelsHandler PodLabelsHandler
	// UserErrorEvents matches the FailedMount event messages that mark a
	// pod as blocked by its own spec (--user-error-event-regex, compiled
	// by the exporter's New). Default DefaultUserErrorEventRegex.
	UserErrorEvents *regexp.Regexp
	// OnEvent, if set, is called for every event handled.
	OnEvent func(resource, event string)
	// RESTConfig, if set, is the configuration client was made from: the
	// pod watch then makes its own client from it, one that decodes each
	// pod's protobuf bytes straight into the trimmed lifecycle.Pod. Left
	// nil (unit tests, on a fake clientset), the pod watch decodes whole
	// pods through client and trims them.
	RESTConfig *rest.Config
	// Logger receives the watcher's logs. Default: discard.
	Logger *slog.Logger
	// NodeLabels are the node label keys the histogram labels read
	// (--histogram-label NAME=node-label:KEY): with any, a metadata watch
	// of Nodes keeps these labels of each node, and every pod is delivered
	// with its node's (lifecycle.Pod.NodeLabels). Default none: no Node
	// watch.
	NodeLabels []string
	// OwnerKind resolves every pod's workload kind
	// (lifecycle.Pod.OwnerKind, --histogram-label NAME=owner-kind) through
	// metadata watches of ReplicaSets and Jobs. Default false: neither
	// watch runs.
	OwnerKind bool
	// Metadata is the client of the Node, ReplicaSet and Job watches.
	// Default: one made from RESTConfig; New fails without either when
	// NodeLabels or OwnerKind needs it.
	Metadata metadata.Interface
	// Scope narrows the watches: pods, PVCs and events by namespace (one
	// watch per allowed namespace, a field selector for denied ones), pods
	// by node, and pods and events by shard (client-side). StorageClasses
	// stay cluster-wide: the default class is a cluster-wide setting. It
	// is used as given, validated by the caller (scope.Scope.Validate);
	// the zero Scope, like scope.Unscoped, watches the whole cluster.
	Scope scope.Scope
}

// Watcher lists and watches pods, PVCs, StorageClasses and FailedMount
// events, trims them, and hands each pod to its Handler.
type Watcher struct {
	client kube.Interface
	// pods is the pod watch's own REST client, which decodes pods straight
	// into lifecycle.Pod; nil without Options.RESTConfig.
	pods      rest.Interface
	handler   Handler
	opts      Options
	log       *slog.Logger
	trim      *trimmer
	classes   classResolver
	userError *regexp.Regexp
	// reach logs the API server's outages, as the pod and event watches
	// see them.
	reach *reachability
	// storageClasses is the StorageClass lister once Start made it, for
	// StorageClasses, which the collectors call at scrape time.
	storageClasses atomic.Pointer[storagelisters.StorageClassLister]
	// nodes and owners resolve the node and workload dimensions; nil
	// when none is configured. Start sets them before any pod is
	// delivered.
	nodes  *nodeLabels
	owners *ownerResolver
	// podsCurrent is the pod watches once Start made them, for
	// PodsCurrent.
	podsCurrent atomic.Pointer[podWatches]
}

// StorageClasses returns the names of the cluster's StorageClasses in the
// watch's cache: nil before Start has made it. It never calls the API
// server, so a scrape may call it.
func (w *Watcher) StorageClasses() []string {
	l := w.storageClasses.Load()
	if l == nil {
		return nil
	}
	all, err := (*l).List(everything)
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(all))
	for _, sc := range all {
		names = append(names, sc.Name)
	}
	return names
}

// New returns a Watcher handing pods to h; Start runs it.
func New(client kube.Interface, h Handler, opts Options) (*Watcher, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.OnEvent == nil {
		opts.OnEvent = func(string, string) {}
	}
	if opts.UserErrorEvents == nil {
		opts.UserErrorEvents = defaultUserErrorEvents
	}
	t := &trimmer{podLabels: map[string]bool{}, podAnnotations: map[string]bool{}, conditionTypes: map[corev1.PodConditionType]corev1.PodConditionType{corev1.PodScheduled: corev1.PodScheduled}}
	for _, k := range opts.PodLabels {
		t.podLabels[k] = true
	}
	t.controllerRef = opts.OwnerKind
	t.allPodLabels = opts.PodLabelsHandler != nil
	for _, k := range opts.PodAnnotations {
		t.podAnnotations[k] = true
	}
	// The end of a streamed list is a bookmark pod with this annotation,
	// which the reflector reads from the decoded object.
	t.podAnnotations[metav1.InitialEventsAnnotationKey] = true
	for _, ct := range opts.Lifecycle.ConditionTypes() {
		t.conditionTypes[ct] = ct
	}
	w := &Watcher{client: client, handler: h, opts: opts, log: opts.Logger, trim: t, userError: opts.UserErrorEvents, reach: newReachability(opts.Logger, time.Now)}
	if opts.RESTConfig != nil {
		var err error
		if w.pods, err = newPodClient(opts.RESTConfig, t); err != nil {
			return nil, err
		}
	}
	if (len(opts.NodeLabels) > 0 || opts.OwnerKind) && opts.Metadata == nil {
		if opts.RESTConfig == nil {
			return nil, errors.New("the node-label and owner-kind histogram labels need a metadata client: set Options.Metadata or Options.RESTConfig")
		}
		md, err := metadata.NewForConfig(opts.RESTConfig)
		if err != nil {
			return nil, fmt.Errorf("create metadata client: %w", err)
		}
		w.opts.Metadata = md
	}
	return w, nil
}

// Start runs the informers until ctx ends.
func (w *Watcher) Start(ctx context.Context) error {
	sc := &w.opts.Scope
	namespaces := sc.WatchedNamespaces()
	nsSelector := sc.NamespaceSelector()
	// No resync for these either: their handlers only count events, and
	// the class resolver reads the listers' current state. StorageClasses
	// are cluster-scoped, and read whatever the scope: the default class
	// resolves the claims that name none.
	classes := newCachedWatch(narrowedListWatch(w.client, kube.StorageClasses, "", ""), &storagev1.StorageClass{}, "storageclasses", w.trim.transform, w.counter("storageclasses"))
	cached := []*cachedWatch{classes}
	pvcListers := pvcsByNamespace{}
	var eventWatches []*eventWatch
	var pvcLister corelisters.PersistentVolumeClaimLister
	for _, ns := range namespaces {
		// One watch per allowed namespace (one, cluster-wide, without an
		// allowlist): each is narrowed on the API server, so podslo does
		// not receive what it would drop.
		pvcs := newCachedWatch(narrowedListWatch(w.client, kube.PersistentVolumeClaims, ns, nsSelector), &corev1.PersistentVolumeClaim{}, "persistentvolumeclaims", w.trim.transform, w.counter("persistentvolumeclaims"))
		cached = append(cached, pvcs)
		pvcLister = corelisters.NewPersistentVolumeClaimLister(pvcs.indexer)
		pvcListers[ns] = pvcLister
		for _, sel := range eventSelectors(nsSelector) {
			eventWatches = append(eventWatches, w.eventController(ns, sel))
		}
	}
	scLister := storagelisters.NewStorageClassLister(classes.indexer)
	w.classes = classResolver{pvcs: pvcListers, classes: scLister}
	w.storageClasses.Store(&scLister)
	if len(namespaces) == 1 && namespaces[0] == metav1.NamespaceAll {
		w.classes.pvcs = pvcLister
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	var synced []cache.InformerSynced
	for _, c := range cached {
		wg.Go(func() { c.run(ctx) })
		synced = append(synced, c.hasSynced)
	}
	synced = append(synced, w.startDimensions(ctx, &wg, namespaces, nsSelector)...)
	for _, ew := range eventWatches {
		wg.Go(func() { ew.ctrl.RunWithContext(ctx) })
		synced = append(synced, ew.ctrl.HasSynced)
	}
	// PVCs, classes, FailedMount events, and the Node, ReplicaSet and Job
	// watches first, so that the first pass over the pods already resolves
	// every storage class, node label and owner kind, and knows every user
	// error.
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return stopped(ctx)
	}
	watches := make([]*podWatch, 0, len(namespaces))
	for _, ns := range namespaces {
		watches = append(watches, w.podController(ns))
	}
	podsSynced := make([]cache.InformerSynced, 0, len(watches))
	for _, pw := range watches {
		wg.Go(func() { pw.ctrl.RunWithContext(ctx) })
		podsSynced = append(podsSynced, pw.ctrl.HasSynced)
	}
	// The controller's HasSynced turns true only once the handler has
	// returned for every pod of the first list: the queue calls it under
	// the lock that HasSynced takes.
	if !cache.WaitForCacheSync(ctx.Done(), podsSynced...) {
		return stopped(ctx)
	}
	all := podWatches(watches)
	w.podsCurrent.Store(&all)
	w.log.Info("Informers synced", "pods", all.len(), "scope", sc.String())
	w.handler.Synced(all.live, func() bool { return all.current() && eventsCurrent(eventWatches) })
	<-ctx.Done()
	return nil
}

// PodsCurrent reports whether every pod watch is current: false until the
// first list was handled. It never calls the API server.
func (w *Watcher) PodsCurrent() bool {
	ws := w.podsCurrent.Load()
	return ws != nil && ws.current()
}

// podWatches are the pod watches of every watched namespace.
type podWatches []*podWatch

func (ws podWatches) len() int {
	n := 0
	for _, pw := range ws {
		n += pw.keys.len()
	}
	return n
}

// live is the UIDs of the pods that exist now, in every watched namespace.
func (ws podWatches) live() map[types.UID]struct{} {
	if len(ws) == 1 {
		return ws[0].keys.live()
	}
	out := map[types.UID]struct{}{}
	for _, pw := range ws {
		for uid := range pw.keys.live() {
			out[uid] = struct{}{}
		}
	}
	return out
}

// current is whether every pod watch is current: the absence of an update
// can be trusted only if no namespace's watch is down.
func (ws podWatches) current() bool {
	for _, pw := range ws {
		if !pw.current.Current() {
			return false
		}
	}
	return true
}

// eventsCurrent is whether every FailedMount event watch is current.
func eventsCurrent(ews []*eventWatch) bool {
	for _, ew := range ews {
		if !ew.current.Current() {
			return false
		}
	}
	return true
}

// pvcsByNamespace is the PVC listers of the allowed namespaces: a pod's
// claims are in its own namespace, which its own watch's factory lists.
type pvcsByNamespace map[string]corelisters.PersistentVolumeClaimLister

func (p pvcsByNamespace) PersistentVolumeClaims(namespace string) corelisters.PersistentVolumeClaimNamespaceLister {
	if l, ok := p[namespace]; ok {
		return l.PersistentVolumeClaims(namespace)
	}
	return noPVCs{}
}

// noPVCs lists the claims of a namespace outside the scope: none.
type noPVCs struct{}

func (noPVCs) List(labels.Selector) ([]*corev1.PersistentVolumeClaim, error) { return nil, nil }
func (noPVCs) Get(name string) (*corev1.PersistentVolumeClaim, error) {
	return nil, apierrors.NewNotFound(corev1.Resource("persistentvolumeclaims"), name)
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

// startDimensions starts the Node watch and the ReplicaSet and Job watches
// of each watched namespace, those the configuration needs, and returns
// their HasSynced.
func (w *Watcher) startDimensions(ctx context.Context, wg *sync.WaitGroup, namespaces []string, nsSelector string) []cache.InformerSynced {
	var synced []cache.InformerSynced
	md := w.opts.Metadata
	if len(w.opts.NodeLabels) > 0 {
		nodes := newNodeLabels(w.opts.NodeLabels, func(e string) { w.opts.OnEvent("nodes", e) })
		wg.Go(func() {
			runMetadataReflector(ctx, md, nodesResource, metav1.NamespaceAll, nodeSelector(w.opts.Scope.Node), nodes)
		})
		synced = append(synced, nodes.HasSynced)
		w.nodes = nodes
	}
	if w.opts.OwnerKind {
		r := &ownerResolver{replicaSets: map[string]*owners{}, jobs: map[string]*owners{}}
		for _, ns := range namespaces {
			for resource, byNamespace := range map[string]map[string]*owners{"replicasets": r.replicaSets, "jobs": r.jobs} {
				gvr := replicaSetsResource
				if resource == "jobs" {
					gvr = jobsResource
				}
				o := newOwners(time.Now, func(e string) { w.opts.OnEvent(resource, e) })
				byNamespace[ns] = o
				wg.Go(func() { runMetadataReflector(ctx, md, gvr, ns, nsSelector, o) })
				synced = append(synced, o.HasSynced)
			}
		}
		w.owners = r
	}
	return synced
}

// resolve sets the pod's classes and dimensions.
func (w *Watcher) resolve(pod *lifecycle.Pod) {
	pod.RuntimeClass = RuntimeClass(pod)
	pod.StorageClass = w.classes.StorageClass(pod)
	if w.nodes != nil {
		pod.NodeLabels = w.nodes.of(pod.NodeName)
	}
	if w.owners != nil {
		pod.OwnerKind = w.owners.kind(pod)
	}
}

// deliver resolves the pod's classes and dimensions and hands it on.
func (w *Watcher) deliver(pod *lifecycle.Pod) {
	w.resolve(pod)
	w.handler.Pod(pod)
}

func (w *Watcher) deletePod(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	switch pod := obj.(type) {
	case *lifecycle.Pod:
		w.resolve(pod)
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
