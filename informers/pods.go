package informers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/podslo/podslo/internal/kube"
	"github.com/podslo/podslo/lifecycle"
)

// The pod watch is a bare client-go controller (reflector and DeltaFIFO)
// rather than a shared informer, because nothing in podslo reads cached pods:
// a pod's history lives in the store, and the handler only ever needs the
// newest object. A shared informer would keep every pod (trimmed, ~750 B with
// its index entries) for as long as it exists; this keeps its key and UID
// (~110 B), which is what a relist needs to tell which pods were deleted
// while the watch was down. At 100k pods that is about 60 MB of live heap
// less, twice that in resident memory with the default GOGC.

// podKeys is the pods the controller has delivered: key (namespace/name) to
// UID. It is the DeltaFIFO's KnownObjects.
type podKeys struct {
	mu   sync.RWMutex
	uids map[string]types.UID
}

// podRef is what podKeys gives back for a key: the pod deleted while the
// watch was down arrives as a DeletedFinalStateUnknown holding one.
type podRef struct {
	Namespace, Name string
	UID             types.UID
}

func newPodKeys() *podKeys { return &podKeys{uids: map[string]types.UID{}} }

// set records key and says whether the pod is new ("add") or known
// ("update"), for the watch event counter, and which UID the key had
// before: another UID means the pod was deleted and re-created under the
// same name while the watch was down.
func (k *podKeys) set(key string, uid types.UID) (event string, was types.UID) {
	k.mu.Lock()
	defer k.mu.Unlock()
	was, known := k.uids[key]
	k.uids[key] = uid
	if known {
		return "update", was
	}
	return "add", ""
}

// live returns the set of UIDs of the pods that exist now.
func (k *podKeys) live() map[types.UID]struct{} {
	k.mu.RLock()
	defer k.mu.RUnlock()
	out := make(map[types.UID]struct{}, len(k.uids))
	for _, uid := range k.uids {
		out[uid] = struct{}{}
	}
	return out
}

func (k *podKeys) remove(key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.uids, key)
}

func (k *podKeys) len() int {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return len(k.uids)
}

// ListKeys implements cache.KeyLister.
func (k *podKeys) ListKeys() []string {
	k.mu.RLock()
	defer k.mu.RUnlock()
	keys := make([]string, 0, len(k.uids))
	for key := range k.uids {
		keys = append(keys, key)
	}
	return keys
}

// GetByKey implements cache.KeyGetter.
func (k *podKeys) GetByKey(key string) (any, bool, error) {
	k.mu.RLock()
	uid, ok := k.uids[key]
	k.mu.RUnlock()
	if !ok {
		return nil, false, nil
	}
	ns, name, _ := strings.Cut(key, "/")
	return &podRef{Namespace: ns, Name: name, UID: uid}, true, nil
}

// podListWatch lists and watches the pods of one namespace (or all) that
// the field selector keeps, through the typed client, as client-go's
// generated pod informer does: whole pods, which the queue's transform
// trims. Only unit tests, on a fake clientset, take this path; the
// exporter decodes pods straight into their trimmed form (podListWatchREST).
func podListWatch(client kube.Interface, namespace, selector string, owns func(types.UID) bool, c *currency) cache.ListerWatcher {
	return filteredPodListWatch(c, client, selector, owns,
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.List(ctx, kube.Pods, namespace, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return client.Watch(ctx, kube.Pods, namespace, o)
		})
}

// podListWatchREST is podListWatch through rc, a REST client whose codec
// decodes pods into lifecycle.Pod (newPodClient). It makes the requests the
// typed client makes.
func podListWatchREST(rc rest.Interface, namespace, selector string, owns func(types.UID) bool, c *currency) cache.ListerWatcher {
	request := func(o metav1.ListOptions) *rest.Request {
		var timeout time.Duration
		if o.TimeoutSeconds != nil {
			timeout = time.Duration(*o.TimeoutSeconds) * time.Second
		}
		return rc.Get().NamespaceIfScoped(namespace, namespace != "").Resource("pods").
			VersionedParams(&o, kube.ParameterCodec).Timeout(timeout)
	}
	return filteredPodListWatch(c, rc, selector, owns,
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return request(o).Do(ctx).Get()
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.Watch = true
			return request(o).Watch(ctx)
		})
}

// filteredPodListWatch narrows list and watch to the field selector and
// to the pods owns keeps, with client-go's choice of streaming lists
// (WatchList) where client supports them. owns drops, before they reach
// the queue, the pods of other shards: the API server cannot select by a
// hash of the UID.
func filteredPodListWatch(c *currency, client any, selector string, owns func(types.UID) bool,
	list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFunc func(context.Context, metav1.ListOptions) (watch.Interface, error)) cache.ListerWatcher {
	narrow := func(o metav1.ListOptions) metav1.ListOptions {
		o.FieldSelector = selector
		return o
	}
	filteredList := func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		l, err := list(ctx, narrow(o))
		if err != nil || owns == nil {
			return l, err
		}
		// In place, keeping the list's metadata: its continue token pages
		// the relist. DeleteFunc clears the tail, so the dropped pods can
		// be collected.
		switch l := l.(type) {
		case *corev1.PodList:
			l.Items = slices.DeleteFunc(l.Items, func(p corev1.Pod) bool { return !owns(p.UID) })
		case *podList:
			l.Items = slices.DeleteFunc(l.Items, func(p lifecycle.Pod) bool { return !owns(p.UID) })
		default:
			return nil, fmt.Errorf("list pods: unexpected %T", l)
		}
		return l, nil
	}
	filteredWatch := func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		w, err := watchFunc(ctx, narrow(o))
		if err != nil || owns == nil {
			return w, err
		}
		return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
			switch e.Type {
			case watch.Added, watch.Modified, watch.Deleted:
				switch pod := e.Object.(type) {
				case *corev1.Pod:
					return e, owns(pod.UID)
				case *lifecycle.Pod:
					return e, owns(pod.UID)
				}
				return e, true
			default:
				// Bookmarks (the end of a streamed list among them) and
				// errors carry no pod.
				return e, true
			}
		}), nil
	}
	return trackedListWatch(c, client, filteredList, filteredWatch)
}

// trackedListWatch is list and watch as a ListerWatcher whose lists and
// watches c follows, with client-go's choice of streaming lists where the
// client supports them.
func trackedListWatch(c *currency, client any,
	list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFunc func(context.Context, metav1.ListOptions) (watch.Interface, error)) cache.ListerWatcher {
	return cache.ToListWatcherWithWatchListSemantics(c.track(&cache.ListWatch{
		ListFunc:             func(o metav1.ListOptions) (runtime.Object, error) { return list(context.Background(), o) },
		WatchFunc:            func(o metav1.ListOptions) (watch.Interface, error) { return watchFunc(context.Background(), o) },
		ListWithContextFunc:  list,
		WatchFuncWithContext: watchFunc,
	}), client)
}

// podWatch is the pod watch of one namespace (or of all): the keys it has
// delivered and whether it is current.
type podWatch struct {
	namespace string
	keys      *podKeys
	current   *currency
	ctrl      cache.Controller
}

func newPodWatch(namespace string, reach *reachability) *podWatch {
	return &podWatch{namespace: namespace, keys: newPodKeys(), current: newCurrency(time.Now, reach)}
}

// stamp sets the receive time of a pod the watch has just received, if
// the watch is current: receivingListWatch calls it as each pod comes off
// the connection, ahead of the queue and its handler's backlog. A list's
// pods (a first list, a relist, a streamed list) arrive while the watch
// is not current, and keep 0: they show what happened at any time before.
// Only an unstamped pod is stamped, so a pod readied twice keeps its
// first receive time.
func (pw *podWatch) stamp(obj any, err error) (any, error) {
	if pod, ok := obj.(*lifecycle.Pod); ok && err == nil && pod.Received == 0 && pw.current.Current() {
		pod.Received = pw.current.now().UnixMilli()
	}
	return obj, err
}

// podController returns the watch that feeds the pods of namespace (all
// for metav1.NamespaceAll) through handlePod and deletePod.
func (w *Watcher) podController(namespace string) *podWatch {
	pw := newPodWatch(namespace, w.reach)
	var owns func(types.UID) bool
	if w.opts.Scope.Sharded() {
		owns = w.opts.Scope.OwnsUID
	}
	if w.pods != nil {
		w.controlPods(pw, podListWatchREST(w.pods, namespace, w.opts.Scope.PodSelector(), owns, pw.current))
	} else {
		w.controlPods(pw, podListWatch(w.client, namespace, w.opts.Scope.PodSelector(), owns, pw.current))
	}
	return pw
}

// controlPods makes pw's controller over lw: the whole pod path after the
// API server's bytes, which the watch-path benchmark drives from a
// recorded stream. lw's lists may hold whole pods (the typed client's
// path), which the queue trims; its watches' pods reach the reflector
// trimmed and stamped (receivingListWatch), so the reflector expects
// lifecycle.Pod.
func (w *Watcher) controlPods(pw *podWatch, lw cache.ListerWatcher) {
	fifo := cache.NewDeltaFIFOWithOptions(cache.DeltaFIFOOptions{
		KnownObjects:          pw.keys,
		EmitDeltaTypeReplaced: true,
		Transformer:           w.trim.transform,
	})
	lw = newReceivingListWatch(lw, w.receivePod(pw))
	pw.ctrl = trackedController(fifo, pw.current, lw, &lifecycle.Pod{}, "pods", func(d cache.Delta) { w.processPodDelta(pw, d) })
}

// trackedController is a bare controller over fifo, retrying after
// reconnectBackoff, whose lists queue a
// marker for cur, so that cur knows when the newest list was handled;
// process gets every other delta. No resync: there is no cached object to
// resync from, and the handlers retry what they could not record.
func trackedController(fifo *cache.DeltaFIFO, cur *currency, lw cache.ListerWatcher, obj runtime.Object, what string, process func(cache.Delta)) cache.Controller {
	return &backoffController{
		queue: &markingQueue{DeltaFIFO: fifo, c: cur},
		lw:    lw,
		obj:   obj,
		what:  what,
		process: func(obj any, _ bool) error {
			for _, d := range obj.(cache.Deltas) {
				if n, ok := listMarker(d.Object); ok {
					if d.Type != cache.Deleted {
						cur.listHandled(n)
					}
					continue
				}
				process(d)
			}
			return nil
		},
	}
}

func (w *Watcher) processPodDelta(pw *podWatch, d cache.Delta) {
	keys := pw.keys
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(d.Object)
	if err != nil {
		w.log.Error("Ignoring a pod without a key", "type", fmt.Sprintf("%T", d.Object), "err", err)
		return
	}
	switch d.Type {
	case cache.Sync, cache.Replaced, cache.Added, cache.Updated:
		pod, ok := d.Object.(*lifecycle.Pod)
		if !ok {
			w.log.Error("Ignoring unexpected object in the pod watch", "type", fmt.Sprintf("%T", d.Object))
			return
		}
		// A list's pods come as Replaced, whether the reflector listed or
		// streamed the list (WatchList): they show only the current state.
		pod.Listed = d.Type == cache.Replaced
		event, was := keys.set(key, pod.UID)
		if was != "" && was != pod.UID {
			// A relist (Replaced) shows the name with a new UID: the old pod
			// was deleted while the watch was down, and no Deleted will come
			// for it, since its key still exists.
			w.opts.OnEvent("pods", "delete")
			w.deletePod(cache.DeletedFinalStateUnknown{Key: key, Obj: &podRef{Namespace: pod.Namespace, Name: pod.Name, UID: was}})
			event = "add"
		}
		w.opts.OnEvent("pods", event)
		if h := w.opts.PodLabelsHandler; h != nil {
			h.PodLabels(pod.Namespace, pod.Name, pod.Labels)
		}
		w.deliver(pod)
	case cache.Deleted:
		keys.remove(key)
		if h := w.opts.PodLabelsHandler; h != nil {
			ns, name, _ := strings.Cut(key, "/")
			h.PodDeleted(ns, name)
		}
		w.opts.OnEvent("pods", "delete")
		w.deletePod(d.Object)
	}
}
