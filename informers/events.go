package informers

import (
	"context"
	"fmt"
	"regexp"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/podslo/podslo/internal/kube"
)

// DefaultUserErrorEventRegex matches the kubelet's FailedMount messages for
// a Secret or ConfigMap that does not exist: the pod author's mistake, which
// KEP-3085 says to leave out of the SLIs.
//
// The KEP's form, `MountVolume.SetUp failed for volume "(secret|config-map)
// .*" : (secret|config-map) ".*" not found`, matches no real message: the
// volume name is the pod's own (e.g. "config"), and the kubelet writes
// `configmap "x" not found` (before 1.10-ish: `configmaps "x" not found`),
// never "config-map". Projected volumes list several errors in brackets.
// This form accepts all of those, and the KEP's own, and nothing else:
//
//	MountVolume.SetUp failed for volume "config" : configmap "app" not found
//	MountVolume.SetUp failed for volume "creds" : secret "db" not found
//	MountVolume.SetUp failed for volume "kube-api-access-x" : [configmap "a" not found, secret "b" not found]
const DefaultUserErrorEventRegex = `MountVolume\.SetUp failed for volume "[^"]*" : \[?(?:[^\]]*, )?(?:secrets?|configmaps?|config-map) "[^"]*" not found`

// failedMountSelector asks the API server for FailedMount events on pods
// only, so that the events cache holds nothing else.
var failedMountSelector = fields.AndSelectors(
	fields.OneTermEqualSelector("reason", "FailedMount"),
	fields.OneTermEqualSelector("involvedObject.kind", "Pod"),
).String()

// eventSelector is failedMountSelector narrowed by the scope's namespace
// selector. The API server cannot select events by the node or the shard
// of their pod: handleEvent drops those.
func eventSelector(namespaceSelector string) string {
	if namespaceSelector == "" {
		return failedMountSelector
	}
	return failedMountSelector + "," + namespaceSelector
}

// eventWatch is an event watch of one namespace (or of all) and one
// reason: FailedMount, or one of the image events (pulls.go).
// Like the pod watch it is a bare controller that tracks its currency: the
// creation-timeout check tells a timeout from a user error by these
// events, so it must also wait while this watch is down or relisting, or a
// user error whose event it has not received yet would count as the
// platform's timeout. It keeps the events' keys, not the events: nothing
// reads them again.
type eventWatch struct {
	keys    *podKeys
	current *currency
	ctrl    cache.Controller
}

// eventController returns the watch that feeds the FailedMount events of
// namespace (all for metav1.NamespaceAll) through handleEvent.
func (w *Watcher) eventController(namespace, selector string) *eventWatch {
	ew := &eventWatch{keys: newPodKeys(), current: newCurrency(time.Now, w.reach)}
	fifo := cache.NewDeltaFIFOWithOptions(cache.DeltaFIFOOptions{
		KnownObjects:          ew.keys,
		EmitDeltaTypeReplaced: true,
		Transformer:           w.trim.transform,
	})
	narrow := func(o metav1.ListOptions) metav1.ListOptions {
		o.FieldSelector = selector
		return o
	}
	list := func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		return w.client.List(ctx, kube.Events, namespace, narrow(o))
	}
	watchFunc := func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		return w.client.Watch(ctx, kube.Events, namespace, narrow(o))
	}
	ew.ctrl = trackedController(fifo, ew.current, trackedListWatch(ew.current, w.client, list, watchFunc), &corev1.Event{}, "events", func(d cache.Delta) { w.processEventDelta(ew, d) })
	return ew
}

func (w *Watcher) processEventDelta(ew *eventWatch, d cache.Delta) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(d.Object)
	if err != nil {
		w.log.Error("Ignoring an event without a key", "type", fmt.Sprintf("%T", d.Object), "err", err)
		return
	}
	if d.Type == cache.Deleted {
		ew.keys.remove(key)
		w.opts.OnEvent("events", "delete")
		return
	}
	ev, ok := d.Object.(*corev1.Event)
	if !ok {
		w.log.Error("Ignoring unexpected object in the event watch", "type", fmt.Sprintf("%T", d.Object))
		return
	}
	event, _ := ew.keys.set(key, ev.UID)
	w.opts.OnEvent("events", event)
	w.handleEvent(ev)
}

func (w *Watcher) handleEvent(obj any) {
	ev, ok := obj.(*corev1.Event)
	if !ok || ev.InvolvedObject.UID == "" {
		return
	}
	if !w.opts.Scope.OwnsUID(ev.InvolvedObject.UID) {
		// Another shard's pod.
		return
	}
	if n := w.opts.Scope.Node; n != "" && ev.Source.Host != "" && ev.Source.Host != n {
		// The kubelet of another node reported it: another node's pod.
		// Events without a host wait in the pipeline for a pod that never
		// comes, and expire.
		return
	}
	ref := ev.InvolvedObject.Namespace + "/" + ev.InvolvedObject.Name
	if ev.Reason != "FailedMount" {
		if e, ok := pullEvent(ev); ok {
			w.handler.ImagePull(ev.InvolvedObject.UID, ref, e)
		}
		return
	}
	if !w.userError.MatchString(ev.Message) {
		return
	}
	w.handler.UserError(ev.InvolvedObject.UID, ref)
}

// defaultUserErrorEvents is DefaultUserErrorEventRegex, compiled once.
var defaultUserErrorEvents = regexp.MustCompile(DefaultUserErrorEventRegex)
