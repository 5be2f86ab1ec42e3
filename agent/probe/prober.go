package probe

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
)

// Result is a probe's verdict.
type Result string

const (
	Success Result = "success"
	Failure Result = "failure"
	// Timeout is a probe that ran out of its Probe.Timeout.
	Timeout Result = "timeout"
)

// Outcome is what one probe found.
type Outcome struct {
	Result Result
	// Message is, for failures and timeouts, the error, short, fit for a
	// condition message; empty on success.
	Message string
	// Duration is the wall time of the probe.
	Duration time.Duration
}

const (
	userAgent = "podslo-agent-probe/1.0"
	// maxBody is the kubelet's maxRespBodyLength: enough for any health
	// endpoint, and a bound on what a pod can make the agent read.
	maxBody = 10 << 10
	// maxMessage keeps a condition message readable when the error quotes a
	// long URL.
	maxMessage = 256
)

// Prober runs probes; one is shared by all workers of an agent, so it must be
// safe for concurrent use. It holds no state beyond its configuration.
type Prober struct {
	dialer *net.Dialer
	http   *http.Client
}

// NewProber returns a Prober that behaves like the kubelet's: a new
// connection per probe, no proxy, no certificate verification.
func NewProber() *Prober {
	// Unlike the kubelet's ProbeDialer, no one-second SO_LINGER: it is meant
	// to cut TIME-WAIT (issues.k8s.io/89898), but on Linux 6.18, 1,000 TCP
	// probes left 1,000 sockets in TIME-WAIT with it as without it, and it
	// lets Close block for up to a second on an unresponsive peer.
	dialer := &net.Dialer{}
	transport := &http.Transport{
		// The node agent must reach pod IPs directly, whatever HTTP_PROXY says.
		Proxy:       nil,
		DialContext: dialer.DialContext,
		// As the kubelet: a pod's serving certificate is not for the node to
		// verify, and probes must not fail on it.
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
		// As the kubelet: each probe a new connection, so a probe tests that
		// the pod still accepts them, and the agent holds no idle sockets.
		DisableKeepAlives:  true,
		DisableCompression: true,
	}
	return &Prober{
		dialer: dialer,
		http: &http.Client{
			Transport:     transport,
			CheckRedirect: sameHostRedirects,
		},
	}
}

// sameHostRedirects is the kubelet's RedirectChecker without
// followNonLocalRedirects: following a redirect to another host would let a
// pod make the node agent connect anywhere. The redirect response itself is
// then the result, a success as for the kubelet (where it is a Warning).
func sameHostRedirects(req *http.Request, via []*http.Request) error {
	if req.URL.Hostname() != via[0].URL.Hostname() {
		return http.ErrUseLastResponse
	}
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	return nil
}

// verdict is a failure the target answered with (an HTTP status, a gRPC
// health status): never a timeout, even if the deadline passed meanwhile.
type verdict struct{ msg string }

func (v *verdict) Error() string { return v.msg }

// Probe runs one probe against t, bounded by probe.Timeout. A probe that runs
// out of it is a Timeout; if ctx itself ends, the probe is a Failure with
// ctx's error.
func (p *Prober) Probe(ctx context.Context, probe *Probe, t Target) Outcome {
	start := time.Now()
	probeCtx, cancel := context.WithTimeout(ctx, probe.Timeout)
	defer cancel()

	addr := net.JoinHostPort(t.Host, strconv.Itoa(t.Port))
	var err error
	switch h := &probe.Spec.ProbeHandler; {
	case h.HTTPGet != nil:
		err = p.probeHTTP(probeCtx, h.HTTPGet, addr)
	case h.TCPSocket != nil:
		err = p.probeTCP(probeCtx, addr)
	case h.GRPC != nil:
		service := ""
		if h.GRPC.Service != nil {
			service = *h.GRPC.Service
		}
		err = p.probeGRPC(probeCtx, service, addr)
	default:
		err = errors.New("the probe has no httpGet, tcpSocket or grpc handler")
	}

	out := Outcome{Result: Success, Duration: time.Since(start)}
	var v *verdict
	switch {
	case err == nil:
	case ctx.Err() != nil:
		out.Result, out.Message = Failure, ctx.Err().Error()
	case errors.As(err, &v):
		out.Result, out.Message = Failure, v.msg
	// A gRPC server sees the deadline too (grpc-timeout) and may end the
	// stream a moment before the client's own timer fires: its
	// DeadlineExceeded is the same timeout.
	case probeCtx.Err() != nil, status.Code(err) == codes.DeadlineExceeded:
		out.Result, out.Message = Timeout, fmt.Sprintf("probe timed out after %v", probe.Timeout)
	default:
		out.Result, out.Message = Failure, err.Error()
	}
	out.Message = shorten(out.Message)
	return out
}

func (p *Prober) probeHTTP(ctx context.Context, action *corev1.HTTPGetAction, addr string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, probeURL(action, addr), nil)
	if err != nil {
		return fmt.Errorf("build HTTP probe request: %w", err)
	}
	for _, h := range action.HTTPHeaders {
		req.Header.Add(h.Name, h.Value)
	}
	// As the kubelet's newProbeRequest: defaults unless the probe sets them,
	// and an explicitly empty Accept sends none.
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header.Set("User-Agent", userAgent)
	}
	if _, ok := req.Header["Accept"]; !ok {
		req.Header.Set("Accept", "*/*")
	} else if req.Header.Get("Accept") == "" {
		req.Header.Del("Accept")
	}
	req.Host = req.Header.Get("Host")

	res, err := p.http.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = res.Body.Close() }()
	// Read, as the kubelet does, so that a server failing mid-body fails the
	// probe; the limit keeps a pod from making the agent read without end.
	if _, err := io.Copy(io.Discard, io.LimitReader(res.Body, maxBody)); err != nil {
		return fmt.Errorf("read HTTP probe response: %w", err)
	}
	if res.StatusCode < http.StatusOK || res.StatusCode >= http.StatusBadRequest {
		return &verdict{fmt.Sprintf("HTTP probe failed with statuscode: %d", res.StatusCode)}
	}
	return nil
}

// probeURL is the kubelet's formatURL: the path may carry a query, and the
// scheme and host are always the probe's, whatever the path says.
func probeURL(action *corev1.HTTPGetAction, addr string) string {
	u, err := url.Parse(action.Path)
	if err != nil {
		u = &url.URL{Path: action.Path}
	}
	u.Scheme = strings.ToLower(string(action.Scheme))
	if u.Scheme == "" {
		u.Scheme = "http"
	}
	u.Host = addr
	return u.String()
}

func (p *Prober) probeTCP(ctx context.Context, addr string) error {
	conn, err := p.dialer.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	// The connection was made, which is all a TCP probe asks; an error
	// closing it says nothing about the pod.
	_ = conn.Close()
	return nil
}

func (p *Prober) probeGRPC(ctx context.Context, service, addr string) error {
	// passthrough, as the kubelet's grpc.DialContext did: the address is an
	// IP, nothing to resolve. The custom dialer also keeps gRPC off any proxy.
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUserAgent(userAgent),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return p.dialer.DialContext(ctx, "tcp", addr)
		}),
	)
	if err != nil {
		return fmt.Errorf("create gRPC client for %s: %w", addr, err)
	}
	defer func() { _ = conn.Close() }()

	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		switch status.Code(err) {
		case codes.Unimplemented:
			return &verdict{"the server does not implement the gRPC health protocol (grpc.health.v1.Health)"}
		case codes.NotFound:
			return &verdict{fmt.Sprintf("gRPC health: unknown service %q", service)}
		}
		return err
	}
	if s := resp.GetStatus(); s != healthpb.HealthCheckResponse_SERVING {
		return &verdict{fmt.Sprintf("gRPC service unhealthy (responded with %q)", s.String())}
	}
	return nil
}

// shorten cuts a message to maxMessage bytes on a rune boundary.
func shorten(msg string) string {
	if len(msg) <= maxMessage {
		return msg
	}
	cut := maxMessage - len("…")
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + "…"
}
