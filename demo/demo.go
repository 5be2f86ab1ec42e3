package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
)

// Demo is a local kwok cluster with a workload, the exporter, one agent per
// node and optionally Prometheus. New builds it, Start runs it.
type Demo struct {
	// opts are the options with their defaults, validated.
	opts Options

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

// New applies the defaults to opts and validates them, once, and returns
// the demo they describe. It starts and builds nothing: Start does.
func New(opts Options, with ...Option) (*Demo, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	d := &Demo{opts: opts}
	for _, w := range with {
		w(d)
	}
	return d, nil
}

// Start runs the demo until ctx ends, then tears everything down: the
// exporter and agents, Prometheus, the kwok cluster's processes, and the
// temporary directory that held the cluster, the state and Prometheus'
// data. It returns the first error that stopped it early. Start runs a
// demo once.
func (d *Demo) Start(ctx context.Context) (err error) {
	o := &d.opts
	if err := d.binDirs(); err != nil {
		return err
	}
	if err := d.ensureBinaries(ctx); err != nil {
		return err
	}
	log := o.Logger
	d.reapStale(log)
	dir, err := os.MkdirTemp("", "podslo-demo-")
	if err != nil {
		return fmt.Errorf("create the demo's directory: %w", err)
	}
	defer func() {
		if rmErr := os.RemoveAll(dir); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("remove the demo's directory: %w", rmErr))
		}
	}()
	if err := writeOwner(dir); err != nil {
		return fmt.Errorf("create the demo's directory: %w", err)
	}

	steps := []string{"control plane and kwok", "classes", "nodes", "workload", "exporter and agents"}
	if o.Prometheus {
		steps = append(steps, "Prometheus")
	}
	bar := newProgress(o.Out, "starting the cluster", len(steps))
	log.Info("Starting the kwok cluster", "dir", dir, "binDir", o.BinDir, "kwokBinDir", o.KwokBinDir)
	cl, err := d.startCluster(ctx, dir)
	if err != nil {
		return err
	}
	defer func() {
		log.Info("Deleting the kwok cluster")
		if stopErr := cl.stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
	}()
	bar.add(1)
	if err := kwok.ApplyClasses(ctx, cl.client, kwok.ClassesFile(o.SourceDir)); err != nil {
		return err
	}
	bar.add(1)
	if err := createNodes(ctx, cl.client, o.Nodes); err != nil {
		return fmt.Errorf("wait for the kwok nodes: %w", err)
	}
	bar.add(1)
	if err := createWorkload(ctx, cl.client, o.Workload); err != nil {
		return err
	}
	bar.add(1)

	// Everything below stops with run; the deferred teardown above waits
	// for it through wg.
	run, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	errs := make(chan error, o.Nodes+2)
	defer func() {
		cancel()
		wg.Wait()
		close(errs)
		for e := range errs {
			err = errors.Join(err, e)
		}
	}()
	ep := Endpoints{Kubeconfig: cl.kubeconfig, Exporter: o.ListenAddress}
	exp, err := exporter.New(exporter.Options{Kubeconfig: cl.kubeconfig, ListenAddress: o.ListenAddress, StateDir: dir + "/state",
		NetworkPluginProfile: filepath.Join(o.SourceDir, "deploy", "kwok", "network-plugin-profile.yaml"), Logger: log.With("component", "exporter")})
	if err != nil {
		return fmt.Errorf("exporter: %w", err)
	}
	wg.Go(func() {
		if err := exp.Start(run); err != nil {
			errs <- fmt.Errorf("exporter: %w", err)
			cancel()
		}
	})
	host, port, _ := net.SplitHostPort(o.AgentListenAddress)
	first, _ := strconv.Atoi(port)
	for i := range o.Nodes {
		addr := net.JoinHostPort(host, strconv.Itoa(first+i))
		ep.Agents = append(ep.Agents, addr)
		ag, err := agent.New(agent.Options{NodeName: NodeName(i), Kubeconfig: cl.kubeconfig, ListenAddress: addr, Logger: log.With("component", "agent")})
		if err != nil {
			return fmt.Errorf("agent of %s: %w", NodeName(i), err)
		}
		wg.Go(func() {
			if err := ag.Start(run); err != nil {
				errs <- fmt.Errorf("agent of %s: %w", NodeName(i), err)
				cancel()
			}
		})
	}
	if err := waitReady(run, append([]string{ep.Exporter}, ep.Agents...)); err != nil {
		return err
	}
	bar.add(1)
	if o.Prometheus {
		prom, err := d.startPrometheus(run, dir+"/prometheus", ep.Agents)
		if err != nil {
			return err
		}
		defer prom.stop()
		ep.Prometheus = o.PrometheusListenAddress
		bar.add(1)
	}
	bar.finish()
	log.Info("Demo running", "kubeconfig", ep.Kubeconfig, "exporter", ep.Exporter, "agents", ep.Agents, "prometheus", ep.Prometheus)
	if d.ready != nil {
		d.ready(ep)
	}
	wg.Go(func() { churn(run, cl.client, o.Workload.namespace(), o.ChurnInterval) })
	d.liveTable(run, ep)
	return nil
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
func (d *Demo) liveTable(ctx context.Context, ep Endpoints) {
	o := &d.opts
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
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return t, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return t, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return t, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&t); err != nil {
		return t, fmt.Errorf("GET %s: %w", url, err)
	}
	return t, nil
}
