//go:build linux || darwin

package probe

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The load bound: at 100ms periods a node with 110 pods (the
// kubelet's default maxPods) makes 1,100 probes/s.
const (
	loadPods   = 110
	loadPeriod = 100 * time.Millisecond
	// serversEnv makes the test binary TestHelperProbeServers' child.
	serversEnv = "PODSLO_PROBE_HELPER_SERVERS"
)

// TestHelperProbeServers is not a test: BenchmarkLoad1100 runs the test
// binary again for it, so that the probed servers' CPU is another process's.
// It serves $PODSLO_PROBE_HELPER_SERVERS HTTP servers on 127.0.0.1, prints
// "listening <addr>" for each, and returns when its stdin closes.
func TestHelperProbeServers(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv(serversEnv))
	if err != nil {
		t.Skip("only run by BenchmarkLoad1100")
	}
	ready := func(http.ResponseWriter, *http.Request) {}
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(ready), ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(l) }()
		fmt.Println("listening", l.Addr())
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// startProbeServers starts TestHelperProbeServers in a child process, killed
// when the benchmark ends, and returns its servers' targets.
func startProbeServers(b *testing.B, n int) []Target {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProbeServers$")
	cmd.Env = append(os.Environ(), serversEnv+"="+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatalf("start the probe servers: %v", err)
	}
	b.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	var targets []Target
	lines := bufio.NewScanner(stdout)
	for len(targets) < n && lines.Scan() {
		if addr, ok := strings.CutPrefix(lines.Text(), "listening "); ok {
			targets = append(targets, targetAt(b, addr))
		}
	}
	if len(targets) < n {
		b.Fatalf("the probe servers printed %d of %d addresses: %v", len(targets), n, lines.Err())
	}
	return targets
}

// cpuTime is this process's user plus system CPU time; the child serving
// the probes is not in it.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkLoad1100 measures the agent's side of the load bound:
// 110 workers, each probing its own HTTP server (in a child process) every
// 100ms with one shared Prober. One op is one second of that; run it with
// -benchtime=5x for 5 s. It reports the probes/s achieved, the agent's CPU per
// probe and its CPU in cores, and per-probe allocations.
func BenchmarkLoad1100(b *testing.B) {
	targets := startProbeServers(b, loadPods)
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
	cpu0 := cpuTime(b)
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
	cpu := cpuTime(b) - cpu0
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
