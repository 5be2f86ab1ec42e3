package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/version"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	eventrecord "k8s.io/client-go/tools/record"

	"github.com/podslo/podslo/conditions"
	"github.com/podslo/podslo/internal/serve"
)

// Agent is podslo's node agent: it writes the Stable and probe conditions
// of its node's pods. New builds it, Start runs it.
type Agent struct {
	// opts are the options with their defaults, validated.
	opts Options
	// cfg is what the parts are built from, resolved once from opts.
	cfg config

	// Seams for tests and embedding programs; see Option.
	listener   net.Listener
	restConfig *rest.Config
}

// config is the agent's configuration resolved from its options, once, by
// New (Options.resolve).
type config struct {
	// web is --web.config.file, validated.
	web serve.WebConfig
	// stable and probe own the Stable and the probe condition types.
	stable, probe conditions.Owner
}

// Option changes how New builds the agent. These are seams for tests and
// for programs that embed the agent; the command line sets none of them.
type Option func(*Agent)

// WithListener serves on lis instead of listening on Options.ListenAddress:
// a test passes a listener on a free port, and knows the address before the
// agent starts. The HTTP server closes it when it shuts down.
func WithListener(lis net.Listener) Option {
	return func(a *Agent) { a.listener = lis }
}

// WithRestConfig talks to the API server with cfg instead of loading
// Options.Kubeconfig or the in-cluster configuration: a test passes the
// credentials of a service account bound to a pod on the agent's node.
func WithRestConfig(cfg *rest.Config) Option {
	return func(a *Agent) { a.restConfig = cfg }
}

// New applies the defaults to opts and validates them, once, resolves the
// configuration the agent's parts are built from, and returns the agent
// they describe. It reads no cluster: Start does.
func New(opts Options, with ...Option) (*Agent, error) {
	opts.setDefaults()
	cfg, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	a := &Agent{opts: opts, cfg: cfg}
	for _, w := range with {
		w(a)
	}
	return a, nil
}

// Options returns the options the agent runs with, defaults applied.
func (a *Agent) Options() Options { return a.opts }

// Start connects to the API server, builds the agent's parts (build) and
// runs them until ctx ends (run); then it shuts down the HTTP server and
// stops the informers. It returns the first error that stopped it early.
// Start runs an agent once.
func (a *Agent) Start(ctx context.Context) error {
	p, err := a.build(ctx)
	if err != nil {
		return err
	}
	defer p.close()
	err = p.run(ctx)
	a.opts.Logger.Info("Agent stopped", "err", err)
	return err
}

// parts are the parts of a running agent. They are built by Start, not
// New, because they need the API server: the controller's informers and
// the Events' sink.
type parts struct {
	opts *Options
	web  serve.WebConfig
	log  *slog.Logger

	broadcaster eventrecord.EventBroadcaster
	ctrl        *controller
	listener    net.Listener
	handler     http.Handler
}

// build connects to the API server and builds the controller, the Events'
// recorder and the HTTP handler. On error, nothing stays open.
func (a *Agent) build(ctx context.Context) (_ *parts, err error) {
	o := &a.opts
	p := &parts{opts: o, web: a.cfg.web, log: o.Logger}
	restConfig := a.restConfig
	if restConfig == nil {
		if restConfig, err = serve.RestConfig(o.Kubeconfig, "podslo-agent/"+version.Version); err != nil {
			return nil, err
		}
	}
	client, err := kubernetes.NewForConfig(restConfig)
	if err != nil {
		return nil, fmt.Errorf("create API client: %w", err)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), newBuildInfo())
	writes := newMetrics(reg, o.StableConditionType, o.ProbeConditionType)
	// Events tell a pod's owner, where they look (kubectl describe), why its
	// probe does not run.
	p.broadcaster = eventrecord.NewBroadcaster(eventrecord.WithContext(ctx))
	p.broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	defer func() {
		if err != nil {
			p.close()
		}
	}()
	events := p.broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: fieldManager, Host: o.NodeName})
	if p.ctrl, err = newController(client, o, a.cfg.stable, a.cfg.probe, writes, newProbeMetrics(reg, writes), events); err != nil {
		return nil, err
	}
	p.handler = serve.Mux(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: promLogger{p.log}}), p.ctrl.synced.Load)
	if p.listener, err = serve.Listen(a.listener, o.ListenAddress); err != nil {
		return nil, err
	}
	return p, nil
}

// run runs the controller and the HTTP server until ctx ends or one of
// them fails, and returns the first error.
func (p *parts) run(ctx context.Context) error {
	o := p.opts
	p.log.Info("Serving metrics", "address", p.listener.Addr().String(), "tls", p.web.TLS, "basicAuth", p.web.BasicAuth, "node", o.NodeName, "stableConditionType", o.StableConditionType,
		"probeConditionType", o.ProbeConditionType, "minProbePeriod", o.MinProbePeriod, "maxProbeWorkers", o.MaxProbeWorkers)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return p.ctrl.run(gctx) })
	g.Go(func() error {
		return serve.Serve(gctx, p.listener, p.handler, p.web, o.ShutdownTimeout, p.log.With("component", "web"))
	})
	return g.Wait()
}

// close stops the Events' broadcaster; the listener is closed by
// serve.Serve, or by build when it failed after opening it.
func (p *parts) close() { p.broadcaster.Shutdown() }

type promLogger struct{ log *slog.Logger }

func (l promLogger) Println(v ...any) {
	l.log.Error("Serving metrics failed", "err", fmt.Sprint(v...))
}
