package exporter

import (
	"context"
	"fmt"
	"net"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/version"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	podslocollectors "github.com/podslo/podslo/collectors"
	"github.com/podslo/podslo/informers"
	"github.com/podslo/podslo/internal/classtable"
	"github.com/podslo/podslo/internal/serve"
	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/pipeline"
	"github.com/podslo/podslo/scope"
	"github.com/podslo/podslo/store"
)

// Exporter is podslo's exporter: the watch, the pipeline, the store and
// the HTTP server, built by New and run by Start.
type Exporter struct {
	// opts are the options with their defaults, validated.
	opts            Options
	histogramLabels []pipeline.HistogramLabel
	conditionTypes  []corev1.PodConditionType

	// Seams for tests and embedding programs; see Option.
	listener             net.Listener
	restConfig           *rest.Config
	timeoutCheckInterval time.Duration
}

// Option changes how New builds the exporter. These are seams for tests and
// for programs that embed the exporter; the command line sets none of them.
type Option func(*Exporter)

// WithListener serves on lis instead of listening on Options.ListenAddress:
// a test passes a listener on a free port, and knows the address before the
// exporter starts. The HTTP server closes it when it shuts down.
func WithListener(lis net.Listener) Option {
	return func(e *Exporter) { e.listener = lis }
}

// WithRestConfig talks to the API server with cfg instead of loading
// Options.Kubeconfig or the in-cluster configuration.
func WithRestConfig(cfg *rest.Config) Option {
	return func(e *Exporter) { e.restConfig = cfg }
}

// WithTimeoutCheckInterval checks for sandbox creation timeouts every d
// instead of every 5 s (pipeline.Options.TimeoutCheckInterval), so that a
// test sees a short timeout counted soon after it passes.
func WithTimeoutCheckInterval(d time.Duration) Option {
	return func(e *Exporter) { e.timeoutCheckInterval = d }
}

// New applies the defaults to opts and validates them, once, and returns
// the exporter they describe. It reads no cluster and opens no state:
// Start does.
func New(opts Options, with ...Option) (*Exporter, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	histogramLabels, err := ParseHistogramLabels(opts.HistogramLabels)
	if err != nil {
		return nil, err
	}
	e := &Exporter{opts: opts, histogramLabels: histogramLabels, conditionTypes: conditionTypes(opts.SandboxConditionTypes)}
	for _, w := range with {
		w(e)
	}
	return e, nil
}

// Options returns the options the exporter runs with, defaults applied.
func (e *Exporter) Options() Options { return e.opts }

// resolveScope is the scope this instance runs in: the options', with the
// shard and total from the StatefulSet when autosharded (whose name it
// returns too).
func (o *Options) resolveScope(ctx context.Context, client kubernetes.Interface) (scope.Scope, string, error) {
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

// Start runs the exporter until ctx ends, then shuts down the HTTP server,
// stops the informers and closes the store. It returns the first error that
// stopped it early. Start runs an exporter once.
func (e *Exporter) Start(ctx context.Context) error {
	o := &e.opts
	log := o.Logger

	cfg := e.restConfig
	if cfg == nil {
		var err error
		if cfg, err = serve.RestConfig(o.Kubeconfig, "podslo/"+version.Version); err != nil {
			return err
		}
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create API client: %w", err)
	}

	sc, autoshardSet, err := o.resolveScope(ctx, client)
	if err != nil {
		return err
	}
	if o.StateDir == store.InMemory {
		log.Warn("State is kept in memory only: a restart forgets what was observed and may count it again", "stateDir", o.StateDir)
	}
	st, err := store.Open(store.Options{Dir: o.StateDir, MinFreeBytes: o.StateMinFree, Logger: log.With("component", "store")})
	if err != nil {
		return err
	}
	defer func() {
		if err := st.Close(); err != nil {
			log.Error("Closing state failed", "err", err)
		}
	}()

	histogramLabels := e.histogramLabels
	labels := podslocollectors.Labels{Pod: o.PodLabels}
	for _, h := range histogramLabels {
		labels.Histogram = append(labels.Histogram, h.Name)
	}
	events := podslocollectors.NewInformerEvents()
	pipe, err := pipeline.New(st, pipeline.Options{
		Lifecycle: lifecycle.Config{
			SandboxConditionTypes:  e.conditionTypes,
			MaxObservationAge:      o.MaxObservationAge,
			SandboxCreationTimeout: o.SandboxCreationTimeout,
			StableConditionType:    corev1.PodConditionType(o.StableConditionType),
		},
		TimeoutCheckInterval: e.timeoutCheckInterval,
		PodLabels:            o.PodLabels,
		HistogramLabels:      histogramLabels,
		Scope:                sc,
		Logger:               log.With("component", "pipeline"),
	})
	if err != nil {
		return err
	}
	netpols, err := o.networkPolicies(client, func(resource, event string) { events.WithLabelValues(resource, event).Inc() }, log.With("component", "networkpolicies"))
	if err != nil {
		return err
	}
	keepLabels, keepAnnotations := append([]string(nil), o.PodLabels...), []string(nil)
	for _, h := range histogramLabels {
		if h.Source == pipeline.FromLabel {
			keepLabels = append(keepLabels, h.Key)
		} else {
			keepAnnotations = append(keepAnnotations, h.Key)
		}
	}
	watcher, err := informers.New(client, pipe, informers.Options{
		SandboxConditionTypes: e.conditionTypes,
		StableConditionType:   corev1.PodConditionType(o.StableConditionType),
		PodLabels:             keepLabels,
		PodAnnotations:        keepAnnotations,
		UserErrorEventRegex:   o.UserErrorEventRegex,
		PodLabelsHandler:      netpols.podLabels(),
		OnEvent:               func(resource, event string) { events.WithLabelValues(resource, event).Inc() },
		Scope:                 sc,
		RESTConfig:            cfg,
		Logger:                log.With("component", "informers"),
	})
	if err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(
		podslocollectors.NewSLIs(st, labels, log, podslocollectors.WithStorageClasses(watcher.StorageClasses)),
		podslocollectors.NewSkipped(st, log),
		podslocollectors.NewSelf(st),
		podslocollectors.NewBuildInfo(),
		events,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	netpols.register(reg)

	lis, err := serve.Listen(e.listener, o.ListenAddress)
	if err != nil {
		return err
	}
	var perPod *podslocollectors.PerPod
	if *o.PerPodMetrics {
		perPod = podslocollectors.NewPerPod(st, labels)
	}
	handler := serve.Mux(podslocollectors.Handler(reg, perPod, log), pipe.Ready)
	page := &landing{
		table:      func() classtable.Table { return classtable.FromStore(st, labels.Histogram) },
		ready:      pipe.Ready,
		version:    version.Version,
		dashboards: o.DashboardsURL,
		policies:   netpols.landingTable,
		log:        log,
	}
	page.register(handler)
	tls, basicAuth, _ := serve.WebSecurity(o.WebConfigFile) // validated above
	log.Info("Serving metrics", "address", lis.Addr().String(), "tls", tls, "basicAuth", basicAuth)

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return st.Start(gctx) })
	g.Go(func() error { return watcher.Start(gctx) })
	g.Go(func() error { return netpols.Start(gctx) })
	g.Go(func() error { return pipe.Start(gctx) })
	g.Go(func() error {
		select {
		case <-gctx.Done():
		case <-pipe.SyncedCh():
			// The first list is the heap's peak: every pod decoded at
			// once, and, after a restart, every pod's state read back. The
			// runtime would return those pages to the OS only slowly, so
			// a restarted exporter would sit well above its settled size
			// (docs/benchmarks.md). One forced collection returns them now.
			debug.FreeOSMemory()
		}
		return nil
	})
	if autoshardSet != "" {
		g.Go(func() error { return o.Autoshard.WatchReplicas(gctx, client, autoshardSet, sc.TotalShards) })
	}
	g.Go(func() error {
		return serve.Serve(gctx, lis, handler, o.WebConfigFile, o.ShutdownTimeout, log.With("component", "web"))
	})
	err = g.Wait()
	log.Info("Exporter stopped", "err", err)
	return err
}
