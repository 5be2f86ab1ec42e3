package testenv

import (
	"context"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// CreateNamespace creates a namespace with labels (nil for none).
func CreateNamespace(t testing.TB, c kubernetes.Interface, name string, labels map[string]string) {
	t.Helper()
	_, err := c.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
}

// CreateNode creates a node object; no kubelet runs behind it.
func CreateNode(t testing.TB, c kubernetes.Interface, name string) {
	t.Helper()
	_, err := c.CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create node %s: %v", name, err)
	}
}

// ServiceAccountConfig returns a client config that authenticates as the
// service account ns/name, with a token from the TokenRequest API. With a
// pod, the token is bound to it as the kubelet's projected token is, and so
// names the pod's node (Kubernetes 1.32+); nil gives a token bound to
// nothing, which carries no node.
func (e *Env) ServiceAccountConfig(t testing.TB, ns, name string, pod *corev1.Pod) *rest.Config {
	t.Helper()
	req := &authenticationv1.TokenRequest{}
	if pod != nil {
		req.Spec.BoundObjectRef = &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID}
	}
	tok, err := e.Client.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), name, req, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of service account %s/%s: %v", ns, name, err)
	}
	// Hundreds of access reviews would take a minute at client-go's
	// default 5 requests per second.
	return &rest.Config{Host: e.Config.Host, BearerToken: tok.Status.Token, TLSClientConfig: rest.TLSClientConfig{CAData: e.Config.CAData}, QPS: 500, Burst: 500}
}

// ClientFor returns a clientset for cfg.
func ClientFor(t testing.TB, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return c
}

// PatchStableCondition writes a podslo.io/Stable condition on a pod's
// status as the agent does: a strategic-merge PATCH of pods/status, which
// admission sees as an UPDATE. The agent's node restriction judges exactly
// this request.
func PatchStableCondition(c kubernetes.Interface, ns, name string) error {
	body := `{"status":{"conditions":[{"type":"podslo.io/Stable","status":"False","reason":"NotReady","lastTransitionTime":"2026-01-02T03:04:05Z"}]}}`
	_, err := c.CoreV1().Pods(ns).Patch(context.Background(), name, types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{}, "status")
	return err
}
