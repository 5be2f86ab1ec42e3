package collectors

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/store"
)

// BenchmarkScrape renders /metrics, text format, for n started pods spread
// over 3 runtime classes and 4 storage classes, with and without per-pod
// series. Each pod has what a started pod has: a creation and a readiness
// latency and a re-creation count, so three per-pod series.
func BenchmarkScrape(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		s, err := store.Open(store.Options{Dir: store.InMemory})
		if err != nil {
			b.Fatal(err)
		}
		runtimes := []string{"none", "kata", "gvisor"}
		storages := []string{"none", "fast", "slow", "fast,slow"}
		for i := range n {
			rc, sc := runtimes[i%3], storages[i%4]
			err := s.Apply(store.Change{
				UID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i)),
				Meta: &store.PodMeta{Namespace: fmt.Sprintf("team-%d", i%50), Name: fmt.Sprintf("web-7d9f8b6c5d-%06d", i), Node: fmt.Sprintf("node-%03d", i%500),
					RuntimeClass: rc, StorageClass: sc, PodLabels: []string{"web"}},
				State: lifecycle.State{Scheduled: 98, FirstSandboxReady: 100, LastSandboxReady: 100, SandboxCreationMs: int32(i%30) * 1000, HasSandboxCreation: true,
					FirstReady: 104, ReadinessMs: int32(i%5) * 1000, HasReadiness: true},
				Observe: []store.Sample{
					{Family: "sandbox_creation", Labels: []string{rc, sc}, Value: float64(i % 30)},
					{Family: "readiness", Labels: []string{rc, sc}, Value: float64(i % 5)},
				},
			})
			if err != nil {
				b.Fatal(err)
			}
		}
		for _, perPod := range []bool{true, false} {
			for _, enc := range []string{"identity", "gzip"} {
				b.Run(fmt.Sprintf("pods=%d/per-pod=%t/%s", n, perPod, enc), func(b *testing.B) {
					reg := prometheus.NewRegistry()
					labels := Labels{Pod: []string{"app"}}
					reg.MustRegister(NewSLIs(s, labels, discard), NewSkipped(s, labels, discard), NewSelf(s))
					var pp *PerPod
					if perPod {
						pp = NewPerPod(s, labels, nil)
					}
					h := Handler(reg, pp, nil, discard)
					req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
					req.Header.Set("Accept", "text/plain")
					if enc == "gzip" {
						// As Prometheus asks.
						req.Header.Set("Accept-Encoding", "gzip")
					}
					var w countingWriter
					b.ReportAllocs()
					b.ResetTimer()
					for range b.N {
						w = countingWriter{header: http.Header{}}
						h.ServeHTTP(&w, req)
						if w.code != http.StatusOK {
							b.Fatalf("status %d", w.code)
						}
					}
					b.ReportMetric(float64(w.n), "body-bytes")
				})
			}
		}
		_ = s.Close()
	}
}

// countingWriter is a ResponseWriter that counts the body and keeps none
// of it, as a network connection does: a recorder's growing buffer would
// be most of the allocations measured.
type countingWriter struct {
	header http.Header
	code   int
	n      int
}

func (w *countingWriter) Header() http.Header { return w.header }

func (w *countingWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.n += len(p)
	return len(p), nil
}
