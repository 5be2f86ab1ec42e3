package collectors

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podslo/podslo/netpolicy"
)

// BenchmarkScrapeNetworkPolicies renders /metrics, text format, with 10k
// NetworkPolicies judged against a profile, with and without counting the
// pods they select among 10k pods (100 namespaces of 100 pods).
func BenchmarkScrapeNetworkPolicies(b *testing.B) {
	profile := &netpolicy.Profile{Name: "example-cni", MaxVersion: 8, Unimplemented: netpolicy.Features(netpolicy.Egress)}
	for _, count := range []bool{false, true} {
		b.Run(fmt.Sprintf("target-pods=%v", count), func(b *testing.B) {
			state := netpolicy.NewState(count)
			for i := range 10_000 {
				ns := fmt.Sprintf("team-%03d", i%100)
				state.Policy(netpolicy.Trim(&networkingv1.NetworkPolicy{
					ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("allow-%05d", i)},
					Spec: networkingv1.NetworkPolicySpec{
						PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": fmt.Sprint(i % 10)}},
						PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
					},
				}))
				state.PodLabels(ns, fmt.Sprintf("web-%05d", i), map[string]string{"app": fmt.Sprint(i % 10), "pod-template-hash": "7d9f8b6c5d"})
			}
			reg := prometheus.NewRegistry()
			reg.MustRegister(NewNetworkPolicies(state, profile))
			h := Handler(reg, nil, nil, discard)
			req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
			req.Header.Set("Accept", "text/plain")
			var size int
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("status %d", rec.Code)
				}
				size = rec.Body.Len()
			}
			b.ReportMetric(float64(size), "body-bytes")
		})
	}
}
