package scope

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/podslo/podslo/internal/kube"
)

// ErrShardingChanged means the autosharded StatefulSet's replicas changed:
// the exporter stops, and its restart applies the new total with the
// handover rules (the state must be reconciled at start, which is why
// podslo, unlike kube-state-metrics, does not reshard in place).
var ErrShardingChanged = errors.New("autosharded StatefulSet's replicas changed: restarting to apply the new total")

// Autoshard is where an autosharded exporter runs: its own pod
// (--pod, --pod-namespace, from the downward API).
type Autoshard struct {
	Pod, Namespace string
}

// Enabled reports whether the shard comes from the StatefulSet.
func (a Autoshard) Enabled() bool { return a.Pod != "" || a.Namespace != "" }

// Validate reports an incomplete autosharding setting.
func (a Autoshard) Validate() error {
	if a.Pod == "" && a.Namespace != "" || a.Pod != "" && a.Namespace == "" {
		return fmt.Errorf("--pod and --pod-namespace go together (autosharding), got --pod=%q --pod-namespace=%q", a.Pod, a.Namespace)
	}
	return nil
}

// Resolve reads the pod and the StatefulSet that controls it, as
// kube-state-metrics' autosharding does: the shard is the pod's ordinal,
// the total the StatefulSet's replicas. It needs get on pods and
// statefulsets in the pod's namespace.
func (a Autoshard) Resolve(ctx context.Context, client kube.Interface) (shard, total int, statefulSet string, err error) {
	obj, err := client.Get(ctx, kube.Pods, a.Namespace, a.Pod, metav1.GetOptions{})
	pod, _ := obj.(*corev1.Pod)
	if err == nil && pod == nil {
		err = fmt.Errorf("got a %T", obj)
	}
	if err != nil {
		return 0, 0, "", fmt.Errorf("autosharding: get own pod %s/%s: %w", a.Namespace, a.Pod, err)
	}
	ref := metav1.GetControllerOf(pod)
	if ref == nil || ref.Kind != "StatefulSet" || !strings.HasPrefix(ref.APIVersion, "apps/") {
		return 0, 0, "", fmt.Errorf("autosharding: pod %s/%s is not controlled by a StatefulSet", a.Namespace, a.Pod)
	}
	obj, err = client.Get(ctx, kube.StatefulSets, a.Namespace, ref.Name, metav1.GetOptions{})
	set, _ := obj.(*appsv1.StatefulSet)
	if err == nil && set == nil {
		err = fmt.Errorf("got a %T", obj)
	}
	if err != nil {
		return 0, 0, "", fmt.Errorf("autosharding: get StatefulSet %s/%s: %w", a.Namespace, ref.Name, err)
	}
	shard, total, err = fromStatefulSet(set, a.Pod)
	return shard, total, set.Name, err
}

func fromStatefulSet(set *appsv1.StatefulSet, pod string) (shard, total int, err error) {
	ordinal, ok := strings.CutPrefix(pod, set.Name+"-")
	n, perr := strconv.Atoi(ordinal)
	if !ok || perr != nil || n < 0 {
		return 0, 0, fmt.Errorf("autosharding: pod %q has no ordinal of StatefulSet %q", pod, set.Name)
	}
	total = 1
	if set.Spec.Replicas != nil {
		total = int(*set.Spec.Replicas)
	}
	if n >= total {
		// A pod above the replicas is being scaled away: it owns nothing.
		return 0, 0, fmt.Errorf("autosharding: pod %q has ordinal %d, past the StatefulSet's %d replicas (scaling down)", pod, n, total)
	}
	return n, total, nil
}

// WatchReplicas watches the StatefulSet and returns ErrShardingChanged once
// its replicas differ from total, or nil when ctx ends. It needs list and
// watch on statefulsets in the namespace.
func (a Autoshard) WatchReplicas(ctx context.Context, client kube.Interface, statefulSet string, total int) error {
	changed := make(chan struct{}, 1)
	check := func(obj any) {
		set, ok := obj.(*appsv1.StatefulSet)
		if !ok || set.Name != statefulSet {
			return
		}
		replicas := 1
		if set.Spec.Replicas != nil {
			replicas = int(*set.Spec.Replicas)
		}
		if replicas != total {
			select {
			case changed <- struct{}{}:
			default:
			}
		}
	}
	byName := fields.OneTermEqualSelector("metadata.name", statefulSet).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = byName
			return client.List(ctx, kube.StatefulSets, a.Namespace, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = byName
			return client.Watch(ctx, kube.StatefulSets, a.Namespace, o)
		},
	}
	// Streaming lists where the client supports them, as client-go's
	// generated informers.
	inf := cache.NewSharedIndexInformer(cache.ToListWatcherWithWatchListSemantics(lw, client), &appsv1.StatefulSet{}, 0, cache.Indexers{})
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    check,
		UpdateFunc: func(_, obj any) { check(obj) },
	}); err != nil {
		return fmt.Errorf("watch StatefulSet %s/%s: %w", a.Namespace, statefulSet, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { inf.RunWithContext(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	select {
	case <-ctx.Done():
		return nil
	case <-changed:
		return ErrShardingChanged
	}
}
