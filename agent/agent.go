package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net"

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

	"github.com/podslo/podslo/internal/serve"
)

// Agent is podslo's node agent: it writes the Stable and probe conditions
// of its node's pods. New builds it, Start runs it.
type Agent struct {
	// opts are the options with their defaults, validated.
	opts Options

	// Seams for tests and embedding programs; see Option.
	listener   net.Listener
	restConfig *rest.Config
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

// New applies the defaults to opts and validates them, once, and returns
// the agent they describe. It reads no cluster: Start does.
func New(opts Options, with ...Option) (*Agent, error) {
	opts.setDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	a := &Agent{opts: opts}
	for _, w := range with {
		w(a)
	}
	return a, nil
}

// Options returns the options the agent runs with, defaults applied.
func (a *Agent) Options() Options { return a.opts }

// Start runs the agent until ctx ends, then shuts down the HTTP server and
// stops the informers. It returns the first error that stopped it early.
// Start runs an agent once.
func (a *Agent) Start(ctx context.Context) error {
	o := &a.opts
	log := o.Logger

	cfg := a.restConfig
	if cfg == nil {
		var err error
		if cfg, err = serve.RestConfig(o.Kubeconfig, "podslo-agent/"+version.Version); err != nil {
			return err
		}
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("create API client: %w", err)
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), newBuildInfo())
	writes := newMetrics(reg, o.StableConditionType, o.ProbeConditionType)
	// Events tell a pod's owner, where they look (kubectl describe), why its
	// probe does not run.
	broadcaster := eventrecord.NewBroadcaster(eventrecord.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	events := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: fieldManager, Host: o.NodeName})
	ctrl, err := newController(client, o, writes, newProbeMetrics(reg, writes), events)
	if err != nil {
		return err
	}

	lis, err := serve.Listen(a.listener, o.ListenAddress)
	if err != nil {
		return err
	}
	handler := serve.Mux(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: promLogger{log}}), ctrl.synced.Load)
	tls, basicAuth, _ := serve.WebSecurity(o.WebConfigFile) // validated above
	log.Info("Serving metrics", "address", lis.Addr().String(), "tls", tls, "basicAuth", basicAuth, "node", o.NodeName, "stableConditionType", o.StableConditionType,
		"probeConditionType", o.ProbeConditionType, "minProbePeriod", o.MinProbePeriod, "maxProbeWorkers", o.MaxProbeWorkers)

	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return ctrl.run(gctx) })
	g.Go(func() error {
		return serve.Serve(gctx, lis, handler, o.WebConfigFile, o.ShutdownTimeout, log.With("component", "web"))
	})
	err = g.Wait()
	log.Info("Agent stopped", "err", err)
	return err
}

type promLogger struct{ log *slog.Logger }

func (l promLogger) Println(v ...any) {
	l.log.Error("Serving metrics failed", "err", fmt.Sprint(v...))
}
