package store

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/podslo/podslo/lifecycle"
)

// BenchmarkWindowsMonth is the cost of the windowed counts after 30 days
// of a cluster of so many pods, each replaced once a day: every five
// minutes, pods/288 pods are created and deleted, and each observes into
// the families the default SLOs read (sandbox creation, termination,
// readiness and the start-up SLI, stateful or not; sandbox creation
// timeouts, one pod in a thousand), across 3 runtime classes × 3 storage
// classes: 54 series, the most the default SLOs read without histogram
// labels. The latencies spread over the classic buckets (log-normal), so
// the busier the cluster, the more buckets of a slot are not empty: the
// number of pods changes the cost through that alone. It reports the heap
// the windows hold (what dropping them frees), the heap the store grew by (after a GC, less what the just-opened store held: its
// one pod record and 54 cumulative series are a few KB of it), the bytes
// of the window records as written, and the state directory's size once
// closed. Run with -benchtime=1x; docs/benchmarks.md has the numbers.
func BenchmarkWindowsMonth(b *testing.B) {
	for _, pods := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("pods=%d", pods), func(b *testing.B) {
			for range b.N {
				windowsMonth(b, pods)
			}
		})
	}
}

func windowsMonth(b *testing.B, pods int) {
	dir := b.TempDir()
	start := time.Date(2026, 10, 30, 0, 0, 0, 0, time.UTC)
	c := &clock{t: start}
	s, err := Open(Options{Dir: dir, Now: c.now, Buckets: Buckets})
	if err != nil {
		b.Fatal(err)
	}
	// After Open: badger's memtables and caches are the store's cost at
	// any size, not the windows'.
	heapBefore := heapInUse()
	rng := rand.New(rand.NewPCG(1, 2))
	runtimes, storages := []string{"none", "runc", "kata"}, []string{"none", "fast", "slow"}
	perStep := max(1, pods/288)
	var uid uint64
	for step := range 30 * 24 * 12 {
		c.t = start.Add(time.Duration(step) * FineSlot)
		change := Change{UID: "bench", State: lifecycle.State{FirstSandboxReady: int64(step + 1)}}
		for range perStep {
			uid++
			labels := []string{runtimes[rng.IntN(3)], storages[rng.IntN(3)]}
			latency := func(median float64) float64 { return median * math.Exp(rng.NormFloat64()) }
			change.Observe = append(change.Observe,
				Sample{Family: "sandbox_creation", Labels: labels, Value: latency(1.5)},
				Sample{Family: "termination", Labels: labels, Value: latency(20)},
				Sample{Family: "readiness", Labels: labels, Value: latency(8)},
				Sample{Family: "pod_startup_sli", Labels: append(labels, fmt.Sprint(labels[1] != "none")), Value: latency(3)},
			)
			if uid%1000 == 0 {
				change.Add = append(change.Add, Sample{Family: "sandbox_creation_timeouts", Labels: labels, Value: 1})
			}
		}
		if err := s.Apply(change); err != nil {
			b.Fatal(err)
		}
		if step%12 == 11 {
			if err := s.CompactWindows(c.t); err != nil {
				b.Fatal(err)
			}
		}
	}
	var slots, recordBytes int
	for _, ss := range s.windows {
		for _, sl := range ss.slots {
			slots++
			recordBytes += len(aggregateKey(windowFamily(ss.family, time.Duration(sl.length)*time.Second, sl.start), joinLabels(ss.labels)))
			recordBytes += len(encodeAggregate(sl.counts.aggregate(len(s.opts.Buckets), sl.start), s.layout))
		}
	}
	heap := int64(heapInUse()) - int64(heapBefore)
	// What the windows alone hold: the heap they free.
	withWindows := heapInUse()
	s.mu.Lock()
	s.windows = nil
	s.mu.Unlock()
	windowsHeap := int64(withWindows) - int64(heapInUse())
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(slots), "slots")
	b.ReportMetric(float64(heap)/1e6, "heap-MB")
	b.ReportMetric(float64(windowsHeap)/1e6, "windows-heap-MB")
	b.ReportMetric(float64(recordBytes)/1e6, "records-MB")
	b.ReportMetric(float64(dirSize(b, dir))/1e6, "dir-MB")
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

func dirSize(b *testing.B, dir string) int64 {
	var n int64
	err := filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && !fi.IsDir() {
			n += fi.Size()
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	return n
}
