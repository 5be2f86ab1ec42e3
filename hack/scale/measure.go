package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/podslo/podslo/hack/harness"
)

const (
	// An exporter is quiet when it used less than quietCores over the
	// last quietWindow: it has handled every event sent to it.
	quietCores  = 0.05
	quietWindow = 5 * time.Second
	// Before an update burst every exporter must be idle, not only quiet:
	// at 50k pods, a first run found all three using ~0.06 cores for a
	// minute after the pods had settled (pod updates still trickling in),
	// which the idle measurement then charged as their idle cost. idleWait
	// bounds that wait; a run that times out says so in its log.
	idleCoresMax = 0.02
	idleWait     = 5 * time.Minute
	// idleWindow measures each exporter's CPU use with nothing happening,
	// before and after an update burst, to subtract from the burst's: at
	// 100k pods the idle use is of the same order as the updates'.
	idleWindow = 30 * time.Second
	// probeTimeout bounds one status-change measurement.
	probeTimeout = 2 * time.Minute
)

func run(ctx context.Context, o *Options, log *slog.Logger) (err error) {
	if o.Workdir == "" {
		if o.Workdir, err = os.MkdirTemp("", "scale-bench-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(o.Workdir, 0o755); err != nil {
		return err
	}
	if !o.Keep {
		defer os.RemoveAll(o.Workdir)
	}
	log.Info("Workdir", "path", o.Workdir)
	res := &Results{Started: time.Now().UTC(), Machine: harness.DescribeMachine(), Versions: describeVersions(ctx, o), Options: o}

	c := newCluster(o, log)
	defer c.Delete()
	if err := c.Create(ctx); err != nil {
		return err
	}
	log.Info("Cluster up", "kubeconfig", c.Kubeconfig)
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = o.QPS, o.Burst
	// Protobuf is cheaper than JSON for the API server to decode.
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	w := &workload{cs: cs, workers: o.Workers, podsPerNode: o.PodsPerNode}
	if err := w.setUp(ctx, o.Repo); err != nil {
		return fmt.Errorf("set up the cluster: %w", err)
	}

	procs, err := startExporters(o, c.Kubeconfig, log)
	defer func() {
		// An exporter that exited or was OOM-killed fails the run, also
		// when everything was measured.
		for _, p := range slices.Backward(procs) {
			err = errors.Join(err, p.stop())
		}
	}()
	if err != nil {
		return err
	}
	for _, p := range procs {
		if err := p.waitReady(ctx); err != nil {
			return err
		}
	}
	b := &bench{o: o, w: w, procs: procs, log: log}
	// Each exporter's memory with no pod to watch, once done starting.
	if _, err := b.quiet(ctx, procs); err != nil {
		return fmt.Errorf("at 0 pods: %w", err)
	}
	for _, p := range procs {
		rss, hwm, err := p.memory()
		if err != nil {
			return fmt.Errorf("%s at 0 pods: %w", p.Name, err)
		}
		file, err1 := statusBytes(p.cmd.Process.Pid, "RssFile")
		anon, err2 := statusBytes(p.cmd.Process.Pid, "RssAnon")
		if err := errors.Join(err1, err2); err != nil {
			return fmt.Errorf("%s at 0 pods: %w", p.Name, err)
		}
		res.Idle = append(res.Idle, IdleResult{Name: p.Name, RSSBytes: rss, PeakRSSBytes: hwm, FileRSSBytes: file, AnonRSSBytes: anon})
		log.Info("Idle", "exporter", p.Name, "rss", rss, "peakRSS", hwm, "fileRSS", file, "anonRSS", anon)
	}
	for _, size := range o.Sizes {
		sr, err := b.measure(ctx, size)
		// An exporter that died is the likely cause of an error, and must
		// not go on to the next size.
		for _, p := range procs {
			err = errors.Join(err, p.failure())
		}
		if sr != nil {
			res.Sizes = append(res.Sizes, *sr)
		}
		res.Finished = time.Now().UTC()
		// Written after every size, so that a run cut short keeps what it
		// measured.
		if werr := res.write(o.Out, o.Markdown); werr != nil {
			return errors.Join(err, werr)
		}
		if err != nil {
			return fmt.Errorf("at %d pods: %w", size, err)
		}
	}
	log.Info("Done", "results", o.Out, "table", o.Markdown)
	return nil
}

// bench holds what carries over from one size to the next.
type bench struct {
	o     *Options
	w     *workload
	procs []*process
	log   *slog.Logger
	// probesStarted counts probe pods made Ready: they count among the
	// Ready pods the exporters must show.
	probesStarted int
}

// proc is the exporter named name, nil if it does not run (kube-state-
// metrics with --ksm "").
func (b *bench) proc(name string) *process {
	for _, p := range b.procs {
		if p.Name == name {
			return p
		}
	}
	return nil
}

func (b *bench) measure(ctx context.Context, size int) (*SizeResult, error) {
	nodes := (size + b.o.PodsPerNode - 1) / b.o.PodsPerNode
	sr := &SizeResult{Pods: size, Nodes: nodes, LoadAvgStart: loadAvg()}
	log := b.log.With("pods", size)

	start := time.Now()
	if err := b.w.growNodes(ctx, nodes); err != nil {
		return nil, fmt.Errorf("create nodes: %w", err)
	}
	sr.Growth.PodsBefore = b.w.pods
	podsStart := time.Now()
	if err := b.w.growPods(ctx, size); err != nil {
		return nil, fmt.Errorf("create pods: %w", err)
	}
	sr.Growth.CreateSeconds = time.Since(podsStart).Seconds()
	sr.Growth.CreatedPerSecond = float64(size-sr.Growth.PodsBefore) / sr.Growth.CreateSeconds
	log.Info("Pods created and bound", "seconds", sr.Growth.CreateSeconds, "perSecond", sr.Growth.CreatedPerSecond)

	methods := b.methods()
	var names []string
	for _, m := range methods {
		for i := range b.o.Probes {
			names = append(names, probeName(size, m.key, i))
		}
	}
	uids, err := b.w.createProbes(ctx, names)
	if err != nil {
		return nil, fmt.Errorf("create probe pods: %w", err)
	}

	if err := b.settle(ctx, log); err != nil {
		return sr, err
	}
	sr.Growth.ReadySeconds = time.Since(start).Seconds()
	ready := b.w.pods + b.probesStarted

	results := map[string]*ExporterResult{}
	for _, p := range b.procs {
		r := &ExporterResult{Name: p.Name}
		results[p.Name] = r
		sr.Exporters = append(sr.Exporters, r)
		if r.RSSSettledBytes, _, err = p.memory(); err != nil {
			return sr, err
		}
		if p.memcg != nil {
			if r.Memcg, err = p.memcg.result(); err != nil {
				return sr, err
			}
			if r.Memcg.WorkingSetSettledBytes, err = p.memcg.workingSet(); err != nil {
				return sr, err
			}
		}
		if p.StateDir != "" {
			if r.StateDirBytes, r.StateDirDiskBytes, err = diskUsage(p.StateDir); err != nil {
				return sr, err
			}
		}
	}
	// What each exporter shows once settled: podslo must have observed
	// every Ready pod, kube-state-metrics must show each as Ready.
	for _, p := range b.procs {
		e, err := b.exposition(ctx, p, ready, 2*time.Second)
		if err != nil {
			return sr, err
		}
		results[p.Name].Series = e.Series
	}

	if err := b.cpuBurst(ctx, size, results, log); err != nil {
		return sr, err
	}
	if _, err := b.quiet(ctx, b.procs); err != nil {
		return sr, err
	}

	for _, p := range b.procs {
		r := results[p.Name]
		for range b.o.Scrapes {
			s, err := timedScrape(ctx, p.URL)
			if err != nil {
				// Once more: a failed scrape is not a slow one.
				log.Warn("Scrape failed, retrying", "exporter", p.Name, "err", err)
				s, err = timedScrape(ctx, p.URL)
			}
			if err != nil {
				return sr, fmt.Errorf("scrape %s: %w", p.Name, err)
			}
			r.Scrapes = append(r.Scrapes, s)
		}
		var secs []float64
		for _, s := range r.Scrapes {
			secs = append(secs, s.Seconds)
		}
		r.ScrapeP50, r.ScrapeP99 = quantile(secs, 0.5), quantile(secs, 0.99)
		log.Info("Scraped", "exporter", p.Name, "p50", r.ScrapeP50, "p99", r.ScrapeP99, "bytes", r.Scrapes[0].Bytes, "encoding", r.Scrapes[0].Encoding)
		if r.RSSAfterScrapesBytes, r.PeakRSSBytes, err = p.memory(); err != nil {
			return sr, err
		}
		if p.memcg != nil {
			// The figures since start, now; the settled working set
			// as read then.
			settled := r.Memcg.WorkingSetSettledBytes
			if r.Memcg, err = p.memcg.result(); err != nil {
				return sr, err
			}
			r.Memcg.WorkingSetSettledBytes = settled
			if r.Memcg.WorkingSetAfterScrapesBytes, err = p.memcg.workingSet(); err != nil {
				return sr, err
			}
		}
	}

	for _, m := range methods {
		d, err := b.delays(ctx, size, m, uids)
		if err != nil {
			return sr, err
		}
		sr.Delays = append(sr.Delays, d)
		log.Info("Status change to metric", "method", m.Observable, "p50", d.P50, "p99", d.P99, "missed", d.Missed)
	}
	if b.o.Restart {
		// Last, so that nothing else at this size is measured on a
		// restarted process. The next sizes measure the restarted ones:
		// their peak RSS and cgroup figures are since the restart.
		for _, p := range b.procs {
			rs, err := b.restart(ctx, p, log)
			if err != nil {
				return sr, fmt.Errorf("restart %s: %w", p.Name, err)
			}
			sr.Restarts = append(sr.Restarts, rs)
		}
	}
	sr.LoadAvgEnd = loadAvg()
	return sr, nil
}

// restart SIGKILLs p, as a node failure or the OOM killer would, and starts
// it again, podslo on the same state dir (in a new memory cgroup, as a
// restarted container gets one), then times it until ready (waitReady) and
// until /metrics shows every Ready pod, and reads its memory then and once
// quiet. The other exporters keep running.
func (b *bench) restart(ctx context.Context, p *process, log *slog.Logger) (RestartResult, error) {
	r := RestartResult{Name: p.Name}
	p.kill()
	// OOM kills before the SIGKILL are the run's failure, not the
	// restart's.
	if err := p.failure(); err != nil {
		return r, err
	}
	if p.memcg != nil {
		if err := p.memcg.remove(); err != nil {
			return r, err
		}
		p.memcg = nil
	}
	t0 := time.Now()
	if err := p.start(); err != nil {
		return r, err
	}
	if err := p.waitReady(ctx); err != nil {
		return r, err
	}
	r.ReadySeconds = time.Since(t0).Seconds()
	// Scraped back-to-back: a restart should complete in seconds, and a
	// kube-state-metrics scrape alone takes seconds at 100k pods.
	if _, err := b.exposition(ctx, p, b.w.pods+b.probesStarted, 100*time.Millisecond); err != nil {
		return r, err
	}
	r.CompleteSeconds = time.Since(t0).Seconds()
	var err error
	if r.RSSCompleteBytes, _, err = p.memory(); err != nil {
		return r, err
	}
	var complete int64
	if p.memcg != nil {
		if complete, err = p.memcg.workingSet(); err != nil {
			return r, err
		}
	}
	if _, err := b.quiet(ctx, []*process{p}); err != nil {
		return r, err
	}
	if r.RSSQuietBytes, r.PeakRSSBytes, err = p.memory(); err != nil {
		return r, err
	}
	if p.memcg != nil {
		if r.Memcg, err = p.memcg.result(); err != nil {
			return r, err
		}
		r.Memcg.WorkingSetSettledBytes = complete
		if r.Memcg.WorkingSetAfterScrapesBytes, err = p.memcg.workingSet(); err != nil {
			return r, err
		}
	}
	log.Info("Restarted", "exporter", p.Name, "readySeconds", r.ReadySeconds, "completeSeconds", r.CompleteSeconds,
		"rssComplete", r.RSSCompleteBytes, "rssQuiet", r.RSSQuietBytes, "peakRSS", r.PeakRSSBytes)
	return r, nil
}

// settle waits until podslo without per-pod series has observed every
// pod's readiness (kwok has brought them all up) and then until every
// exporter is quiet.
func (b *bench) settle(ctx context.Context, log *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, b.o.SettleTimeout)
	defer cancel()
	want := float64(b.w.pods + b.probesStarted)
	off := b.proc(podsloOff)
	last := time.Now()
	for {
		e, err := count(ctx, off.URL)
		if err != nil {
			return err
		}
		if e.Readiness >= want {
			break
		}
		if time.Since(last) > 15*time.Second {
			log.Info("Waiting for pods to become Ready", "ready", e.Readiness, "want", want)
			last = time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%v of %v pods Ready: %w", e.Readiness, want, ctx.Err())
		case <-time.After(time.Second):
		}
	}
	_, err := b.quiet(ctx, b.procs)
	return err
}

// exposition scrapes p once, untimed, and checks that it shows ready Ready
// pods, retrying for a while, pause after each short scrape: kube-state-
// metrics may still be behind, and a restarted exporter still starting.
func (b *bench) exposition(ctx context.Context, p *process, ready int, pause time.Duration) (exposition, error) {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		e, err := count(ctx, p.URL)
		if err != nil {
			return e, err
		}
		got := e.ReadyTrue
		if p.Name != ksm {
			got = int(e.Readiness)
		}
		if got >= ready {
			return e, nil
		}
		if time.Now().After(deadline) {
			return e, fmt.Errorf("%s shows %d Ready pods, want %d", p.Name, got, ready)
		}
		select {
		case <-ctx.Done():
			return e, ctx.Err()
		case <-time.After(pause):
		}
	}
}

// quietAt is when an exporter went quiet and its CPU time then.
type quietAt struct {
	at  time.Time
	cpu float64
}

// quiet waits until each process has used less than quietCores over
// quietWindow, sampling from now on.
func (b *bench) quiet(ctx context.Context, procs []*process) (map[string]quietAt, error) {
	return b.quietBelow(ctx, procs, quietCores, b.o.SettleTimeout)
}

// quietBelow waits at most timeout until each process has used less than
// cores over quietWindow.
func (b *bench) quietBelow(ctx context.Context, procs []*process, cores float64, timeout time.Duration) (map[string]quietAt, error) {
	type sample struct {
		at  time.Time
		cpu float64
	}
	history := map[string][]sample{}
	out := map[string]quietAt{}
	deadline := time.Now().Add(timeout)
	for {
		now := time.Now()
		for _, p := range procs {
			if _, ok := out[p.Name]; ok {
				continue
			}
			cpu, err := p.cpuSeconds()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", p.Name, err)
			}
			h := append(history[p.Name], sample{now, cpu})
			history[p.Name] = h
			// The newest sample at least quietWindow old.
			for i := len(h) - 1; i >= 0; i-- {
				if now.Sub(h[i].at) >= quietWindow {
					if (cpu-h[i].cpu)/now.Sub(h[i].at).Seconds() < cores {
						out[p.Name] = quietAt{h[i].at, h[i].cpu}
					}
					break
				}
			}
		}
		if len(out) == len(procs) {
			return out, nil
		}
		if now.After(deadline) {
			return nil, fmt.Errorf("exporters not below %.2f cores after %s", cores, timeout)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// idleCores measures each exporter's CPU use over idleWindow with nothing
// happening in the cluster.
func (b *bench) idleCores(ctx context.Context) (map[string]float64, error) {
	before := map[string]float64{}
	for _, p := range b.procs {
		cpu, err := p.cpuSeconds()
		if err != nil {
			return nil, err
		}
		before[p.Name] = cpu
	}
	t0 := time.Now()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(idleWindow):
	}
	elapsed := time.Since(t0).Seconds()
	idle := map[string]float64{}
	for _, p := range b.procs {
		cpu, err := p.cpuSeconds()
		if err != nil {
			return nil, err
		}
		idle[p.Name] = (cpu - before[p.Name]) / elapsed
	}
	return idle, nil
}

// cpuBurst patches a condition on Updates pods and charges each exporter
// the CPU time it used from the first patch until it went quiet, less what
// it uses idle over as long (the mean of its idle use before and after).
func (b *bench) cpuBurst(ctx context.Context, size int, results map[string]*ExporterResult, log *slog.Logger) error {
	if _, err := b.quietBelow(ctx, b.procs, idleCoresMax, idleWait); err != nil {
		// Measured anyway: the idle figures in the results show how busy.
		log.Warn("Exporters not idle before the update burst", "err", err)
	}
	idleBefore, err := b.idleCores(ctx)
	if err != nil {
		return err
	}
	start := map[string]float64{}
	for _, p := range b.procs {
		cpu, err := p.cpuSeconds()
		if err != nil {
			return err
		}
		start[p.Name] = cpu
	}
	n := min(b.o.Updates, b.w.pods)
	profiles := b.profileBurst(ctx, size, log)
	tStart := time.Now()
	if err := b.w.touch(ctx, n, fmt.Sprintf("burst at %d pods", size)); err != nil {
		return fmt.Errorf("patch pods: %w", err)
	}
	patchSeconds := time.Since(tStart).Seconds()
	end, err := b.quiet(ctx, b.procs)
	if err != nil {
		return err
	}
	if err := profiles(); err != nil {
		return err
	}
	idleAfter, err := b.idleCores(ctx)
	if err != nil {
		return err
	}
	for _, p := range b.procs {
		window := max(end[p.Name].at.Sub(tStart).Seconds(), 0)
		gross := end[p.Name].cpu - start[p.Name]
		idle := (idleBefore[p.Name] + idleAfter[p.Name]) / 2
		r := results[p.Name]
		r.CPU = CPUResult{
			Updates:          n,
			PatchSeconds:     patchSeconds,
			WindowSeconds:    window,
			GrossSeconds:     gross,
			IdleCoresBefore:  idleBefore[p.Name],
			IdleCoresAfter:   idleAfter[p.Name],
			GrossPerThousand: gross / float64(n) * 1000,
			PerThousand:      max(gross-idle*window, 0) / float64(n) * 1000,
		}
		log.Info("Update burst", "exporter", p.Name, "updates", n, "cpuPer1k", r.CPU.PerThousand, "grossPer1k", r.CPU.GrossPerThousand,
			"window", window, "idleBefore", idleBefore[p.Name], "idleAfter", idleAfter[p.Name])
	}
	return nil
}

// profileSeconds is how long a burst's CPU profile runs: about the time
// 10k updates take, so that the profile is mostly the burst.
const profileSeconds = 20 * time.Second

// profileBurst starts a CPU profile of each process that serves one
// (--profile) and returns what waits for them and writes them to
// Options.Profile.
func (b *bench) profileBurst(ctx context.Context, size int, log *slog.Logger) func() error {
	var g errgroup.Group
	for _, p := range b.procs {
		if !p.profile {
			continue
		}
		g.Go(func() error {
			path := filepath.Join(b.o.Profile, fmt.Sprintf("cpu-%d-%s.pprof", size, p.profileName))
			url := fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", p.URL, int(profileSeconds.Seconds()))
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
			if err != nil {
				return err
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return fmt.Errorf("profile %s: %w", p.Name, err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("profile %s: %s", p.Name, resp.Status)
			}
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				return fmt.Errorf("profile %s: %w", p.Name, err)
			}
			if err := os.WriteFile(path, body, 0o644); err != nil {
				return err
			}
			log.Info("CPU profile", "exporter", p.Name, "path", path)
			return nil
		})
	}
	return g.Wait
}

// method is one way of seeing a probe's status change in an exporter.
type method struct {
	key        string // in the probe pods' names
	exporter   string
	Observable string
	// before reads what poll compares with; poll reports whether the
	// change shows, and when it was seen.
	before func(ctx context.Context) (float64, error)
	poll   func(ctx context.Context, name string, uid types.UID, before float64) (time.Time, error)
	// minPeriod spaces polls of cheap endpoints.
	minPeriod time.Duration
}

func (b *bench) methods() []method {
	on, off, k := b.proc(podsloOn), b.proc(podsloOff), b.proc(ksm)
	perPodLine := []byte("podslo_pod_sandbox_creation_seconds{")
	aggLine := []byte("podslo_sandbox_creation_duration_seconds_count{")
	probeClass := []byte(`runtime_class="` + probeRuntimeClass + `"`)
	probeCount := func(url string) func(ctx context.Context) (float64, error) {
		return func(ctx context.Context) (float64, error) {
			var v float64
			_, err := scan(ctx, url, func(line []byte) bool {
				if bytes.HasPrefix(line, aggLine) && bytes.Contains(line, probeClass) {
					v += value(line)
				}
				return false
			})
			return v, err
		}
	}
	none := func(context.Context) (float64, error) { return 0, nil }
	methods := []method{
		{
			key: "on", exporter: podsloOn, before: none,
			Observable: "podslo_pod_sandbox_creation_seconds{uid} appears on /metrics",
			poll: func(ctx context.Context, _ string, uid types.UID, _ float64) (time.Time, error) {
				want := []byte(`uid="` + string(uid) + `"`)
				return scan(ctx, on.URL, func(line []byte) bool {
					return bytes.HasPrefix(line, perPodLine) && bytes.Contains(line, want)
				})
			},
		},
		{
			key: "classes", exporter: podsloOn, minPeriod: 10 * time.Millisecond,
			Observable: "the probe class's count on /api/v1/classes grows (same state, no full scrape)",
			before: func(ctx context.Context) (float64, error) {
				n, err := classCount(ctx, on.URL, probeRuntimeClass)
				return float64(n), err
			},
			poll: func(ctx context.Context, _ string, _ types.UID, before float64) (time.Time, error) {
				n, err := classCount(ctx, on.URL, probeRuntimeClass)
				if err != nil || float64(n) <= before {
					return time.Time{}, err
				}
				return time.Now(), nil
			},
		},
		{
			key: "off", exporter: podsloOff, minPeriod: 10 * time.Millisecond,
			Observable: "podslo_sandbox_creation_duration_seconds_count{runtime_class} grows on /metrics",
			before:     probeCount(off.URL),
			poll: func(ctx context.Context, _ string, _ types.UID, before float64) (time.Time, error) {
				return scan(ctx, off.URL, func(line []byte) bool {
					return bytes.HasPrefix(line, aggLine) && bytes.Contains(line, probeClass) && value(line) > before
				})
			},
		},
	}
	if k == nil {
		return methods
	}
	return append(methods, method{
		key: "ksm", exporter: ksm, before: none,
		Observable: `kube_pod_status_ready{pod,condition="true"} is 1 on /metrics`,
		poll: func(ctx context.Context, name string, _ types.UID, _ float64) (time.Time, error) {
			want := []byte(`pod="` + name + `"`)
			return scan(ctx, k.URL, func(line []byte) bool {
				return bytes.HasPrefix(line, ksmReady) && bytes.HasSuffix(line, ksmTrue) && bytes.Contains(line, want)
			})
		},
	})
}

// delays times Probes status changes as m sees them, one at a time: from
// just before the PATCH is sent until the poll that shows it returns.
func (b *bench) delays(ctx context.Context, size int, m method, uids map[string]types.UID) (DelayResult, error) {
	d := DelayResult{Exporter: m.exporter, Observable: m.Observable}
	var pollSeconds float64
	var polls int
	for i := range b.o.Probes {
		name := probeName(size, m.key, i)
		before, err := m.before(ctx)
		if err != nil {
			return d, err
		}
		t0 := time.Now()
		if err := b.w.startProbe(ctx, name); err != nil {
			return d, fmt.Errorf("patch probe %s: %w", name, err)
		}
		b.probesStarted++
		var seen time.Time
		for time.Since(t0) < probeTimeout && seen.IsZero() {
			p0 := time.Now()
			if seen, err = m.poll(ctx, name, uids[name], before); err != nil {
				return d, err
			}
			polls++
			pollSeconds += time.Since(p0).Seconds()
			if rest := m.minPeriod - time.Since(p0); seen.IsZero() && rest > 0 {
				select {
				case <-ctx.Done():
					return d, ctx.Err()
				case <-time.After(rest):
				}
			}
		}
		if seen.IsZero() {
			d.Missed++
			continue
		}
		d.Samples = append(d.Samples, seen.Sub(t0).Seconds())
	}
	d.P50, d.P99 = quantile(d.Samples, 0.5), quantile(d.Samples, 0.99)
	if polls > 0 {
		d.MeanPollSeconds = pollSeconds / float64(polls)
	}
	return d, nil
}

// quantile is the nearest-rank quantile: with 20 samples, q=0.99 is the
// largest.
func quantile(xs []float64, q float64) seconds {
	if len(xs) == 0 {
		return seconds(math.NaN())
	}
	s := slices.Sorted(slices.Values(xs))
	return seconds(s[max(int(math.Ceil(q*float64(len(s))))-1, 0)])
}
