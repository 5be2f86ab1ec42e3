// Package serve is the plumbing podslo's components share: an API client
// configuration that speaks protobuf, and the /metrics, /healthz and /readyz
// endpoints.
package serve

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// RestConfig loads the kubeconfig, or the in-cluster configuration when
// none is given, and asks for protobuf: it is several times cheaper to
// decode than JSON for a cluster's worth of pods.
func RestConfig(kubeconfig, userAgent string) (*rest.Config, error) {
	var (
		cfg *rest.Config
		err error
	)
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("load API client configuration (kubeconfig %q): %w", kubeconfig, err)
	}
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	cfg.UserAgent = userAgent
	return cfg, nil
}

// Mux serves metrics on /metrics, 200 on /healthz while the process runs,
// and 200 on /readyz once ready reports true (the informer caches synced).
func Mux(metrics http.Handler, ready func() bool) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics)
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready() {
			http.Error(w, "informer caches not synced yet\n", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

// Listen returns lis when a test set one, else listens on addr.
func Listen(lis net.Listener, addr string) (net.Listener, error) {
	if lis != nil {
		return lis, nil
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %q: %w", addr, err)
	}
	return lis, nil
}

// Serve serves h on lis until ctx ends, then shuts the server down
// gracefully within shutdownTimeout. It returns early with the error if
// serving fails.
func Serve(ctx context.Context, lis net.Listener, h http.Handler, shutdownTimeout time.Duration) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	select {
	case err := <-served:
		return fmt.Errorf("serve on %s: %w", lis.Addr(), err)
	case <-ctx.Done():
	}
	// ctx is already cancelled: shut down on a fresh context.
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shut down HTTP server: %w", err)
	}
	<-served // http.ErrServerClosed, once Serve has returned
	return nil
}
