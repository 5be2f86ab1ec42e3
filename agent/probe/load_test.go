//go:build linux || darwin

package probe

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/podslo/podslo/internal/testenv"
)

// The load bound: at 100ms periods a node with 110 pods (the
// kubelet's default maxPods) makes 1,100 probes/s.
const (
	loadPods   = 110
	loadPeriod = 100 * time.Millisecond
)

// TestHelperHealthServers is not a test: BenchmarkLoad1100 runs the test
// binary again for it, so that the probed servers' CPU is another process's.
func TestHelperHealthServers(t *testing.T) { testenv.HealthServersChild(t) }

// BenchmarkLoad1100 measures the agent's side of the load bound:
// 110 workers, each probing its own HTTP server (in a child process) every
// 100ms with one shared Prober. One op is one second of that; run it with
// -benchtime=5x for 5 s. It reports the probes/s achieved, the agent's CPU per
// probe and its CPU in cores, and per-probe allocations.
func BenchmarkLoad1100(b *testing.B) {
	var targets []Target
	for _, addr := range testenv.StartHealthServers(b, loadPods, 0) {
		targets = append(targets, targetAt(b, addr))
	}
	// 100ms period and timeout: the timeout must not exceed the period.
	probe := mustParse(b, `{"httpGet":{"port":1,"path":"/ready"},"periodSeconds":1,"periodMilliseconds":-900,"timeoutSeconds":1,"timeoutMilliseconds":-900}`)
	prober := NewProber()
	for _, target := range targets {
		if out := prober.Probe(b.Context(), probe, target); out.Result != Success {
			b.Fatalf("warm-up probe of %v: %s: %s", target, out.Result, out.Message)
		}
	}
	perWorker := b.N * int(time.Second/loadPeriod)
	b.ReportAllocs()

	var probes, failures, timeouts atomic.Int64
	var mem0, mem1 runtime.MemStats
	runtime.ReadMemStats(&mem0)
	cpu0 := testenv.CPUTime(b)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for i, target := range targets {
		wg.Go(func() {
			// Spread the workers over the period, as pods on a node did not
			// all start at the same instant.
			phase := time.NewTimer(loadPeriod * time.Duration(i) / time.Duration(len(targets)))
			<-phase.C
			tick := time.NewTicker(loadPeriod)
			defer tick.Stop()
			for n := range perWorker {
				switch prober.Probe(b.Context(), probe, target).Result {
				case Failure:
					failures.Add(1)
				case Timeout:
					timeouts.Add(1)
				}
				probes.Add(1)
				if n < perWorker-1 {
					<-tick.C
				}
			}
		})
	}
	wg.Wait()
	wall := time.Since(start)
	b.StopTimer()
	cpu := testenv.CPUTime(b) - cpu0
	runtime.ReadMemStats(&mem1)

	total := float64(probes.Load())
	b.ReportMetric(total/wall.Seconds(), "probes/s")
	b.ReportMetric(float64(cpu.Nanoseconds())/1e3/total, "cpu-us/probe")
	b.ReportMetric(cpu.Seconds()/wall.Seconds(), "cpu-cores")
	b.ReportMetric(float64(mem1.Mallocs-mem0.Mallocs)/total, "allocs/probe")
	b.ReportMetric(float64(mem1.TotalAlloc-mem0.TotalAlloc)/total, "B/probe")
	b.ReportMetric(float64(failures.Load()), "failures")
	b.ReportMetric(float64(timeouts.Load()), "timeouts")
}
