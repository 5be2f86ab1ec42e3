// Package serve is the plumbing podslo's components share: an API client
// configuration that speaks protobuf, and the /metrics, /healthz and /readyz
// endpoints, served with TLS and basic auth when a web config asks for them.
package serve

import (
	"context"
	"fmt"
	stdlog "log"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"strings"
	"time"

	"github.com/prometheus/exporter-toolkit/web"
	"go.yaml.in/yaml/v2"
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

// Profiling serves net/http/pprof's handlers on /debug/pprof/ of mux. They
// are registered here, not through the package's import, which would add
// them to http.DefaultServeMux.
func Profiling(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
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

// WebConfig is an exporter-toolkit web config, validated: the file, and
// what it turns on. The zero value is plain HTTP without authentication.
type WebConfig struct {
	// File is the config's path, which the server reads again for each
	// connection and request (see Serve); empty for none.
	File string
	// TLS and BasicAuth report whether the file, as validated, turns on
	// TLS and basic auth: for the log line that says how the server is
	// guarded.
	TLS, BasicAuth bool
}

// LoadWebConfig validates the exporter-toolkit web config at path as the
// server will load it (the YAML, the users' bcrypt hashes, the certificate
// and key files), so that a mistake stops the process at start rather than
// failing every scrape, and returns what it turns on. A component loads it
// once, in New; the empty path is plain HTTP.
func LoadWebConfig(path string) (WebConfig, error) {
	if path == "" {
		return WebConfig{}, nil
	}
	if err := web.Validate(path); err != nil {
		return WebConfig{}, err
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return WebConfig{}, err
	}
	var c web.Config
	if err := yaml.Unmarshal(raw, &c); err != nil {
		return WebConfig{}, err
	}
	return WebConfig{File: path, TLS: c.TLSConfig.IsEnabled(), BasicAuth: len(c.Users) > 0}, nil
}

// Flags the exporter and the agent share, bound by their AddFlags.
const (
	// KubeconfigUsage is the help of --kubeconfig.
	KubeconfigUsage = "Path of a kubeconfig file (default: in-cluster configuration)"
	// WebConfigFlag is named as in node_exporter and kube-state-metrics.
	WebConfigFlag = "web.config.file"
	// WebConfigUsage is the help of --web.config.file.
	WebConfigUsage = "exporter-toolkit web config file (TLS, basic auth), as for node_exporter; it guards every path of --listen-address, /healthz and /readyz included, so probe over TCP, or over HTTPS without basic auth. Read again on each connection and request. Empty: plain HTTP"
)

// Serve serves h on lis until ctx ends, then shuts the server down
// gracefully within shutdownTimeout. It returns early with the error if
// serving fails.
//
// It serves through exporter-toolkit, like node_exporter and
// kube-state-metrics: wc, when it names a file, turns on TLS and basic
// auth for every path, /healthz and /readyz included. The toolkit reads the
// file again for each connection and request, so that renewed certificates
// and changed users apply without a restart; LoadWebConfig checked it once
// at start.
func Serve(ctx context.Context, lis net.Listener, h http.Handler, wc WebConfig, shutdownTimeout time.Duration, log *slog.Logger) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: stdlog.New(httpErrorLog{log}, "", 0)}
	systemdSocket := false
	webConfigFile := wc.File
	flags := &web.FlagConfig{
		WebListenAddresses: &[]string{lis.Addr().String()},
		WebSystemdSocket:   &systemdSocket,
		WebConfigFile:      &webConfigFile,
	}
	served := make(chan error, 1)
	go func() { served <- web.Serve(lis, srv, flags, log) }()
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

// httpErrorLog sends net/http's own messages to the logger. Failed TLS
// handshakes go to debug: every TCP probe and every plain-HTTP client on a
// TLS port causes one. The rest, such as a handler's panic, are errors.
type httpErrorLog struct{ log *slog.Logger }

func (l httpErrorLog) Write(p []byte) (int, error) {
	msg := strings.TrimSuffix(string(p), "\n")
	if strings.HasPrefix(msg, "http: TLS handshake error") {
		l.log.Debug("TLS handshake failed", "err", msg)
	} else {
		l.log.Error("HTTP server failed", "err", msg)
	}
	return len(p), nil
}
