package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	eventrecord "k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/retry"
	"k8s.io/client-go/util/workqueue"

	"github.com/podslo/podslo/agent/probe"
	"github.com/podslo/podslo/conditions"
)

const (
	// fieldManager names the agent in managedFields, apart from the kubelet
	// and from the exporter, which share the podslo user agent.
	fieldManager = "podslo-agent"
	// workers sync pods in parallel; a node's pods are few, and the queue
	// never hands one pod to two workers.
	workers = 2
	// byController indexes the node's pods by their controller's UID, so that
	// a changed minReadySeconds reaches exactly the pods it applies to.
	byController = "controllerUID"
)

// podMemory is what the agent keeps of one pod between syncs, in memory.
type podMemory struct {
	// uid tells a pod recreated under the same name (a StatefulSet's) from
	// the one remembered.
	uid types.UID
	// stable is nil until the agent has decided once for this pod.
	stable *streak
	// warnedAnnotation is the bad annotation value already logged, so that
	// each bad value is logged once, not at every status update.
	warnedAnnotation string
}

// controller keeps the Stable condition of one node's pods.
type controller struct {
	node   string
	client kubernetes.Interface
	owner  conditions.Owner
	stable corev1.PodConditionType
	log    *slog.Logger
	m      *metrics

	podFactory, ownerFactory informers.SharedInformerFactory
	pods                     cache.SharedIndexInformer
	owners                   owners
	hasSynced                []cache.InformerSynced
	queue                    workqueue.TypedRateLimitingInterface[string]

	mu sync.Mutex
	// memory is keyed like the queue, so that the sync that finds a pod
	// gone is the one that forgets it.
	memory map[string]*podMemory

	synced atomic.Bool

	// probes runs the readiness probes of the node's annotated pods.
	probes *probeWorkers
}

// newController builds the controller from the validated options and the
// owners of the Stable and probe condition types, which New parsed.
func newController(client kubernetes.Interface, o *Options, owner, probeOwner conditions.Owner, m *metrics, pm *probeMetrics, events eventrecord.EventRecorder) (*controller, error) {
	c := &controller{
		node:   o.NodeName,
		client: client,
		owner:  owner,
		stable: corev1.PodConditionType(o.StableConditionType),
		log:    o.Logger,
		m:      m,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "podslo-agent"}),
		memory: map[string]*podMemory{},
	}
	// The field selector is the agent's first boundary: the API server sends
	// it this node's pods only.
	c.podFactory = informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", o.NodeName).String()
		}),
		informers.WithTransform(trimPod))
	c.ownerFactory = informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(trimOwner))

	c.pods = c.podFactory.Core().V1().Pods().Informer()
	if err := c.pods.AddIndexers(cache.Indexers{byController: indexByController}); err != nil {
		return nil, fmt.Errorf("index pods by controller: %w", err)
	}
	c.probes = &probeWorkers{
		node:       o.NodeName,
		client:     client,
		owner:      probeOwner,
		condType:   corev1.PodConditionType(o.ProbeConditionType),
		minPeriod:  o.MinProbePeriod,
		maxWorkers: o.MaxProbeWorkers,
		probes:     probe.NewProber(),
		events:     events,
		log:        o.Logger,
		m:          pm,
		pods:       c.pods.GetIndexer(),
		workers:    map[string]*probeWorker{},
		reported:   map[string]reportedProbe{},
		waiting:    map[string]struct{}{},
	}
	if _, err := c.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.probes.observe,
		UpdateFunc: func(_, obj any) { c.probes.observe(obj) },
		DeleteFunc: c.probes.deleted,
	}); err != nil {
		return nil, fmt.Errorf("watch pods for probes: %w", err)
	}
	if _, err := c.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: c.enqueue,
	}); err != nil {
		return nil, fmt.Errorf("watch pods: %w", err)
	}
	rs := c.ownerFactory.Apps().V1().ReplicaSets()
	sts := c.ownerFactory.Apps().V1().StatefulSets()
	ds := c.ownerFactory.Apps().V1().DaemonSets()
	c.owners = owners{replicaSets: rs.Lister(), statefulSets: sts.Lister(), daemonSets: ds.Lister()}
	c.hasSynced = []cache.InformerSynced{c.pods.HasSynced}
	for resource, inf := range map[string]cache.SharedIndexInformer{"replicasets": rs.Informer(), "statefulsets": sts.Informer(), "daemonsets": ds.Informer()} {
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: c.enqueueOwned,
			UpdateFunc: func(old, obj any) {
				if minReadySecondsOf(old) != minReadySecondsOf(obj) {
					c.enqueueOwned(obj)
				}
			},
			DeleteFunc: c.enqueueOwned,
		}); err != nil {
			return nil, fmt.Errorf("watch %s: %w", resource, err)
		}
		c.hasSynced = append(c.hasSynced, inf.HasSynced)
	}
	return c, nil
}

// run syncs pods until ctx ends. Workers start once every cache has synced,
// so that the first decision already sees each pod's owner.
func (c *controller) run(ctx context.Context) error {
	defer c.queue.ShutDown()
	c.probes.begin(ctx)
	defer c.probes.stop()
	c.podFactory.Start(ctx.Done())
	c.ownerFactory.Start(ctx.Done())
	defer c.podFactory.Shutdown()
	defer c.ownerFactory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), c.hasSynced...) {
		if err := ctx.Err(); err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("wait for informer caches: %w", err)
		}
		return nil
	}
	c.log.Info("Informer caches synced", "node", c.node, "pods", len(c.pods.GetStore().ListKeys()))
	c.synced.Store(true)

	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for c.processNext(ctx) {
			}
		})
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	return nil
}

func (c *controller) processNext(ctx context.Context) bool {
	key, shutdown := c.queue.Get()
	if shutdown {
		return false
	}
	defer c.queue.Done(key)
	err := c.sync(ctx, key)
	switch {
	case err == nil:
		c.queue.Forget(key)
	case errors.Is(err, ErrNotOnNode):
		// Retrying cannot help; the field selector makes this a bug.
		c.queue.Forget(key)
		c.log.Error("Refused to write a pod of another node", "pod", key, "node", c.node, "err", err)
	case ctx.Err() != nil:
		// Shutting down: the error is the cancellation, not the pod's.
	default:
		c.queue.AddRateLimited(key)
		c.log.Error("Writing pod conditions failed, will retry", "pod", key, "err", err)
	}
	return true
}

func (c *controller) enqueue(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		c.log.Error("Ignoring a pod event without a key", "err", err)
		return
	}
	c.queue.Add(key)
}

func (c *controller) enqueueOwned(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	owner, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	pods, err := c.pods.GetIndexer().ByIndex(byController, string(owner.GetUID()))
	if err != nil {
		c.log.Error("Looking up the pods of an owner failed", "owner", owner.GetNamespace()+"/"+owner.GetName(), "err", err)
		return
	}
	for _, p := range pods {
		c.enqueue(p)
	}
}

// sync brings one pod's Stable condition up to date, and arms a timer for
// the pod's deadline: a pod that stays Ready sends no update when it
// becomes stable.
func (c *controller) sync(ctx context.Context, key string) error {
	obj, exists, err := c.pods.GetIndexer().GetByKey(key)
	if err != nil {
		return fmt.Errorf("get pod %s from cache: %w", key, err)
	}
	if !exists {
		c.mu.Lock()
		delete(c.memory, key)
		c.mu.Unlock()
		return nil
	}
	pod := obj.(*corev1.Pod)
	uid := pod.UID
	var deadline time.Time
	first := true
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if !first {
			// The cache lags behind the write that just lost: read the pod
			// the conflict was against.
			live, err := c.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("get pod %s after a conflict: %w", key, err)
			}
			if live.UID != uid {
				// A new pod under the old name: its own events bring it.
				return nil
			}
			pod = live
		}
		first = false
		next, dl, err := c.plan(key, pod)
		deadline = dl
		if err != nil || next == nil {
			return err
		}
		return c.write(ctx, next)
	})
	if !deadline.IsZero() {
		c.queue.AddAfter(key, time.Until(deadline))
	}
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// plan decides the pod's Stable condition and returns a copy of the pod
// carrying it, or nil when nothing is to be written.
func (c *controller) plan(key string, pod *corev1.Pod) (*corev1.Pod, time.Time, error) {
	now := time.Now()
	c.mu.Lock()
	mem := c.memory[key]
	if mem == nil || mem.uid != pod.UID {
		mem = &podMemory{uid: pod.UID}
		c.memory[key] = mem
	}
	in := stableInput{
		pod:      readinessOf(pod),
		memory:   mem.stable,
		minReady: time.Duration(c.minReadySeconds(pod, mem)) * time.Second,
		now:      now,
	}
	if prev, ok := conditions.GetPod(pod.Status.Conditions, c.stable); ok {
		in.prev = &prev
	}
	d := decideStable(in)
	mem.stable = d.memory
	c.mu.Unlock()

	if d.want == nil {
		return nil, d.deadline, nil
	}
	// The cached pod is shared with every other reader of the informer.
	next := pod.DeepCopy()
	want := *d.want
	want.Type = c.stable
	changed, err := c.owner.SetPod(next, want, metav1.NewTime(d.at))
	if err != nil || !changed {
		return nil, d.deadline, err
	}
	c.log.Debug("Writing pod condition", "pod", key, "type", c.stable, "status", want.Status, "reason", want.Reason,
		"lastTransitionTime", d.at.UTC().Format(time.RFC3339), "minReadySeconds", in.minReady.Seconds())
	return next, d.deadline, nil
}

// minReadySeconds logs a bad annotation once per pod and value: the pod is
// synced at every status update, and one line says it all.
func (c *controller) minReadySeconds(pod *corev1.Pod, mem *podMemory) int32 {
	m := c.owners.minReadySeconds(pod)
	if m.badAnnotation == nil {
		mem.warnedAnnotation = ""
		return m.seconds
	}
	if v := pod.Annotations[MinReadySecondsAnnotation]; v != mem.warnedAnnotation {
		mem.warnedAnnotation = v
		c.log.Warn("Ignoring the pod's minReadySeconds annotation", "pod", pod.Namespace+"/"+pod.Name,
			"annotation", MinReadySecondsAnnotation, "value", v, "minReadySeconds", m.seconds, "from", m.from, "err", m.badAnnotation)
	}
	return m.seconds
}

// write sends the pod's owned conditions, and nothing else, in a
// strategic-merge PATCH on pods/status. The pod's resourceVersion rides
// along as a precondition: a decision made on a stale copy (Ready dropped
// meanwhile, say) must fail with a conflict rather than land.
func (c *controller) write(ctx context.Context, pod *corev1.Pod) error {
	var owned []string
	for _, cond := range pod.Status.Conditions {
		if c.owner.Owns(string(cond.Type)) {
			owned = append(owned, string(cond.Type))
		}
	}
	if pod.Spec.NodeName != c.node {
		c.m.written(owned, resultRefused)
		return fmt.Errorf("write pod %s/%s bound to node %q from node %q: %w", pod.Namespace, pod.Name, pod.Spec.NodeName, c.node, ErrNotOnNode)
	}
	body, err := c.owner.PodStatusPatch(pod.Status.Conditions)
	if err != nil {
		return fmt.Errorf("write pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if body, err = withResourceVersion(body, pod.ResourceVersion); err != nil {
		return fmt.Errorf("write pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	start := time.Now()
	_, err = c.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, body,
		metav1.PatchOptions{FieldManager: fieldManager}, "status")
	c.m.duration.Observe(time.Since(start).Seconds())
	c.m.written(owned, resultOf(err))
	if err != nil {
		return fmt.Errorf("patch status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

func withResourceVersion(patch []byte, resourceVersion string) ([]byte, error) {
	var body map[string]any
	if err := json.Unmarshal(patch, &body); err != nil {
		return nil, fmt.Errorf("add resourceVersion to patch: %w", err)
	}
	body["metadata"] = map[string]any{"resourceVersion": resourceVersion}
	out, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("add resourceVersion to patch: %w", err)
	}
	return out, nil
}

func indexByController(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	if ref := metav1.GetControllerOf(pod); ref != nil {
		return []string{string(ref.UID)}, nil
	}
	return nil, nil
}

// trimPod drops managedFields, the largest part of a pod that the agent
// never reads.
func trimPod(obj any) (any, error) {
	if pod, ok := obj.(*corev1.Pod); ok {
		pod.ManagedFields = nil
	}
	return obj, nil
}

// trimOwner keeps of each ReplicaSet, StatefulSet and DaemonSet only what
// the agent reads: every agent caches them all, cluster-wide, and their pod
// templates would otherwise dominate its memory.
func trimOwner(obj any) (any, error) {
	meta := func(m metav1.ObjectMeta) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion}
	}
	switch o := obj.(type) {
	case *appsv1.ReplicaSet:
		return &appsv1.ReplicaSet{ObjectMeta: meta(o.ObjectMeta), Spec: appsv1.ReplicaSetSpec{MinReadySeconds: o.Spec.MinReadySeconds}}, nil
	case *appsv1.StatefulSet:
		return &appsv1.StatefulSet{ObjectMeta: meta(o.ObjectMeta), Spec: appsv1.StatefulSetSpec{MinReadySeconds: o.Spec.MinReadySeconds}}, nil
	case *appsv1.DaemonSet:
		return &appsv1.DaemonSet{ObjectMeta: meta(o.ObjectMeta), Spec: appsv1.DaemonSetSpec{MinReadySeconds: o.Spec.MinReadySeconds}}, nil
	}
	return obj, nil
}

func minReadySecondsOf(obj any) int32 {
	switch o := obj.(type) {
	case *appsv1.ReplicaSet:
		return o.Spec.MinReadySeconds
	case *appsv1.StatefulSet:
		return o.Spec.MinReadySeconds
	case *appsv1.DaemonSet:
		return o.Spec.MinReadySeconds
	}
	return 0
}
