package informers

import (
	"fmt"
	"runtime"
	"testing"

	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/podslo/podslo/internal/kube/kubetest"
	"github.com/podslo/podslo/netpolicy"
)

// benchPolicy is a realistic NetworkPolicy as the API server sends it:
// labels, the kubectl last-applied annotation, managed fields, and two
// ingress rules and an egress rule that the trim reduces to a bitset.
func benchPolicy(i int) *networkingv1.NetworkPolicy {
	tcp := corev1.ProtocolTCP
	port, dns := intstr.FromInt32(8080), intstr.FromInt32(53)
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("allow-web-%05d", i), Namespace: fmt.Sprintf("team-%03d", i%300), UID: types.UID(uuid.NewString()),
			ResourceVersion: fmt.Sprint(1000 + i), Generation: 1,
			Labels:        map[string]string{"app.kubernetes.io/name": "web", "app.kubernetes.io/managed-by": "Helm"},
			Annotations:   map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"name":"allow-web"},"spec":{"podSelector":{"matchLabels":{"app":"web"}}}}`},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl-client-side-apply", Operation: "Update", APIVersion: "networking.k8s.io/v1"}},
		},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "web", "tier": "frontend"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{
				{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "ingress-nginx"}}}},
					Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}}},
				{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "prometheus"}}, NamespaceSelector: &metav1.LabelSelector{}}}},
			},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.96.0.0/12"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &dns}},
			}},
		},
	}
}

// BenchmarkPolicyMemory reports the live heap that 10k NetworkPolicies add
// to the exporter: what the policy informer's cache (an indexer with the
// namespace index, as a shared informer keeps) and netpolicy.State hold,
// trimmed. The bound is 10 MB.
func BenchmarkPolicyMemory(b *testing.B) {
	const n = 10_000
	b.ReportAllocs()
	for range b.N {
		indexer := cache.NewIndexer(cache.DeletionHandlingMetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		state := netpolicy.NewState(false)
		w := NewPolicyWatcher(kubetest.Wrap(fake.NewClientset()), state, PolicyOptions{})
		before := heapInUse()
		for i := range n {
			p, _ := trimPolicy(benchPolicy(i))
			if err := indexer.Add(p); err != nil {
				b.Fatal(err)
			}
			w.deliver(p)
		}
		after := heapInUse()
		runtime.KeepAlive(indexer)
		runtime.KeepAlive(state)
		if mb := float64(after-before) / (1 << 20); mb > 10 {
			b.Errorf("10k NetworkPolicies take %.1f MB of heap, over the 10 MB bound", mb)
		}
		b.ReportMetric(float64(after-before)/(1<<20), "heap-MB/10k-policies")
		b.ReportMetric(float64(after-before)/n, "heap-B/policy")
	}
}

// BenchmarkTargetPodLabels reports what --networkpolicy-target-pods costs
// per pod: every label kept (interned) in netpolicy.State. benchPod has the
// three labels of a Deployment's pod.
func BenchmarkTargetPodLabels(b *testing.B) {
	const n = 100_000
	b.ReportAllocs()
	for range b.N {
		state := netpolicy.NewState(true)
		w, err := New(kubetest.Wrap(fake.NewClientset()), &recorder{}, Options{PodLabelsHandler: state})
		if err != nil {
			b.Fatal(err)
		}
		before := heapInUse()
		for i := range n {
			pod := w.trim.mustPod(benchPod(i))
			state.PodLabels(pod.Namespace, pod.Name, pod.Labels)
		}
		after := heapInUse()
		runtime.KeepAlive(state)
		b.ReportMetric(float64(after-before)/n, "heap-B/pod")
	}
}
