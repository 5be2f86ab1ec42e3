package informers

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"unique"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/podslo/podslo/internal/kube"
	"github.com/podslo/podslo/netpolicy"
	"github.com/podslo/podslo/scope"
)

// PolicyHandler receives the NetworkPolicies the watch sees, trimmed to
// what the KEP-2136 checks read (netpolicy.Trim).
type PolicyHandler interface {
	// Policy is an added or updated policy.
	Policy(p *netpolicy.Policy)
	// PolicyDeleted is a policy that no longer exists.
	PolicyDeleted(namespace, name string)
}

// PodLabelsHandler receives every label of every pod, for counting the
// pods each NetworkPolicy selects. Setting Options.PodLabelsHandler makes
// the pod trim keep all labels, which costs memory per pod
// (docs/networkpolicy.md).
type PodLabelsHandler interface {
	// PodLabels is a pod's labels, added or updated; the map is not
	// changed afterwards.
	PodLabels(namespace, name string, labels map[string]string)
	// PodDeleted is a pod that no longer exists.
	PodDeleted(namespace, name string)
}

// PolicyOptions configures the PolicyWatcher.
type PolicyOptions struct {
	// OnEvent, if set, is called for every event handled, with resource
	// "networkpolicies".
	OnEvent func(resource, event string)
	// Logger receives the watcher's logs. Default: discard.
	Logger *slog.Logger
	// Scope narrows the watch by namespace, as the pod watch: one watch
	// per allowed namespace, the denylist's field selector. Policies have
	// no node nor shard: every instance of a per-node or sharded set
	// watches the same ones. The zero Scope, like scope.Unscoped, watches
	// every namespace.
	Scope scope.Scope
}

// PolicyWatcher lists and watches NetworkPolicies, trims them, and hands
// each to its PolicyHandler. It is separate from Watcher so that
// --networkpolicies=false starts no watch and needs no permission.
type PolicyWatcher struct {
	client  kube.Interface
	handler PolicyHandler
	opts    PolicyOptions
}

// NewPolicyWatcher returns a PolicyWatcher handing policies to h; Start
// runs it.
func NewPolicyWatcher(client kube.Interface, h PolicyHandler, opts PolicyOptions) *PolicyWatcher {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.OnEvent == nil {
		opts.OnEvent = func(string, string) {}
	}
	return &PolicyWatcher{client: client, handler: h, opts: opts}
}

const policiesResource = "networkpolicies"

// Start runs the watch until ctx ends.
func (w *PolicyWatcher) Start(ctx context.Context) error {
	// No resync: the handler derives nothing from time.
	selector := w.opts.Scope.NamespaceSelector()
	var synced []cache.InformerSynced
	var stores []cache.Store
	var wg sync.WaitGroup
	defer wg.Wait()
	for _, ns := range w.opts.Scope.WatchedNamespaces() {
		cw := newCachedWatch(narrowedListWatch(w.client, kube.NetworkPolicies, ns, selector), &networkingv1.NetworkPolicy{}, policiesResource, trimPolicy, cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { w.opts.OnEvent(policiesResource, "add"); w.deliver(obj) },
			UpdateFunc: func(_, obj any) { w.opts.OnEvent(policiesResource, "update"); w.deliver(obj) },
			DeleteFunc: func(obj any) { w.opts.OnEvent(policiesResource, "delete"); w.delete(obj) },
		})
		wg.Go(func() { cw.run(ctx) })
		synced, stores = append(synced, cw.hasSynced), append(stores, cw.indexer)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return stopped(ctx)
	}
	n := 0
	for _, st := range stores {
		n += len(st.ListKeys())
	}
	w.opts.Logger.Info("NetworkPolicy informer synced", "networkpolicies", n)
	<-ctx.Done()
	return nil
}

// trimPolicy is the informer's transform. It must be idempotent: client-go
// may run it on an object it already trimmed.
func trimPolicy(obj any) (any, error) {
	if np, ok := obj.(*networkingv1.NetworkPolicy); ok {
		return netpolicy.Trim(np), nil
	}
	return obj, nil
}

func (w *PolicyWatcher) deliver(obj any) {
	p, ok := obj.(*netpolicy.Policy)
	if !ok {
		w.opts.Logger.Error("Ignoring unexpected object in the NetworkPolicy watch", "type", fmt.Sprintf("%T", obj))
		return
	}
	w.handler.Policy(p)
}

func (w *PolicyWatcher) delete(obj any) {
	var key string
	switch o := obj.(type) {
	case *netpolicy.Policy:
		key = o.Key()
	case cache.DeletedFinalStateUnknown:
		// Deleted while the watch was down.
		key = o.Key
	default:
		w.opts.Logger.Error("Ignoring unexpected object in the NetworkPolicy watch", "type", fmt.Sprintf("%T", obj))
		return
	}
	ns, name, _ := strings.Cut(key, "/")
	w.handler.PolicyDeleted(ns, name)
}

// internLabels copies a pod's labels with each key and value interned: the
// same keys, and mostly the same values, repeat on every pod of a
// workload, and the copy then costs the map, not the strings.
func internLabels(l map[string]string) map[string]string {
	if len(l) == 0 {
		return nil
	}
	out := make(map[string]string, len(l))
	for k, v := range l {
		out[unique.Make(k).Value()] = unique.Make(v).Value()
	}
	return out
}
