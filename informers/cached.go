package informers

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/podslo/podslo/internal/kube"
)

// cachedWatch lists and watches one resource into an indexer a lister
// reads, and tells h what changed: what client-go's shared informer does
// for the PVCs, StorageClasses and NetworkPolicies, but with
// reconnectBackoff, which a shared informer cannot be given. With
// client-go's default backoff (up to 60 s with its jitter), these watches
// came back up to a minute after an API server outage, and a shutdown
// during that wait hung: the watch-list retry sleeps without looking at
// its context (client-go v0.37 reflector.go, watchList), so the exporter
// took up to a minute to stop after SIGTERM. With reconnectBackoff the
// sleep is 3 s at most.
type cachedWatch struct {
	indexer cache.Indexer
	ctrl    cache.Controller
}

// newCachedWatch builds the watch of lw's objects (of obj's type), each
// passed through transform; what names them in client-go's logs.
func newCachedWatch(lw cache.ListerWatcher, obj runtime.Object, what string, transform cache.TransformFunc, h cache.ResourceEventHandler) *cachedWatch {
	indexer := cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	fifo := cache.NewDeltaFIFOWithOptions(cache.DeltaFIFOOptions{
		KnownObjects:          indexer,
		EmitDeltaTypeReplaced: true,
		Transformer:           transform,
	})
	return &cachedWatch{indexer: indexer, ctrl: &backoffController{
		queue: fifo,
		lw:    lw,
		obj:   obj,
		what:  what,
		process: func(o any, initial bool) error {
			for _, d := range o.(cache.Deltas) {
				if err := apply(indexer, h, d, initial); err != nil {
					return fmt.Errorf("%s: %w", what, err)
				}
			}
			return nil
		},
	}}
}

// apply writes one delta into indexer, then tells h, as client-go's
// informers do (processDeltas).
func apply(indexer cache.Indexer, h cache.ResourceEventHandler, d cache.Delta, initial bool) error {
	if d.Type == cache.Deleted {
		if err := indexer.Delete(d.Object); err != nil {
			return err
		}
		h.OnDelete(d.Object)
		return nil
	}
	old, exists, err := indexer.Get(d.Object)
	if err != nil {
		return err
	}
	if exists {
		if err := indexer.Update(d.Object); err != nil {
			return err
		}
		h.OnUpdate(old, d.Object)
		return nil
	}
	if err := indexer.Add(d.Object); err != nil {
		return err
	}
	h.OnAdd(d.Object, initial)
	return nil
}

// run lists and watches until ctx ends.
func (c *cachedWatch) run(ctx context.Context) { c.ctrl.RunWithContext(ctx) }

// hasSynced reports whether the first list was handled.
func (c *cachedWatch) hasSynced() bool { return c.ctrl.HasSynced() }

// listWatch is list and watch with the watch-list semantics of client
// (streamed initial lists where the API server serves them, as a shared
// informer has).
func listWatch(client any, list func(context.Context, metav1.ListOptions) (runtime.Object, error), watchFunc func(context.Context, metav1.ListOptions) (watch.Interface, error)) cache.ListerWatcher {
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListFunc:             func(o metav1.ListOptions) (runtime.Object, error) { return list(context.Background(), o) },
		WatchFunc:            func(o metav1.ListOptions) (watch.Interface, error) { return watchFunc(context.Background(), o) },
		ListWithContextFunc:  list,
		WatchFuncWithContext: watchFunc,
	}, client)
}

// narrowedListWatch is listWatch of resource r in namespace (all for ""),
// narrowed on the API server to the field selector (none when empty).
func narrowedListWatch(client kube.Interface, r kube.Resource, namespace, selector string) cache.ListerWatcher {
	narrow := func(o metav1.ListOptions) metav1.ListOptions {
		if selector != "" {
			o.FieldSelector = selector
		}
		return o
	}
	return listWatch(client,
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.List(ctx, r, namespace, narrow(o))
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return client.Watch(ctx, r, namespace, narrow(o))
		})
}
