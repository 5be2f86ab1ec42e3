package agent

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/version"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	eventrecord "k8s.io/client-go/tools/record"

	"github.com/podslo/podslo/internal/serve"
)

// Start runs the agent until ctx ends, then shuts down the HTTP server and
// stops the informers. It returns the first error that stopped it early.
func (o *Options) Start(ctx context.Context) error {
	o.Complete()
	if err := o.Validate(); err != nil {
		return err
	}
	log := o.Logger

	cfg := o.restConfig
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

	lis, err := serve.Listen(o.listener, o.ListenAddress)
	if err != nil {
		return err
	}
	handler := serve.Mux(promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorLog: promLogger{o}}), ctrl.synced.Load)
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

type promLogger struct{ o *Options }

func (l promLogger) Println(v ...any) {
	l.o.Logger.Error("Serving metrics failed", "err", fmt.Sprint(v...))
}
