package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/podslo/podslo/hack/harness"
)

// Layouts (--layout) measure issue 14's scale-out modes against the single
// exporter, on one kwok cluster of one size: first the parts of the layout
// alone, while the pods are created, then, once they are stopped, one
// unsharded podslo alone, so that the API server's figures are each
// layout's own.
const (
	layoutShards  = "shards"
	layoutPerNode = "per-node"
)

// LayoutResults is the JSON of a --layout run.
type LayoutResults struct {
	Started  time.Time       `json:"started"`
	Finished time.Time       `json:"finished"`
	Machine  harness.Machine `json:"machine"`
	Versions Versions        `json:"versions"`
	Layout   string          `json:"layout"`
	Pods     int             `json:"pods"`
	Nodes    int             `json:"nodes"`
	// CreateSeconds creates and binds the pods, while the first phase runs.
	CreateSeconds float64 `json:"createSeconds"`
	// Baseline is the API server with no exporter: kwok's own watches.
	Baseline APIServerSample `json:"baseline"`
	Phases   []PhaseResult   `json:"phases"`
}

// PhaseResult is one layout measured alone: the single exporter, or all
// the shards or node exporters at once.
type PhaseResult struct {
	Name string `json:"name"`
	// ReadySeconds is from the first start to every part's /readyz, and
	// CompleteSeconds to their /metrics adding up to every Ready pod: from
	// the start, or in the first phase, which runs while the pods are
	// created, from the last pod created (kwok still starting many).
	ReadySeconds    float64       `json:"readySeconds"`
	CompleteSeconds float64       `json:"completeSeconds"`
	Parts           []*PartResult `json:"parts"`
	// Sum over the parts: what Prometheus' sum() sees.
	Readiness    float64 `json:"readiness"`    // podslo_readiness_duration_seconds_count
	PerPodSeries int     `json:"perPodSeries"` // samples carrying uid=
	RSSBytes     int64   `json:"rssBytes"`     // settled
	// APIServer is read with the parts settled; its watches are less the
	// baseline's. BurstCPUSeconds is its CPU from the first PATCH of the
	// update burst until every part is quiet, less its idle use over as
	// long: the PATCHes themselves, the same in every phase, and sending
	// the updates to the watchers, which is what differs.
	APIServer       APIServerSample `json:"apiServer"`
	IdleCores       float64         `json:"apiServerIdleCores"`
	BurstCPUSeconds float64         `json:"apiServerBurstCPUSeconds"`
	Updates         int             `json:"updates"`
	PatchSeconds    float64         `json:"patchSeconds"`
}

// PartResult is one exporter of a phase.
type PartResult struct {
	Name            string `json:"name"`
	RSSSettledBytes int64  `json:"rssSettledBytes"`
	// AnonSettledBytes is RssAnon: the RSS less badger's memory-mapped
	// files (RssFile), which the kernel may drop and read back.
	AnonSettledBytes int64   `json:"anonSettledBytes"`
	PeakRSSBytes     int64   `json:"peakRSSBytes"`
	StateDirBytes    int64   `json:"stateDirBytes"`
	Series           int     `json:"series"`
	PerPodSeries     int     `json:"perPodSeries"`
	Readiness        float64 `json:"readiness"`
	// IdleCores is its CPU use over the phase's idle window, with nothing
	// happening; BurstCPUSeconds its CPU over the update burst, gross, and
	// NetBurstCPUSeconds less IdleCores over the burst's window.
	IdleCores          float64 `json:"idleCores"`
	BurstCPUSeconds    float64 `json:"burstCPUSeconds"`
	NetBurstCPUSeconds float64 `json:"netBurstCPUSeconds"`
	ScrapeP50          seconds `json:"scrapeP50"`
	ScrapeP99          seconds `json:"scrapeP99"`
	ScrapeBytes        int64   `json:"scrapeBytes"`
}

// APIServerSample is what the API server's own /metrics says.
type APIServerSample struct {
	// Watches counts the open WATCH requests by resource
	// (apiserver_longrunning_requests).
	Watches    map[string]int `json:"watches"`
	CPUSeconds float64        `json:"cpuSeconds"` // process_cpu_seconds_total
	RSSBytes   int64          `json:"rssBytes"`   // process_resident_memory_bytes
}

// layoutScrapes caps the timed scrapes per node exporter: a hundred small
// endpoints, each as fast as the next.
const layoutScrapes = 5

func runLayout(ctx context.Context, o *Options, log *slog.Logger) (err error) {
	if o.Workdir == "" {
		if o.Workdir, err = os.MkdirTemp("", "scale-layout-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(o.Workdir, 0o755); err != nil {
		return err
	}
	if !o.Keep {
		defer os.RemoveAll(o.Workdir)
	}
	log.Info("Workdir", "path", o.Workdir, "layout", o.Layout)
	size := o.Sizes[len(o.Sizes)-1]
	res := &LayoutResults{Started: time.Now().UTC(), Machine: harness.DescribeMachine(), Versions: describeVersions(ctx, o),
		Layout: o.Layout, Pods: size, Nodes: (size + o.PodsPerNode - 1) / o.PodsPerNode}

	c := newCluster(o, log)
	defer c.Delete()
	if err := c.Create(ctx); err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = o.QPS, o.Burst
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	w := &workload{cs: cs, workers: o.Workers, podsPerNode: o.PodsPerNode}
	if err := w.setUp(ctx, o.Repo); err != nil {
		return fmt.Errorf("set up the cluster: %w", err)
	}
	if err := w.growNodes(ctx, res.Nodes); err != nil {
		return fmt.Errorf("create nodes: %w", err)
	}
	if res.Baseline, err = apiServerSample(ctx, cs); err != nil {
		return err
	}
	// The pods are created once the parts run: a new sharded state takes
	// every pod over as moved in from another shard, and observes only
	// what happens after its start (pipeline/handover.go). The single
	// exporter, started afterwards on a new unscoped state, observes all
	// of them at first sight, under --max-observation-age.
	grow := func() error {
		t0 := time.Now()
		if err := w.growPods(ctx, size); err != nil {
			return fmt.Errorf("create pods: %w", err)
		}
		res.CreateSeconds = time.Since(t0).Seconds()
		log.Info("Pods created and bound", "pods", size, "nodes", res.Nodes, "seconds", res.CreateSeconds)
		return nil
	}

	bin := filepath.Join(o.Workdir, "slo-exporter")
	if err := copyFile(o.Podslo, bin); err != nil {
		return err
	}
	l := &layoutRun{o: o, w: w, cs: cs, kubeconfig: c.Kubeconfig, bin: bin, log: log, baseline: res.Baseline}
	type phase struct {
		name  string
		parts []partSpec
	}
	var phases []phase
	switch o.Layout {
	case layoutShards:
		var parts []partSpec
		for i := range o.Shards {
			parts = append(parts, partSpec{name: fmt.Sprintf("shard-%d", i),
				args: []string{"--shard", strconv.Itoa(i), "--total-shards", strconv.Itoa(o.Shards)}})
		}
		phases = append(phases, phase{fmt.Sprintf("%d shards", o.Shards), parts})
	case layoutPerNode:
		var parts []partSpec
		for i := range res.Nodes {
			parts = append(parts, partSpec{name: nodeName(i), args: []string{"--node-name", nodeName(i)}})
		}
		phases = append(phases, phase{fmt.Sprintf("%d per-node", res.Nodes), parts})
	}
	phases = append(phases, phase{"single", []partSpec{{name: "single"}}})
	for i, ph := range phases {
		var before func() error
		if i == 0 {
			before = grow
		}
		pr, err := l.phase(ctx, ph.name, ph.parts, before)
		if pr != nil {
			res.Phases = append(res.Phases, *pr)
		}
		res.Finished = time.Now().UTC()
		if werr := res.write(o.Out, o.Markdown); werr != nil {
			return errors.Join(err, werr)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", ph.name, err)
		}
	}
	// The layouts' parts must add up to the single exporter, exactly:
	// every pod is in exactly one part.
	parts, single := res.Phases[0], res.Phases[1]
	if parts.Readiness != single.Readiness || parts.PerPodSeries != single.PerPodSeries {
		return fmt.Errorf("the parts do not add up: readiness %v and %d per-pod series, the single exporter %v and %d",
			parts.Readiness, parts.PerPodSeries, single.Readiness, single.PerPodSeries)
	}
	log.Info("Done", "results", o.Out, "table", o.Markdown)
	return nil
}

type partSpec struct {
	name string
	args []string
}

type layoutRun struct {
	o          *Options
	w          *workload
	cs         *kubernetes.Clientset
	kubeconfig string
	bin        string
	log        *slog.Logger
	baseline   APIServerSample
}

// phase starts the parts, runs before (unless nil) once they are ready,
// measures them and the API server, and stops them.
func (l *layoutRun) phase(ctx context.Context, name string, specs []partSpec, before func() error) (pr *PhaseResult, err error) {
	log := l.log.With("phase", name)
	pr = &PhaseResult{Name: name}
	dir := filepath.Join(l.o.Workdir, strings.ReplaceAll(name, " ", "-"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var procs []*process
	defer func() {
		for _, p := range slices.Backward(procs) {
			err = errors.Join(err, p.stop())
		}
	}()
	t0 := time.Now()
	for _, s := range specs {
		port, err := harness.FreePort()
		if err != nil {
			return pr, err
		}
		state := filepath.Join(dir, "state-"+s.name)
		p := &process{Name: s.name, URL: fmt.Sprintf("http://127.0.0.1:%d", port), StateDir: state, bin: l.bin,
			logPath: filepath.Join(dir, s.name+".log"), log: log,
			// Every pod is older than the default hour by the second
			// phase: each phase observes all of them, at first sight.
			args: append([]string{"exporter", "--kubeconfig", l.kubeconfig, "--state-dir", state,
				"--listen-address", fmt.Sprintf("127.0.0.1:%d", port), "--max-observation-age", "24h"}, s.args...)}
		if err := p.start(); err != nil {
			return pr, err
		}
		procs = append(procs, p)
	}
	for _, p := range procs {
		if err := p.waitReady(ctx); err != nil {
			return pr, err
		}
	}
	pr.ReadySeconds = time.Since(t0).Seconds()
	if before != nil {
		if err := before(); err != nil {
			return pr, err
		}
		// Completion counts from the last pod created.
		t0 = time.Now()
	}
	b := &bench{o: l.o, w: l.w, procs: procs, log: log}
	want := float64(l.w.pods)
	for last := time.Now(); ; {
		var sum float64
		for _, p := range procs {
			e, err := count(ctx, p.URL)
			if err != nil {
				return pr, err
			}
			sum += e.Readiness
		}
		if sum >= want {
			break
		}
		if time.Since(last) > 15*time.Second {
			log.Info("Waiting for the parts to observe every pod", "readiness", sum, "want", want)
			last = time.Now()
		}
		if time.Since(t0) > l.o.SettleTimeout {
			return pr, fmt.Errorf("the parts observed %v of %v readinesses after %s", sum, want, l.o.SettleTimeout)
		}
		select {
		case <-ctx.Done():
			return pr, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	pr.CompleteSeconds = time.Since(t0).Seconds()
	if _, err := b.quiet(ctx, procs); err != nil {
		return pr, err
	}
	log.Info("Parts settled", "readySeconds", pr.ReadySeconds, "completeSeconds", pr.CompleteSeconds)

	parts := map[string]*PartResult{}
	for _, p := range procs {
		r := &PartResult{Name: p.Name}
		parts[p.Name] = r
		pr.Parts = append(pr.Parts, r)
		if r.RSSSettledBytes, _, err = p.memory(); err != nil {
			return pr, err
		}
		if r.AnonSettledBytes, err = anonRSS(p.cmd.Process.Pid); err != nil {
			return pr, err
		}
		if r.StateDirBytes, _, err = diskUsage(p.StateDir); err != nil {
			return pr, err
		}
		e, err := count(ctx, p.URL)
		if err != nil {
			return pr, err
		}
		r.Series, r.Readiness = e.Series, e.Readiness
		if r.PerPodSeries, err = perPodSeries(ctx, p.URL); err != nil {
			return pr, err
		}
		pr.Readiness += r.Readiness
		pr.PerPodSeries += r.PerPodSeries
		pr.RSSBytes += r.RSSSettledBytes
	}
	if pr.APIServer, err = apiServerSample(ctx, l.cs); err != nil {
		return pr, err
	}
	for res, n := range l.baseline.Watches {
		pr.APIServer.Watches[res] -= n
	}

	// The API server and the parts idle, then over an update burst.
	idle0, err := apiServerSample(ctx, l.cs)
	if err != nil {
		return pr, err
	}
	idleCPU := map[string]float64{}
	for _, p := range procs {
		if idleCPU[p.Name], err = p.cpuSeconds(); err != nil {
			return pr, err
		}
	}
	tIdle := time.Now()
	select {
	case <-ctx.Done():
		return pr, ctx.Err()
	case <-time.After(idleWindow):
	}
	idle1, err := apiServerSample(ctx, l.cs)
	if err != nil {
		return pr, err
	}
	idleSeconds := time.Since(tIdle).Seconds()
	pr.IdleCores = (idle1.CPUSeconds - idle0.CPUSeconds) / idleSeconds
	cpu0 := map[string]float64{}
	for _, p := range procs {
		if cpu0[p.Name], err = p.cpuSeconds(); err != nil {
			return pr, err
		}
		parts[p.Name].IdleCores = (cpu0[p.Name] - idleCPU[p.Name]) / idleSeconds
	}
	pr.Updates = min(l.o.Updates, l.w.pods)
	tBurst := time.Now()
	if err := l.w.touch(ctx, pr.Updates, "layout "+name); err != nil {
		return pr, fmt.Errorf("patch pods: %w", err)
	}
	pr.PatchSeconds = time.Since(tBurst).Seconds()
	if _, err := b.quiet(ctx, procs); err != nil {
		return pr, err
	}
	window := time.Since(tBurst).Seconds()
	after, err := apiServerSample(ctx, l.cs)
	if err != nil {
		return pr, err
	}
	pr.BurstCPUSeconds = max(after.CPUSeconds-idle1.CPUSeconds-pr.IdleCores*window, 0)
	for _, p := range procs {
		cpu, err := p.cpuSeconds()
		if err != nil {
			return pr, err
		}
		r := parts[p.Name]
		r.BurstCPUSeconds = cpu - cpu0[p.Name]
		r.NetBurstCPUSeconds = max(r.BurstCPUSeconds-r.IdleCores*window, 0)
	}
	log.Info("Update burst", "updates", pr.Updates, "apiServerCPUSeconds", pr.BurstCPUSeconds, "window", window)

	scrapes := l.o.Scrapes
	if len(procs) > 10 {
		scrapes = min(scrapes, layoutScrapes)
	}
	for _, p := range procs {
		r := parts[p.Name]
		var secs []float64
		for range scrapes {
			s, err := timedScrape(ctx, p.URL)
			if err != nil {
				return pr, fmt.Errorf("scrape %s: %w", p.Name, err)
			}
			secs = append(secs, s.Seconds)
			r.ScrapeBytes = s.Bytes
		}
		r.ScrapeP50, r.ScrapeP99 = quantile(secs, 0.5), quantile(secs, 0.99)
		if _, r.PeakRSSBytes, err = p.memory(); err != nil {
			return pr, err
		}
	}
	log.Info("Phase measured", "parts", len(procs), "readiness", pr.Readiness, "perPodSeries", pr.PerPodSeries,
		"rss", pr.RSSBytes, "watches", pr.APIServer.Watches)
	return pr, nil
}

// anonRSS is RssAnon from /proc/<pid>/status, in bytes.
func anonRSS(pid int) (int64, error) { return statusBytes(pid, "RssAnon") }

// statusBytes is one kB field of /proc/<pid>/status, in bytes.
func statusBytes(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

var uidLabel = []byte(`uid="`)

// perPodSeries counts the samples that carry a pod's UID.
func perPodSeries(ctx context.Context, url string) (int, error) {
	n := 0
	_, err := scan(ctx, url, func(line []byte) bool {
		if len(line) > 0 && line[0] != '#' && bytes.Contains(line, uidLabel) {
			n++
		}
		return false
	})
	return n, err
}

// apiServerSample reads the API server's /metrics.
func apiServerSample(ctx context.Context, cs *kubernetes.Clientset) (APIServerSample, error) {
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return APIServerSample{}, fmt.Errorf("read the API server's metrics: %w", err)
	}
	return parseAPIServerMetrics(body)
}

func parseAPIServerMetrics(body []byte) (APIServerSample, error) {
	s := APIServerSample{Watches: map[string]int{}}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 0, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case bytes.HasPrefix(line, []byte("apiserver_longrunning_requests{")) && bytes.Contains(line, []byte(`verb="WATCH"`)):
			res := label(line, "resource")
			s.Watches[res] += int(value(line))
		case bytes.HasPrefix(line, []byte("process_cpu_seconds_total ")):
			s.CPUSeconds = value(line)
		case bytes.HasPrefix(line, []byte("process_resident_memory_bytes ")):
			s.RSSBytes = int64(value(line))
		}
	}
	if err := sc.Err(); err != nil {
		return s, err
	}
	if s.CPUSeconds == 0 {
		return s, errors.New("the API server's metrics have no process_cpu_seconds_total")
	}
	return s, nil
}

// label is the value of label name on a sample line, "" if none.
func label(line []byte, name string) string {
	_, rest, ok := bytes.Cut(line, []byte(name+`="`))
	if !ok {
		return ""
	}
	v, _, _ := bytes.Cut(rest, []byte(`"`))
	return string(v)
}

func (r *LayoutResults) write(jsonPath, mdPath string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(jsonPath), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(jsonPath, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(mdPath, r.markdown(), 0o644)
}

// markdown is one table: a column per phase, the parts' spread (the
// smallest, the median and the largest) where there are several.
func (r *LayoutResults) markdown() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "Measured %s, %d CPUs (%s), %.0f GiB, Linux %s, %s; podslo %s, Kubernetes %s, kwok %s.\n\n",
		r.Started.Format("2006-01-02"), r.Machine.CPUs, r.Machine.CPUModel, float64(r.Machine.MemBytes)/(1<<30), r.Machine.Kernel, r.Machine.Go,
		r.Versions.Podslo, r.Versions.Kubernetes, r.Versions.Kwok)
	fmt.Fprintf(&b, "%s pods on %s nodes, created and bound in %.0f s while the first phase ran. Layout %q: each phase alone.\n\n",
		thousands(r.Pods), thousands(r.Nodes), r.CreateSeconds, r.Layout)
	fmt.Fprintf(&b, "| | %s |\n|---|%s\n", strings.Join(phaseNames(r.Phases), " | "), strings.Repeat("---|", len(r.Phases)))
	row := func(what string, cell func(p PhaseResult) string) {
		cells := make([]string, len(r.Phases))
		for i, p := range r.Phases {
			cells[i] = cell(p)
		}
		fmt.Fprintf(&b, "| %s | %s |\n", what, strings.Join(cells, " | "))
	}
	mib := func(n float64) string { return fmt.Sprintf("%.0f MiB", n/(1<<20)) }
	spread := func(p PhaseResult, f func(*PartResult) float64, format func(float64) string) string {
		xs := make([]float64, len(p.Parts))
		for i, part := range p.Parts {
			xs[i] = f(part)
		}
		slices.Sort(xs)
		if len(xs) == 1 {
			return format(xs[0])
		}
		return fmt.Sprintf("%s / %s / %s", format(xs[0]), format(xs[len(xs)/2]), format(xs[len(xs)-1]))
	}
	secs := func(x float64) string { return fmt.Sprintf("%.3f s", x) }
	row("Exporters", func(p PhaseResult) string { return strconv.Itoa(len(p.Parts)) })
	row("Readiness observed, sum", func(p PhaseResult) string { return fmt.Sprintf("%.0f", p.Readiness) })
	row("Per-pod series, sum", func(p PhaseResult) string { return thousands(p.PerPodSeries) })
	row("RSS settled, sum", func(p PhaseResult) string { return mib(float64(p.RSSBytes)) })
	row("RSS settled per exporter (min / median / max)", func(p PhaseResult) string {
		return spread(p, func(x *PartResult) float64 { return float64(x.RSSSettledBytes) }, mib)
	})
	row("RssAnon settled per exporter", func(p PhaseResult) string {
		return spread(p, func(x *PartResult) float64 { return float64(x.AnonSettledBytes) }, mib)
	})
	row("Peak RSS per exporter", func(p PhaseResult) string {
		return spread(p, func(x *PartResult) float64 { return float64(x.PeakRSSBytes) }, mib)
	})
	row("Scrape p50 per exporter", func(p PhaseResult) string {
		return spread(p, func(x *PartResult) float64 { return float64(x.ScrapeP50) }, secs)
	})
	row("Scrape p99 per exporter", func(p PhaseResult) string {
		return spread(p, func(x *PartResult) float64 { return float64(x.ScrapeP99) }, secs)
	})
	row("Start to /readyz, all", func(p PhaseResult) string { return fmt.Sprintf("%.1f s", p.ReadySeconds) })
	row("Start (first phase: last pod created) to every pod observed", func(p PhaseResult) string { return fmt.Sprintf("%.1f s", p.CompleteSeconds) })
	row("Idle CPU per exporter", func(p PhaseResult) string {
		return spread(p, func(x *PartResult) float64 { return x.IdleCores }, func(x float64) string { return fmt.Sprintf("%.4f cores", x) })
	})
	row("CPU per exporter over the update burst, less idle", func(p PhaseResult) string {
		return spread(p, func(x *PartResult) float64 { return x.NetBurstCPUSeconds }, func(x float64) string { return fmt.Sprintf("%.2f s", x) })
	})
	row("CPU of all exporters over the update burst: gross, less idle", func(p PhaseResult) string {
		var gross, net float64
		for _, x := range p.Parts {
			gross, net = gross+x.BurstCPUSeconds, net+x.NetBurstCPUSeconds
		}
		return fmt.Sprintf("%.1f s, %.1f s", gross, net)
	})
	row("API server: WATCH requests of the exporters", func(p PhaseResult) string { return watches(p.APIServer.Watches) })
	row("API server: idle CPU", func(p PhaseResult) string { return fmt.Sprintf("%.3f cores", p.IdleCores) })
	row("API server: CPU over the update burst, less idle", func(p PhaseResult) string {
		return fmt.Sprintf("%.1f s for %s updates (sent in %.0f s)", p.BurstCPUSeconds, thousands(p.Updates), p.PatchSeconds)
	})
	row("API server: RSS", func(p PhaseResult) string { return mib(float64(p.APIServer.RSSBytes)) })
	return b.Bytes()
}

func phaseNames(ps []PhaseResult) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}

// watches renders the non-zero watch counts by resource.
func watches(m map[string]int) string {
	var parts []string
	for _, res := range slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}) {
		if m[res] != 0 {
			parts = append(parts, fmt.Sprintf("%s %d", res, m[res]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
