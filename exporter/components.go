package exporter

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/version"
	"golang.org/x/sync/errgroup"

	podslocollectors "github.com/podslo/podslo/collectors"
	"github.com/podslo/podslo/informers"
	"github.com/podslo/podslo/internal/classtable"
	"github.com/podslo/podslo/internal/kube"
	"github.com/podslo/podslo/internal/serve"
	"github.com/podslo/podslo/internal/slostatus"
	"github.com/podslo/podslo/pipeline"
	"github.com/podslo/podslo/scope"
	"github.com/podslo/podslo/store"
)

// components are the parts of a running exporter, each built from the
// resolved config. They are built by Start, not New, because two inputs
// exist only once the exporter runs: the scope, which autosharding reads
// from the StatefulSet, and the state, which the pipeline reads to decide
// what to hand over.
type components struct {
	opts *Options
	web  serve.WebConfig
	log  *slog.Logger

	client       kube.Interface
	scope        scope.Scope
	autoshardSet string

	store    *store.Store
	pipeline *pipeline.Pipeline
	watcher  *informers.Watcher
	netpols  *networkPolicies
	listener net.Listener
	handler  http.Handler
}

// build connects to the API server, resolves the scope, opens the state and
// builds every component on them. On error, nothing stays open.
func (e *Exporter) build(ctx context.Context) (_ *components, err error) {
	o, cfg := &e.opts, &e.cfg
	c := &components{opts: o, web: cfg.web, log: o.Logger}
	restConfig, err := serve.RestConfig(o.Kubeconfig, "podslo/"+version.Version)
	if err != nil {
		return nil, err
	}
	if c.client, err = kube.NewForConfig(restConfig); err != nil {
		return nil, fmt.Errorf("create API client: %w", err)
	}
	if c.scope, c.autoshardSet, err = o.resolveScope(ctx, c.client); err != nil {
		return nil, err
	}
	if o.StateDir == store.InMemory {
		c.log.Warn("State is kept in memory only: a restart forgets what was observed and may count it again", "stateDir", o.StateDir)
	}
	if c.store, err = store.Open(store.Options{Dir: o.StateDir, MinFreeBytes: o.StateMinFree, WindowRetention: cfg.windowRetention(), WindowFamilies: cfg.status.Families(), Logger: c.log.With("component", "store")}); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			c.close()
		}
	}()

	events := podslocollectors.NewInformerEvents()
	onEvent := func(resource, event string) { events.WithLabelValues(resource, event).Inc() }
	c.pipeline, err = pipeline.New(c.store, pipeline.Options{
		Lifecycle:            cfg.lifecycle,
		TimeoutCheckInterval: e.timeoutCheckInterval,
		PodLabels:            o.PodLabels,
		HistogramLabels:      cfg.histogramLabels,
		Scope:                c.scope,
		Logger:               c.log.With("component", "pipeline"),
	})
	if err != nil {
		return nil, err
	}
	c.netpols = o.networkPolicies(c.client, cfg.profile, onEvent, c.log.With("component", "networkpolicies"))
	c.watcher, err = informers.New(c.client, c.pipeline, informers.Options{
		Lifecycle:        cfg.lifecycle,
		PodLabels:        cfg.keepLabels,
		PodAnnotations:   cfg.keepAnnotations,
		NodeLabels:       cfg.nodeLabels,
		OwnerKind:        cfg.ownerKind,
		UserErrorEvents:  cfg.userErrors,
		PodLabelsHandler: c.netpols.podLabels(),
		OnEvent:          onEvent,
		Scope:            c.scope,
		RESTConfig:       restConfig,
		Logger:           c.log.With("component", "informers"),
	})
	if err != nil {
		return nil, err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(
		podslocollectors.NewSLIs(c.store, cfg.labels, c.log, podslocollectors.WithStorageClasses(c.watcher.StorageClasses)),
		podslocollectors.NewSkipped(c.store, cfg.labels, c.log),
		podslocollectors.NewSelf(c.store),
		podslocollectors.NewBuildInfo(),
		podslocollectors.NewPodWatchCurrent(c.watcher.PodsCurrent),
		events,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	c.netpols.register(reg)
	var perPod *podslocollectors.PerPod
	if *o.PerPodMetrics {
		perPod = podslocollectors.NewPerPod(c.store, cfg.labels, cfg.families)
	}
	mux := serve.Mux(podslocollectors.Handler(reg, perPod, cfg.families, c.log), c.pipeline.Ready)
	if o.Profiling {
		serve.Profiling(mux)
	}
	since, err := windowsSince(c.store, time.Now())
	if err != nil {
		c.log.Warn("Recording when the windowed counts begin failed: the landing page dates them from this start", "err", err)
	}
	src := source(c.scope, since)
	src.Version = version.Version
	page := &landing{
		table:      func() classtable.Table { return classtable.FromStore(c.store, cfg.labels.Histogram) },
		slos:       func() slostatus.Report { return cfg.status.FromStore(c.store, time.Now(), src) },
		ready:      c.pipeline.Ready,
		version:    version.Version,
		dashboards: o.DashboardsURL,
		policies:   c.netpols.landingTable,
		log:        c.log,
	}
	page.register(mux)
	c.handler = mux
	if c.listener, err = serve.Listen(e.listener, o.ListenAddress); err != nil {
		return nil, err
	}
	return c, nil
}

// resolveScope is the scope this instance runs in: the options', with the
// shard and total from the StatefulSet when autosharded (whose name it
// returns too).
func (o *Options) resolveScope(ctx context.Context, client kube.Interface) (scope.Scope, string, error) {
	sc := o.Scope
	if !o.Autoshard.Enabled() {
		return sc, "", nil
	}
	shard, total, set, err := o.Autoshard.Resolve(ctx, client)
	if err != nil {
		return sc, "", err
	}
	sc.Shard, sc.TotalShards = shard, total
	o.Logger.Info("Autosharding", "statefulSet", set, "shard", shard, "totalShards", total)
	return sc, set, nil
}

// run runs every component until ctx ends or one of them fails, and
// returns the first error.
func (c *components) run(ctx context.Context) error {
	o := c.opts
	c.log.Info("Serving metrics", "address", c.listener.Addr().String(), "tls", c.web.TLS, "basicAuth", c.web.BasicAuth)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return c.store.Start(gctx) })
	g.Go(func() error { return c.watcher.Start(gctx) })
	g.Go(func() error { return c.netpols.Start(gctx) })
	g.Go(func() error { return c.pipeline.Start(gctx) })
	g.Go(func() error {
		select {
		case <-gctx.Done():
		case <-c.pipeline.SyncedCh():
			// The first list is the heap's peak: every pod decoded at
			// once, and, after a restart, every pod's state read back. The
			// runtime would return those pages to the OS only slowly, so
			// a restarted exporter would sit well above its settled size
			// (docs/benchmarks.md). One forced collection returns them now.
			debug.FreeOSMemory()
		}
		return nil
	})
	if c.autoshardSet != "" {
		g.Go(func() error { return o.Autoshard.WatchReplicas(gctx, c.client, c.autoshardSet, c.scope.TotalShards) })
	}
	g.Go(func() error {
		return serve.Serve(gctx, c.listener, c.handler, c.web, o.ShutdownTimeout, c.log.With("component", "web"))
	})
	return g.Wait()
}

// close closes the state; the listener is closed by serve.Serve, or by
// build when it failed after opening it.
func (c *components) close() {
	if err := c.store.Close(); err != nil {
		c.log.Error("Closing state failed", "err", err)
	}
}
