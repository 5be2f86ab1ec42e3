package informers

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/podslo/podslo/internal/kube/kubetest"
	"github.com/podslo/podslo/netpolicy"
)

// policyRecorder records what the policy and pod-label handlers receive.
type policyRecorder struct {
	mu    sync.Mutex
	calls []string
}

func (r *policyRecorder) add(s string) { r.mu.Lock(); r.calls = append(r.calls, s); r.mu.Unlock() }
func (r *policyRecorder) Policy(p *netpolicy.Policy) {
	r.add("policy " + p.Key() + " " + p.MinVersion().String() + " " + p.Features.String())
}
func (r *policyRecorder) PolicyDeleted(ns, name string) { r.add("policy deleted " + ns + "/" + name) }
func (r *policyRecorder) PodLabels(ns, name string, l map[string]string) {
	r.add("labels " + ns + "/" + name + " " + metav1.FormatLabelSelector(&metav1.LabelSelector{MatchLabels: l}))
}
func (r *policyRecorder) PodDeleted(ns, name string) { r.add("pod deleted " + ns + "/" + name) }
func (r *policyRecorder) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.calls...)
}

func TestPolicyWatcher(t *testing.T) {
	client := fake.NewClientset()
	rec := &policyRecorder{}
	events := map[string]int{}
	var mu sync.Mutex
	w := NewPolicyWatcher(kubetest.Wrap(client), rec, PolicyOptions{OnEvent: func(res, ev string) { mu.Lock(); events[res+" "+ev]++; mu.Unlock() }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(30 * time.Second):
			t.Error("policy watcher did not stop")
		}
	})

	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p"}, Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	np, err := client.NetworkingV1().NetworkPolicies("a").Create(ctx, np, metav1.CreateOptions{})
	require.NoError(t, err)
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Equal(c, []string{"policy a/p 1.3 ingress"}, rec.get()) }, 30*time.Second, 10*time.Millisecond)
	np.Spec.PolicyTypes = append(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
	_, err = client.NetworkingV1().NetworkPolicies("a").Update(ctx, np, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, client.NetworkingV1().NetworkPolicies("a").Delete(ctx, "p", metav1.DeleteOptions{}))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, []string{"policy a/p 1.3 ingress", "policy a/p 1.8 ingress,egress", "policy deleted a/p"}, rec.get())
	}, 30*time.Second, 10*time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, map[string]int{"networkpolicies add": 1, "networkpolicies update": 1, "networkpolicies delete": 1}, events)
}

func TestPolicyDeletedWhileDown(t *testing.T) {
	rec := &policyRecorder{}
	w := NewPolicyWatcher(kubetest.Wrap(fake.NewClientset()), rec, PolicyOptions{})
	w.delete(cache.DeletedFinalStateUnknown{Key: "a/gone", Obj: &netpolicy.Policy{Namespace: "a", Name: "gone"}})
	w.delete("junk")
	assert.Equal(t, []string{"policy deleted a/gone"}, rec.get())
}

func TestTrimPolicyIdempotentAndKeyed(t *testing.T) {
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p", UID: "u", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
	once, err := trimPolicy(np)
	require.NoError(t, err)
	twice, err := trimPolicy(once)
	require.NoError(t, err)
	assert.Same(t, once, twice)
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(once)
	require.NoError(t, err)
	assert.Equal(t, "a/p", key, "the informer cache keys the trimmed policy")
}

// With a PodLabelsHandler the trim keeps every label and the handler sees
// each pod's, and each deletion, in order; without, only PodLabels.
func TestPodLabelsHandler(t *testing.T) {
	full := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1", Labels: map[string]string{"app": "web", "team": "a", "pod-template-hash": "abc"}}}
	rec := &policyRecorder{}
	w, err := New(kubetest.Wrap(fake.NewClientset()), &recorder{}, Options{PodLabels: []string{"team"}, PodLabelsHandler: rec})
	require.NoError(t, err)
	w.classes = *resolver(t)
	pw := newPodWatch("", nil)
	pod := w.trim.mustPod(full)
	assert.Equal(t, full.Labels, pod.Labels)
	w.processPodDelta(pw, cache.Delta{Type: cache.Added, Object: pod})
	relabelled := full.DeepCopy()
	relabelled.Labels = map[string]string{"app": "db"}
	w.processPodDelta(pw, cache.Delta{Type: cache.Updated, Object: w.trim.mustPod(relabelled)})
	w.processPodDelta(pw, cache.Delta{Type: cache.Deleted, Object: cache.DeletedFinalStateUnknown{Key: "ns/web", Obj: &podRef{Namespace: "ns", Name: "web", UID: "u1"}}})
	assert.Equal(t, []string{"labels ns/web app=web,pod-template-hash=abc,team=a", "labels ns/web app=db", "pod deleted ns/web"}, rec.get())

	without, err := New(kubetest.Wrap(fake.NewClientset()), &recorder{}, Options{PodLabels: []string{"team"}})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"team": "a"}, without.trim.mustPod(full).Labels)
}
