package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/podslo/podslo/agent"
	"github.com/podslo/podslo/deploy/kwok"
	"github.com/podslo/podslo/exporter"
	"github.com/podslo/podslo/internal/classtable"
	"github.com/podslo/podslo/internal/slostatus"
	"github.com/podslo/podslo/scope"
)

// Demo is a local kwok cluster with a workload, the exporter, one agent per
// node and optionally Prometheus. New builds it, Start runs it.
type Demo struct {
	// opts are the options with their defaults, validated.
	opts Options
	// agentAddrs are the agents' addresses, one per node from
	// Options.AgentListenAddress up.
	agentAddrs []string

	// ready is the seam of WithReady.
	ready func(Endpoints)
}

// Option changes how New builds the demo. These are seams for tests and for
// programs that embed the demo; the command line sets none of them.
type Option func(*Demo)

// WithReady calls ready once everything runs, with the addresses of what
// runs: a test learns there where to send its requests.
func WithReady(ready func(Endpoints)) Option {
	return func(d *Demo) { d.ready = ready }
}

// New applies the defaults to opts and validates them, once, resolves the
// binary directories (from the versions the source tree pins) and the
// agents' addresses, and returns the demo they describe. It starts and
// builds nothing: Start does.
func New(opts Options, with ...Option) (*Demo, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	d := &Demo{opts: opts}
	if err := d.binDirs(); err != nil {
		return nil, err
	}
	// validate checked the address.
	host, port, _ := net.SplitHostPort(opts.AgentListenAddress)
	first, _ := strconv.Atoi(port)
	for i := range opts.Nodes {
		d.agentAddrs = append(d.agentAddrs, net.JoinHostPort(host, strconv.Itoa(first+i)))
	}
	for _, w := range with {
		w(d)
	}
	return d, nil
}

// Start builds the demo (build: the binaries, the kwok cluster, its
// classes, nodes and workload, then the exporter and the agents) and runs
// it until ctx ends (run); then it tears everything down: the exporter and
// agents, Prometheus, the kwok cluster's processes, and the temporary
// directory that held the cluster, the state and Prometheus' data. It
// returns the first error that stopped it early. Start runs a demo once.
func (d *Demo) Start(ctx context.Context) (err error) {
	p, err := d.build(ctx)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, p.close()) }()
	return p.run(ctx)
}

// parts are the parts of a running demo, built by build and run by run.
type parts struct {
	opts  *Options
	ready func(Endpoints)
	log   *slog.Logger
	bar   *progress

	// dir is the demo's temporary directory: the cluster, the state and
	// Prometheus' data.
	dir      string
	cluster  *cluster
	exporter *exporter.Exporter
	agents   []*agent.Agent
	ep       Endpoints
}

// build builds the missing binaries, starts the kwok cluster with the
// classes, nodes and workload, and builds the exporter and the agents on
// it. On error, it tears down what it started.
func (d *Demo) build(ctx context.Context) (_ *parts, err error) {
	o := &d.opts
	if err := d.ensureBinaries(ctx); err != nil {
		return nil, err
	}
	p := &parts{opts: o, ready: d.ready, log: o.Logger}
	d.reapStale(p.log)
	if p.dir, err = os.MkdirTemp("", "podslo-demo-"); err != nil {
		return nil, fmt.Errorf("create the demo's directory: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, p.close())
		}
	}()
	if err := writeOwner(p.dir); err != nil {
		return nil, fmt.Errorf("create the demo's directory: %w", err)
	}

	steps := []string{"control plane and kwok", "classes", "nodes", "workload", "exporter and agents"}
	if o.Prometheus {
		steps = append(steps, "Prometheus")
	}
	p.bar = newProgress(o.Out, "starting the cluster", len(steps))
	p.log.Info("Starting the kwok cluster", "dir", p.dir, "binDir", o.BinDir, "kwokBinDir", o.KwokBinDir)
	if p.cluster, err = d.startCluster(ctx, p.dir); err != nil {
		return nil, err
	}
	p.bar.add(1)
	if err := kwok.ApplyClasses(ctx, p.cluster.client, kwok.ClassesFile(o.SourceDir)); err != nil {
		return nil, err
	}
	p.bar.add(1)
	if err := createNodes(ctx, p.cluster.client, o.Nodes); err != nil {
		return nil, fmt.Errorf("wait for the kwok nodes: %w", err)
	}
	p.bar.add(1)
	if err := createWorkload(ctx, p.cluster.client, o.Workload); err != nil {
		return nil, err
	}
	p.bar.add(1)

	p.ep = Endpoints{Kubeconfig: p.cluster.kubeconfig, Exporter: o.ListenAddress}
	if p.exporter, err = exporter.New(exporter.Options{Kubeconfig: p.cluster.kubeconfig, ListenAddress: o.ListenAddress, StateDir: p.dir + "/state",
		Scope:                scope.Scope{NamespacesDenylist: o.IgnoredNamespaces},
		NetworkPluginProfile: filepath.Join(o.SourceDir, "deploy", "kwok", "network-plugin-profile.yaml"), Logger: p.log.With("component", "exporter")}); err != nil {
		return nil, fmt.Errorf("exporter: %w", err)
	}
	for i, addr := range d.agentAddrs {
		ag, err := agent.New(agent.Options{NodeName: NodeName(i), Kubeconfig: p.cluster.kubeconfig, ListenAddress: addr, Logger: p.log.With("component", "agent")})
		if err != nil {
			return nil, fmt.Errorf("agent of %s: %w", NodeName(i), err)
		}
		p.agents = append(p.agents, ag)
		p.ep.Agents = append(p.ep.Agents, addr)
	}
	return p, nil
}

// run runs the exporter, the agents, Prometheus if asked for, the churn and
// the live table until ctx ends or one of them fails, and returns the first
// error; everything it started has stopped when it returns.
func (p *parts) run(ctx context.Context) (err error) {
	o := p.opts
	run, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make(chan error, len(p.agents)+1)
	defer func() {
		cancel()
		wg.Wait()
		close(errs)
		for e := range errs {
			err = errors.Join(err, e)
		}
	}()
	wg.Go(func() {
		if err := p.exporter.Start(run); err != nil {
			errs <- fmt.Errorf("exporter: %w", err)
			cancel()
		}
	})
	for i, ag := range p.agents {
		wg.Go(func() {
			if err := ag.Start(run); err != nil {
				errs <- fmt.Errorf("agent of %s: %w", NodeName(i), err)
				cancel()
			}
		})
	}
	if err := waitReady(run, append([]string{p.ep.Exporter}, p.ep.Agents...)); err != nil {
		return err
	}
	p.bar.add(1)
	if o.Prometheus {
		prom, err := startPrometheus(run, o, p.dir+"/prometheus", p.ep.Agents)
		if err != nil {
			return err
		}
		defer prom.stop()
		p.ep.Prometheus, p.ep.PrometheusConfig = o.PrometheusListenAddress, prom.config
		p.bar.add(1)
	}
	p.bar.finish()
	p.log.Info("Demo running", "kubeconfig", p.ep.Kubeconfig, "exporter", p.ep.Exporter, "agents", p.ep.Agents, "prometheus", p.ep.Prometheus)
	if p.ready != nil {
		p.ready(p.ep)
	}
	wg.Go(func() { churn(run, p.cluster.client, o.Workload.namespace(), o.ChurnInterval) })
	liveTable(run, o, p.ep)
	return nil
}

// close deletes the kwok cluster, if build started it, and the demo's
// directory.
func (p *parts) close() error {
	var err error
	if p.cluster != nil {
		p.log.Info("Deleting the kwok cluster")
		err = p.cluster.stop()
	}
	if rmErr := os.RemoveAll(p.dir); rmErr != nil {
		err = errors.Join(err, fmt.Errorf("remove the demo's directory: %w", rmErr))
	}
	return err
}

// waitReady waits until every address answers /readyz with 200: the
// exporter and the agents have synced their caches.
func waitReady(ctx context.Context, addrs []string) error {
	for _, addr := range addrs {
		err := poll(ctx, 2*time.Minute, func() (bool, error) {
			resp, err := http.Get("http://" + addr + "/readyz")
			if err != nil {
				return false, nil
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK, nil
		})
		if err != nil {
			return fmt.Errorf("wait for %s/readyz: %w", addr, err)
		}
	}
	return nil
}

// liveTable redraws the exporter's per-class table until ctx ends. It
// reads /api/v1/classes as any client would: the demo has no back door
// into the exporter.
func liveTable(ctx context.Context, o *Options, ep Endpoints) {
	tty := isTerminal(o.Out)
	ticker := time.NewTicker(o.Refresh)
	defer ticker.Stop()
	for {
		table, err := fetchTable(ctx, "http://"+ep.Exporter+"/api/v1/classes")
		if tty {
			// Home and clear: the table stays in place.
			fmt.Fprint(o.Out, "\x1b[H\x1b[2J")
		}
		fmt.Fprintf(o.Out, "podslo demo — %s — metrics http://%s/metrics", time.Now().Format(time.TimeOnly), ep.Exporter)
		if ep.Prometheus != "" {
			fmt.Fprintf(o.Out, " — Prometheus http://%s", ep.Prometheus)
		}
		fmt.Fprintf(o.Out, "\nkubeconfig %s — Ctrl-C stops and removes everything\n\n", ep.Kubeconfig)
		if err != nil {
			fmt.Fprintf(o.Out, "table unavailable: %v\n", err)
		} else if err := table.WriteText(o.Out); err != nil {
			o.Logger.Error("Writing the live table failed", "err", err)
		}
		// The SLOs, worst first, as `podslo report` has them.
		fmt.Fprintln(o.Out)
		var report slostatus.Report
		if err := fetchJSON(ctx, "http://"+ep.Exporter+"/api/v1/slos", &report); err != nil {
			fmt.Fprintf(o.Out, "SLOs unavailable: %v\n", err)
		} else if err := slostatus.WriteWorst(o.Out, slostatus.Evaluate(&report), 8); err != nil {
			o.Logger.Error("Writing the live table failed", "err", err)
		}
		fmt.Fprintf(o.Out, "All of them: podslo report --url http://%s, or http://%s/ in a browser\n", ep.Exporter, ep.Exporter)
		fmt.Fprintln(o.Out)
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

func fetchTable(ctx context.Context, url string) (classtable.Table, error) {
	var t classtable.Table
	err := fetchJSON(ctx, url, &t)
	return t, err
}

// fetchJSON reads the JSON answer of url into v.
func fetchJSON(ctx context.Context, url string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	return nil
}
