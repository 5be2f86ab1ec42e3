package informers

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/podslo/podslo/lifecycle"
)

// The node and workload dimensions of the histograms (--histogram-label
// NAME=node-label:KEY and NAME=owner-kind) are read from metadata-only
// watches: a Node's labels, a ReplicaSet's or Job's controller are in its
// metadata, and the metadata client neither receives nor decodes a node's
// status (its image list alone is kilobytes) or a ReplicaSet's pod
// template. Each is a bare reflector writing into a store that keeps, per
// object, only what the resolution reads, as the pod watch keeps only key
// and UID (pods.go): no object cache, no handlers.

var (
	nodesResource       = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	replicaSetsResource = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}
	jobsResource        = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
)

// OwnerNone is the owner-kind of a pod without a controller.
const OwnerNone = "none"

// ownerMemory is how long the owner-kind resolution remembers a deleted
// ReplicaSet's or Job's controller. Deleting a Deployment (by default in
// the background) deletes its ReplicaSets first, and their pods terminate
// afterwards: without this memory, those terminations would be counted
// under ReplicaSet. An hour is the longest termination the histogram's
// buckets tell apart.
const ownerMemory = time.Hour

// metadataStore is what a metadata reflector writes into.
type metadataStore interface {
	cache.ReflectorStore
	HasSynced() bool
}

// runMetadataReflector lists and watches resource (in namespace, or all)
// through md, narrowed by the field selector, into store, until ctx ends,
// retrying after reconnectBackoff as the pod watch does.
func runMetadataReflector(ctx context.Context, md metadata.Interface, resource schema.GroupVersionResource, namespace, selector string, store metadataStore) {
	var ri metadata.ResourceInterface = md.Resource(resource)
	if namespace != metav1.NamespaceAll {
		ri = md.Resource(resource).Namespace(namespace)
	}
	narrow := func(o metav1.ListOptions) metav1.ListOptions {
		o.FieldSelector = selector
		return o
	}
	list := func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return ri.List(ctx, narrow(o))
	}
	watchFunc := func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return ri.Watch(ctx, narrow(o))
	}
	lw := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListFunc:             func(o metav1.ListOptions) (runtime.Object, error) { return list(context.Background(), o) },
		WatchFunc:            func(o metav1.ListOptions) (watch.Interface, error) { return watchFunc(context.Background(), o) },
		ListWithContextFunc:  list,
		WatchFuncWithContext: watchFunc,
	}, md)
	logger := klog.FromContext(ctx)
	backoff := reconnectBackoff
	cache.NewReflectorWithOptions(lw, &metav1.PartialObjectMetadata{}, store, cache.ReflectorOptions{
		Logger:          &logger,
		TypeDescription: resource.Resource,
		Backoff:         &backoff,
	}).RunWithContext(ctx)
}

// metaOf is the metadata of what a metadata reflector hands its store.
func metaOf(obj any) (*metav1.PartialObjectMetadata, error) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return nil, fmt.Errorf("unexpected %T in a metadata watch", obj)
	}
	return m, nil
}

// nodeLabels keeps, of each node, the label keys the histogram labels read,
// by node name.
type nodeLabels struct {
	keys    map[string]bool
	onEvent func(event string)

	mu     sync.RWMutex
	byName map[string]map[string]string
	synced atomic.Bool
}

func newNodeLabels(keys []string, onEvent func(event string)) *nodeLabels {
	n := &nodeLabels{keys: map[string]bool{}, onEvent: onEvent, byName: map[string]map[string]string{}}
	for _, k := range keys {
		n.keys[k] = true
	}
	return n
}

// of returns the kept labels of the named node: nil for a node it does not
// know (unscheduled pod, node deleted or not seen yet) or one with none
// of them. The map is never changed once stored: callers may keep it.
func (n *nodeLabels) of(name string) map[string]string {
	if name == "" {
		return nil
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.byName[name]
}

func (n *nodeLabels) set(obj any, event string) error {
	m, err := metaOf(obj)
	if err != nil {
		return err
	}
	kept := pick(m.Labels, n.keys)
	n.mu.Lock()
	n.byName[m.Name] = kept
	n.mu.Unlock()
	n.onEvent(event)
	return nil
}

func (n *nodeLabels) Add(obj any) error    { return n.set(obj, "add") }
func (n *nodeLabels) Update(obj any) error { return n.set(obj, "update") }

func (n *nodeLabels) Delete(obj any) error {
	m, err := metaOf(obj)
	if err != nil {
		return err
	}
	n.mu.Lock()
	delete(n.byName, m.Name)
	n.mu.Unlock()
	n.onEvent("delete")
	return nil
}

// Replace is a list, which replaces the nodes whole.
func (n *nodeLabels) Replace(list []any, _ string) error {
	byName := make(map[string]map[string]string, len(list))
	for _, obj := range list {
		m, err := metaOf(obj)
		if err != nil {
			return err
		}
		byName[m.Name] = pick(m.Labels, n.keys)
	}
	n.mu.Lock()
	old := n.byName
	n.byName = byName
	n.mu.Unlock()
	countList(n.onEvent, byName, old)
	n.synced.Store(true)
	return nil
}

// countList counts a list's events as a shared informer's handlers would
// see them: an add for each object it did not know, an update for each it
// did, and a delete for each it no longer has.
func countList[K comparable, V any](onEvent func(string), listed, known map[K]V) {
	for k := range listed {
		if _, ok := known[k]; ok {
			onEvent("update")
		} else {
			onEvent("add")
		}
	}
	for k := range known {
		if _, ok := listed[k]; !ok {
			onEvent("delete")
		}
	}
}

func (n *nodeLabels) Resync() error   { return nil }
func (n *nodeLabels) HasSynced() bool { return n.synced.Load() }

// owners keeps, of each ReplicaSet or Job of one watch, its controller's
// kind, by UID: the second step of a pod's owner-kind. A deleted one's is
// kept for ownerMemory.
type owners struct {
	now     func() time.Time
	onEvent func(event string)

	mu sync.RWMutex
	// byUID is each owner's controller kind, interned; "" for none.
	byUID map[types.UID]ownerEntry
	// lastPurge is when deleted owners older than ownerMemory were last
	// dropped.
	lastPurge time.Time
	synced    atomic.Bool
}

type ownerEntry struct {
	controller string
	// deleted is when the owner was seen deleted, in Unix seconds; 0
	// while it exists.
	deleted int64
}

func newOwners(now func() time.Time, onEvent func(event string)) *owners {
	return &owners{now: now, onEvent: onEvent, byUID: map[types.UID]ownerEntry{}, lastPurge: now()}
}

// controller returns the kind of the controller of the owner with this
// UID, "" when it has none, and whether the owner is known (existing, or
// deleted less than ownerMemory ago).
func (o *owners) controller(uid types.UID) (string, bool) {
	o.mu.RLock()
	e, ok := o.byUID[uid]
	o.mu.RUnlock()
	if ok && e.deleted != 0 && o.now().Unix()-e.deleted > int64(ownerMemory/time.Second) {
		// Past its memory, not purged yet.
		return "", false
	}
	return e.controller, ok
}

// controllerKind is the kind of m's controller reference, "" for none.
func controllerKind(refs []metav1.OwnerReference) string {
	for i := range refs {
		if c := refs[i].Controller; c != nil && *c {
			return internKind(refs[i].Kind)
		}
	}
	return ""
}

func (o *owners) set(obj any, event string) error {
	m, err := metaOf(obj)
	if err != nil {
		return err
	}
	e := ownerEntry{controller: controllerKind(m.OwnerReferences)}
	o.mu.Lock()
	o.byUID[m.UID] = e
	o.mu.Unlock()
	o.onEvent(event)
	return nil
}

func (o *owners) Add(obj any) error    { return o.set(obj, "add") }
func (o *owners) Update(obj any) error { return o.set(obj, "update") }

func (o *owners) Delete(obj any) error {
	m, err := metaOf(obj)
	if err != nil {
		return err
	}
	now := o.now()
	o.mu.Lock()
	if e, ok := o.byUID[m.UID]; ok && e.deleted == 0 {
		e.deleted = now.Unix()
		o.byUID[m.UID] = e
	}
	o.purgeLocked(now)
	o.mu.Unlock()
	o.onEvent("delete")
	return nil
}

// Replace is a relist: an owner it no longer has was deleted while the
// watch was down, and is remembered as deleted from now.
func (o *owners) Replace(list []any, _ string) error {
	now := o.now()
	byUID := make(map[types.UID]ownerEntry, len(list))
	for _, obj := range list {
		m, err := metaOf(obj)
		if err != nil {
			return err
		}
		byUID[m.UID] = ownerEntry{controller: controllerKind(m.OwnerReferences)}
	}
	o.mu.Lock()
	existing := make(map[types.UID]ownerEntry, len(o.byUID))
	for uid, e := range o.byUID {
		if e.deleted == 0 {
			existing[uid] = e
		}
	}
	// Counted before the deleted ones join the list's.
	countList(o.onEvent, byUID, existing)
	for uid, e := range o.byUID {
		if _, ok := byUID[uid]; !ok {
			if e.deleted == 0 {
				e.deleted = now.Unix()
			}
			byUID[uid] = e
		}
	}
	o.byUID = byUID
	o.purgeLocked(now)
	o.mu.Unlock()
	o.synced.Store(true)
	return nil
}

// purgeLocked drops the owners deleted more than ownerMemory ago, at most
// once a minute: a pass over every owner is about a millisecond per 100k.
func (o *owners) purgeLocked(now time.Time) {
	if now.Sub(o.lastPurge) < time.Minute {
		return
	}
	o.lastPurge = now
	cutoff := now.Add(-ownerMemory).Unix()
	for uid, e := range o.byUID {
		if e.deleted != 0 && e.deleted <= cutoff {
			delete(o.byUID, uid)
		}
	}
}

func (o *owners) Resync() error   { return nil }
func (o *owners) HasSynced() bool { return o.synced.Load() }

// ownerResolver resolves a pod's owner-kind from its controller reference
// and, for a ReplicaSet or a Job, that owner's own controller, from the
// ReplicaSet and Job watches of the pod's namespace (an owner is always in
// its dependent's namespace).
type ownerResolver struct {
	replicaSets, jobs map[string]*owners // by watched namespace; "" for all
}

// kind is the pod's owner-kind: its controller's kind, or, when that is a
// ReplicaSet (apps) or a Job (batch) with a controller of its own, that
// controller's kind (Deployment, CronJob, or any other); OwnerNone without
// a controller. An owner the watch does not know (deleted more than
// ownerMemory ago or before podslo started, or not seen yet) counts as
// having no controller.
func (r *ownerResolver) kind(p *lifecycle.Pod) string {
	if len(p.OwnerReferences) == 0 {
		return OwnerNone
	}
	ref := &p.OwnerReferences[0]
	group, _, found := strings.Cut(ref.APIVersion, "/")
	if !found {
		group = "" // the core group: "v1"
	}
	var byNamespace map[string]*owners
	switch {
	case ref.Kind == "ReplicaSet" && group == "apps":
		byNamespace = r.replicaSets
	case ref.Kind == "Job" && group == "batch":
		byNamespace = r.jobs
	}
	if o := ownersIn(byNamespace, p.Namespace); o != nil {
		if c, _ := o.controller(ref.UID); c != "" {
			return c
		}
	}
	return internKind(ref.Kind)
}

func ownersIn(byNamespace map[string]*owners, namespace string) *owners {
	if o, ok := byNamespace[metav1.NamespaceAll]; ok {
		return o
	}
	return byNamespace[namespace]
}

// kinds interns controller kinds: each pod's owner-kind is kept in the
// store's per-pod metadata while the pod lives, and kinds are few.
var kinds = struct {
	mu sync.Mutex
	m  map[string]string
}{m: map[string]string{}}

// maxInternedKinds bounds kinds: a pod's author may write any controller
// reference.
const maxInternedKinds = 1024

func internKind(k string) string {
	switch k {
	case "ReplicaSet":
		return "ReplicaSet"
	case "Deployment":
		return "Deployment"
	case "StatefulSet":
		return "StatefulSet"
	case "DaemonSet":
		return "DaemonSet"
	case "Job":
		return "Job"
	case "CronJob":
		return "CronJob"
	case "Node":
		return "Node"
	}
	kinds.mu.Lock()
	defer kinds.mu.Unlock()
	if s, ok := kinds.m[k]; ok {
		return s
	}
	if len(kinds.m) < maxInternedKinds {
		k = strings.Clone(k)
		kinds.m[k] = k
	}
	return k
}

// nodeSelector narrows the Node watch to the one node of per-node mode.
func nodeSelector(node string) string {
	if node == "" {
		return ""
	}
	return fields.OneTermEqualSelector("metadata.name", node).String()
}
