package demo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/podslo/podslo/agent"
	"github.com/podslo/podslo/agent/probe"
)

// The annotations deploy/kwok/pod-stages.yaml reads.
const (
	// SandboxAnnotation "slow" puts a kata pod in the configured tail,
	// "normal" keeps it out; without it the tail is random, 1 in 10.
	// "never" keeps any pod's sandbox from ever becoming ready.
	SandboxAnnotation = "kwok.podslo.io/sandbox"
	// SandboxCrashAnnotation makes the sandbox crash once, that many
	// seconds after the pod's Ready, and come back: a re-creation ("2,5"
	// crashes twice).
	SandboxCrashAnnotation = "kwok.podslo.io/sandbox-crash"
)

// Workload is what a demo runs: Deployments and StatefulSets of kwok pods,
// whose RuntimeClass, volumes and annotations choose their configured
// delays (deploy/kwok/README.md).
type Workload struct {
	// Namespace holds the workload. Default "demo".
	Namespace string
	Groups    []Group
}

// Group is one Deployment, or a StatefulSet when StorageClass is set.
type Group struct {
	Name     string
	Replicas int32
	// RuntimeClass is "runc", "kata" or "" (none).
	RuntimeClass string
	// StorageClass, when set, makes the group a StatefulSet with one PVC
	// per pod, each bound in advance to its own PersistentVolume: the class
	// has no provisioner.
	StorageClass string
	// Annotations go on the pods: the kwok stages' knobs.
	Annotations map[string]string
	// Probed pods get the agent's readiness gate and a readiness probe.
	Probed bool
	// MinReadySeconds feeds the agent's Stable condition.
	MinReadySeconds int32
	// TerminationGracePeriodSeconds is the pods' grace period; the stages
	// take their configured time whatever it is, so a short one makes
	// terminations that overrun it. Default 30.
	TerminationGracePeriodSeconds *int64
}

// DefaultWorkload is the `podslo demo` mix: fast runc pods, kata pods with
// their random tail, pods without a RuntimeClass, PVC-backed StatefulSets,
// sandboxes that crash and come back, and probed pods.
func DefaultWorkload() *Workload {
	return &Workload{Groups: []Group{
		{Name: "web", Replicas: 24, RuntimeClass: "runc", MinReadySeconds: 5},
		{Name: "api", Replicas: 8},
		{Name: "batch", Replicas: 8, RuntimeClass: "kata", MinReadySeconds: 5},
		{Name: "flaky", Replicas: 4, RuntimeClass: "runc", Annotations: map[string]string{SandboxCrashAnnotation: "3"}},
		{Name: "gated", Replicas: 4, RuntimeClass: "runc", Probed: true},
		{Name: "db", Replicas: 4, RuntimeClass: "runc", StorageClass: "standard", MinReadySeconds: 5},
		{Name: "vault", Replicas: 2, RuntimeClass: "kata", StorageClass: "standard"},
	}}
}

// Validate checks what the API server would refuse later, with less
// context.
func (w *Workload) Validate() error {
	var errs []error
	seen := map[string]bool{}
	for _, g := range w.Groups {
		if seen[g.Name] {
			errs = append(errs, fmt.Errorf("workload: group %q twice", g.Name))
		}
		seen[g.Name] = true
		if g.Replicas < 0 {
			errs = append(errs, fmt.Errorf("workload: group %q: negative replicas", g.Name))
		}
		if g.RuntimeClass != "" && g.RuntimeClass != "runc" && g.RuntimeClass != "kata" {
			errs = append(errs, fmt.Errorf("workload: group %q: runtime class %q is none of runc, kata (deploy/kwok/classes.yaml)", g.Name, g.RuntimeClass))
		}
	}
	return errors.Join(errs...)
}

func (w *Workload) namespace() string {
	if w.Namespace == "" {
		return "demo"
	}
	return w.Namespace
}

// readinessProbe is every demo container's: the kwok stages make a
// container with a readiness probe ready its initialDelaySeconds after it
// started, and one without in the same update as its start (as the real
// kubelet does), so that the readiness SLI shows the configured 2 s of
// deploy/kwok/README.md rather than 0.
var readinessProbe = &corev1.Probe{
	ProbeHandler:        corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}},
	InitialDelaySeconds: 2,
}

// probeAnnotation is a probe whose target, a kwok pod's IP, never answers:
// the agent probes, times out and writes the gate False, which is what a
// demo without real containers can show of it.
const probeAnnotation = `{"tcpSocket":{"port":8080},"periodSeconds":1,"timeoutSeconds":1,"failureThreshold":2}`

// NodeName is the name of the demo's i-th node.
func NodeName(i int) string { return "kwok-node-" + strconv.Itoa(i) }

// createNodes creates kwok's fake nodes and waits until they are Ready:
// the scheduler places nothing on a node that is not.
func createNodes(ctx context.Context, c kubernetes.Interface, n int) error {
	for i := range n {
		_, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:        NodeName(i),
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
			Labels:      map[string]string{"type": "kwok", "kubernetes.io/hostname": NodeName(i)},
		}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create node %s: %w", NodeName(i), err)
		}
	}
	return poll(ctx, time.Minute, func() (bool, error) {
		nodes, err := c.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: "type=kwok"})
		if err != nil {
			return false, nil
		}
		ready := 0
		for _, node := range nodes.Items {
			for _, cond := range node.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		return ready >= n, nil
	})
}

// createWorkload creates the namespace, the PersistentVolumes and the
// groups' Deployments and StatefulSets.
func createWorkload(ctx context.Context, c kubernetes.Interface, w *Workload) error {
	ns := w.namespace()
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", ns, err)
	}
	if err := createNetworkPolicies(ctx, c, ns); err != nil {
		return err
	}
	for _, g := range w.Groups {
		labels := map[string]string{"app.kubernetes.io/name": g.Name, "podslo.io/demo": "true"}
		annotations := map[string]string{}
		for k, v := range g.Annotations {
			annotations[k] = v
		}
		pod := corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10", ReadinessProbe: readinessProbe}},
			// The stages time termination; the grace period only bounds it.
			TerminationGracePeriodSeconds: ptr(int64(30)),
		}
		if g.TerminationGracePeriodSeconds != nil {
			pod.TerminationGracePeriodSeconds = g.TerminationGracePeriodSeconds
		}
		if g.RuntimeClass != "" {
			pod.RuntimeClassName = ptr(g.RuntimeClass)
		}
		if g.Probed {
			annotations[probe.Annotation] = probeAnnotation
			pod.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: agent.DefaultProbeConditionType}}
		}
		template := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations}, Spec: pod}
		selector := &metav1.LabelSelector{MatchLabels: labels}
		meta := metav1.ObjectMeta{Name: g.Name, Namespace: ns, Labels: labels}
		var err error
		if g.StorageClass == "" {
			_, err = c.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{
				Replicas: ptr(g.Replicas), Selector: selector, Template: template, MinReadySeconds: g.MinReadySeconds,
			}}, metav1.CreateOptions{})
		} else {
			if err := createVolumes(ctx, c, ns, g); err != nil {
				return err
			}
			claim := corev1.PersistentVolumeClaim{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					StorageClassName: ptr(g.StorageClass),
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}
			_, err = c.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{
				Replicas: ptr(g.Replicas), Selector: selector, Template: template, MinReadySeconds: g.MinReadySeconds,
				ServiceName: g.Name, PodManagementPolicy: appsv1.ParallelPodManagement,
				VolumeClaimTemplates: []corev1.PersistentVolumeClaim{claim},
			}}, metav1.CreateOptions{})
		}
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create group %s: %w", g.Name, err)
		}
	}
	return nil
}

// createVolumes creates one PersistentVolume per StatefulSet pod, bound in
// advance to the claim the StatefulSet will create for it.
func createVolumes(ctx context.Context, c kubernetes.Interface, ns string, g Group) error {
	for i := range g.Replicas {
		claim := "data-" + g.Name + "-" + strconv.Itoa(int(i))
		_, err := c.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + claim},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				StorageClassName:              g.StorageClass,
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/podslo-demo/" + claim}},
				ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: ns, Name: claim},
			},
		}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create the volume of %s/%s: %w", ns, claim, err)
		}
	}
	return nil
}

// churn deletes a random running pod of the workload every interval; its
// controller replaces it, so termination and creation are measured all the
// time, not only at start.
func churn(ctx context.Context, c kubernetes.Interface, ns string, every time.Duration) {
	if every < 0 {
		return
	}
	ticker := time.NewTicker(every)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "podslo.io/demo=true"})
		if err != nil || len(pods.Items) == 0 {
			continue
		}
		pod := pods.Items[rand.N(len(pods.Items))]
		if pod.DeletionTimestamp != nil || pod.Status.Phase != corev1.PodRunning {
			continue
		}
		_ = c.CoreV1().Pods(ns).Delete(ctx, pod.Name, metav1.DeleteOptions{})
	}
}

func ptr[T any](v T) *T { return &v }

// poll calls cond until it is true, it fails, or timeout passes.
func poll(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waited %s: %w", timeout, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// createNetworkPolicies creates two policies for the exporter to judge
// against deploy/kwok/network-plugin-profile.yaml (a plugin that knows
// NetworkPolicy up to 1.8): an ingress-only one it supports, and one that
// puts a podSelector and a namespaceSelector in one peer (1.11), which
// that plugin would misread (KEP-2136 Story 3).
func createNetworkPolicies(ctx context.Context, c kubernetes.Interface, ns string) error {
	demo := metav1.LabelSelector{MatchLabels: map[string]string{"podslo.io/demo": "true"}}
	for _, np := range []*networkingv1.NetworkPolicy{
		{
			ObjectMeta: metav1.ObjectMeta{Name: "allow-same-namespace", Namespace: ns},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: demo, Ingress: []networkingv1.NetworkPolicyIngressRule{
				{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}}}},
			}},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "allow-monitoring", Namespace: ns},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: demo, Ingress: []networkingv1.NetworkPolicyIngressRule{
				{From: []networkingv1.NetworkPolicyPeer{{
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "monitoring"}},
					PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "prometheus"}},
				}}},
			}},
		},
	} {
		if _, err := c.NetworkingV1().NetworkPolicies(ns).Create(ctx, np, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create networkpolicy %s/%s: %w", ns, np.Name, err)
		}
	}
	return nil
}
