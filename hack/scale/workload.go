package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/podslo/podslo/deploy/kwok"
	"github.com/podslo/podslo/hack/harness"
)

const (
	// namespaces spread the benchmark's pods; probeNamespace holds the pods
	// whose status the benchmark changes to time the exporters.
	namespaces     = 10
	probeNamespace = "scale-probe"
	// probeAnnotation marks the probe pods, which kwok leaves alone
	// (hack/scale/pod-stages.yaml).
	probeAnnotation = "podslo.io/scale-probe"
	// probeRuntimeClass is the probe pods' RuntimeClass, so that their
	// observations are told apart from the others' in aggregated series.
	probeRuntimeClass = "probe"
	// benchCondition is the pod condition the CPU measurement patches: an
	// update that changes nothing either exporter exports, as most of a
	// kubelet's status updates are.
	benchCondition = "podslo.io/ScaleBench"
)

func nodeName(i int) string     { return fmt.Sprintf("kwok-node-%04d", i) }
func podNamespace(i int) string { return fmt.Sprintf("scale-%02d", i%namespaces) }
func podName(i int) string      { return fmt.Sprintf("pod-%06d", i) }
func probeName(size int, method string, i int) string {
	return fmt.Sprintf("probe-%d-%s-%02d", size, method, i)
}

// workload creates and changes the benchmark's objects.
type workload struct {
	cs          *kubernetes.Clientset
	workers     int
	podsPerNode int
	nodes, pods int // created so far
}

// retry retries what an overloaded control plane refuses for a while.
func retry(ctx context.Context, fn func() error) error {
	return harness.Retry(ctx, harness.Overloaded, 21, fn)
}

// setUp creates deploy/kwok/classes.yaml's classes, the probe
// RuntimeClass, the namespaces and their default ServiceAccounts (there is
// no kube-controller-manager to create them, and admission refuses pods
// without).
func (w *workload) setUp(ctx context.Context, repo string) error {
	if err := kwok.ApplyClasses(ctx, w.cs, kwok.ClassesFile(repo)); err != nil {
		return err
	}
	_, err := w.cs.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{
		ObjectMeta: metav1.ObjectMeta{Name: probeRuntimeClass}, Handler: "runc",
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	names := []string{probeNamespace}
	for i := range namespaces {
		names = append(names, podNamespace(i))
	}
	return harness.CreateNamespaces(ctx, w.cs, names...)
}

// growNodes creates nodes up to n. kwok's node stages make them Ready and
// renew their leases.
func (w *workload) growNodes(ctx context.Context, n int) error {
	if n <= w.nodes {
		return nil
	}
	err := harness.Parallel(ctx, w.nodes, n, w.workers, func(ctx context.Context, i int) error {
		node := harness.Node(nodeName(i), int64(max(110, w.podsPerNode)))
		return retry(ctx, func() error {
			_, err := w.cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		})
	})
	if err == nil {
		w.nodes = n
	}
	return err
}

// benchPod is the benchmark's pod i on node: a Deployment's pod of one
// container, created bound (spec.nodeName) as there is no scheduler;
// kwok's stage writes PodScheduled. 8 in 10 run under RuntimeClass runc,
// 1 in 10 kata and 1 in 10 name no RuntimeClass.
func benchPod(i int, node string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      podName(i),
			Namespace: podNamespace(i),
			Labels: map[string]string{
				"app":               fmt.Sprintf("app-%03d", i%200),
				"pod-template-hash": "5d8f7c9b6d",
			},
		},
		Spec: corev1.PodSpec{
			NodeName: node,
			Containers: []corev1.Container{{
				Name:  "app",
				Image: "registry.example/app:1.0",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{
						corev1.ResourceCPU:    resource.MustParse("10m"),
						corev1.ResourceMemory: resource.MustParse("32Mi"),
					},
					Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")},
				},
			}},
		},
	}
	switch i % 10 {
	case 0:
		kata := "kata"
		pod.Spec.RuntimeClassName = &kata
	case 1:
	default:
		runc := "runc"
		pod.Spec.RuntimeClassName = &runc
	}
	return pod
}

// createPod creates pod and returns its UID.
func (w *workload) createPod(ctx context.Context, pod *corev1.Pod) (types.UID, error) {
	var uid types.UID
	err := retry(ctx, func() error {
		created, err := w.cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			created, err = w.cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		}
		if err == nil {
			uid = created.UID
		}
		return err
	})
	if err != nil {
		return "", fmt.Errorf("create pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return uid, nil
}

// bindPod binds a pod to node as kube-scheduler would: the binding
// subresource sets spec.nodeName and a PodScheduled=True condition.
func (w *workload) bindPod(ctx context.Context, namespace, name, node string) error {
	err := retry(ctx, func() error {
		err := w.cs.CoreV1().Pods(namespace).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
			Target:     corev1.ObjectReference{Kind: "Node", Name: node},
		}, metav1.CreateOptions{})
		if apierrors.IsConflict(err) { // bound already (a retried request)
			return nil
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("bind pod %s/%s: %w", namespace, name, err)
	}
	return nil
}

// growPods creates and binds pods up to n, one node per podsPerNode.
func (w *workload) growPods(ctx context.Context, n int) error {
	if n <= w.pods {
		return nil
	}
	err := harness.Parallel(ctx, w.pods, n, w.workers, func(ctx context.Context, i int) error {
		_, err := w.createPod(ctx, benchPod(i, nodeName(i/w.podsPerNode)))
		return err
	})
	if err == nil {
		w.pods = n
	}
	return err
}

// probePod is a pod whose status the benchmark changes itself: kwok
// leaves it alone, so it stays scheduled and pending until startProbe.
func probePod(name string) *corev1.Pod {
	rc := probeRuntimeClass
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   probeNamespace,
			Labels:      map[string]string{"app": "probe"},
			Annotations: map[string]string{probeAnnotation: "true"},
		},
		Spec: corev1.PodSpec{
			RuntimeClassName: &rc,
			Containers:       []corev1.Container{{Name: "app", Image: "registry.example/app:1.0"}},
		},
	}
}

// createProbes creates and binds the named probe pods: bound through the
// binding subresource, they have the PodScheduled condition that podslo's
// sandbox creation SLI counts from.
func (w *workload) createProbes(ctx context.Context, names []string) (map[string]types.UID, error) {
	uids := make([]types.UID, len(names))
	err := harness.Parallel(ctx, 0, len(names), w.workers, func(ctx context.Context, i int) error {
		uid, err := w.createPod(ctx, probePod(names[i]))
		if err != nil {
			return err
		}
		uids[i] = uid
		return w.bindPod(ctx, probeNamespace, names[i], nodeName(0))
	})
	if err != nil {
		return nil, err
	}
	out := map[string]types.UID{}
	for i, name := range names {
		out[name] = uids[i]
	}
	return out, nil
}

// startProbe is the status change the delays are measured from, written as
// a kubelet would: the sandbox ready, the container running, the pod Ready.
// Both exporters have something to show for it: podslo a sandbox creation
// (a per-pod series and an aggregated count), kube-state-metrics
// kube_pod_status_ready{condition="true"}.
func (w *workload) startProbe(ctx context.Context, name string) error {
	now := metav1.Now().UTC().Format(time.RFC3339)
	patch := fmt.Sprintf(`{"status":{"phase":"Running",
"conditions":[
 {"type":"PodReadyToStartContainers","status":"True","lastTransitionTime":%[1]q},
 {"type":"Initialized","status":"True","lastTransitionTime":%[1]q},
 {"type":"ContainersReady","status":"True","lastTransitionTime":%[1]q},
 {"type":"Ready","status":"True","lastTransitionTime":%[1]q}],
"containerStatuses":[{"name":"app","image":"registry.example/app:1.0","imageID":"","ready":true,"started":true,"restartCount":0,
 "state":{"running":{"startedAt":%[1]q}}}]}}`, now)
	_, err := w.cs.CoreV1().Pods(probeNamespace).Patch(ctx, name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
	return err
}

// touch patches benchCondition on the first n pods with a new message, so
// that every patch is a real update (an unchanged object is not written).
func (w *workload) touch(ctx context.Context, n int, message string) error {
	now := metav1.Now().UTC().Format(time.RFC3339)
	patch := []byte(fmt.Sprintf(`{"status":{"conditions":[{"type":%q,"status":"True","reason":"Touched","message":%q,"lastTransitionTime":%q}]}}`,
		benchCondition, message, now))
	return harness.Parallel(ctx, 0, min(n, w.pods), w.workers, func(ctx context.Context, i int) error {
		return retry(ctx, func() error {
			_, err := w.cs.CoreV1().Pods(podNamespace(i)).Patch(ctx, podName(i), types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
			return err
		})
	})
}
