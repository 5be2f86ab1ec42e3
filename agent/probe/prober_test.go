package probe

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
)

func mustParse(t testing.TB, value string) *Probe {
	t.Helper()
	p, err := Parse(value, 0)
	require.NoError(t, err)
	return p
}

// targetAt is the Target for a listener's "host:port".
func targetAt(t testing.TB, addr string) Target {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	n, err := strconv.Atoi(port)
	require.NoError(t, err)
	return Target{Container: "app", Host: host, Port: n}
}

// closedPort is a port on 127.0.0.1 that nothing listens on any more.
func closedPort(t *testing.T) Target {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	target := targetAt(t, l.Addr().String())
	require.NoError(t, l.Close())
	return target
}

// blockUntilCleanup returns a channel closed when the test ends: a slow
// handler waits on it, and on its request's context, instead of sleeping.
func blockUntilCleanup(t *testing.T) <-chan struct{} {
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	return release
}

// slowServer serves HTTP that answers only when the prober gives up or the
// test ends.
func slowServer(t *testing.T) Target {
	release := blockUntilCleanup(t)
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	return targetAt(t, srv.Listener.Addr().String())
}

// seen is what an HTTP test server saw of one probe request.
type seen struct {
	host, path, query string
	header            http.Header
}

func TestProberHTTP(t *testing.T) {
	var otherHostHits atomic.Int32
	otherHost := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { otherHostHits.Add(1) }))
	t.Cleanup(otherHost.Close)
	otherHostURL := strings.Replace(otherHost.URL, "127.0.0.1", "localhost", 1)

	mux := http.NewServeMux()
	mux.HandleFunc("/ok", func(http.ResponseWriter, *http.Request) {})
	mux.HandleFunc("/status/{code}", func(w http.ResponseWriter, r *http.Request) {
		code, _ := strconv.Atoi(r.PathValue("code"))
		w.WriteHeader(code)
	})
	mux.HandleFunc("/redirect-ok", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ok", http.StatusFound) })
	mux.HandleFunc("/redirect-fail", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/status/503", http.StatusMovedPermanently)
	})
	mux.HandleFunc("/redirect-away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, otherHostURL+"/", http.StatusFound)
	})
	mux.HandleFunc("/loop", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/loop", http.StatusFound) })
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(strings.Repeat("x", 1<<20)))
	})
	requests := make(chan seen, 1)
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		requests <- seen{host: r.Host, path: r.URL.Path, query: r.URL.RawQuery, header: r.Header}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	target := targetAt(t, srv.Listener.Addr().String())

	prober := NewProber()
	for _, tc := range []struct {
		name        string
		httpGet     string
		want        Result
		wantMessage string
		check       func(t *testing.T, r seen)
	}{
		{name: "200", httpGet: `"path":"/ok"`, want: Success},
		{name: "399", httpGet: `"path":"/status/399"`, want: Success},
		{name: "400", httpGet: `"path":"/status/400"`, want: Failure, wantMessage: "HTTP probe failed with statuscode: 400"},
		{name: "500", httpGet: `"path":"/status/500"`, want: Failure, wantMessage: "HTTP probe failed with statuscode: 500"},
		{name: "same-host redirect is followed", httpGet: `"path":"/redirect-ok"`, want: Success},
		{name: "same-host redirect to a failure", httpGet: `"path":"/redirect-fail"`, want: Failure, wantMessage: "HTTP probe failed with statuscode: 503"},
		{name: "redirect to another host is not followed but succeeds, as in the kubelet", httpGet: `"path":"/redirect-away"`, want: Success},
		{name: "redirect loop", httpGet: `"path":"/loop"`, want: Failure,
			wantMessage: `Get "/loop": stopped after 10 redirects`},
		{name: "body beyond 10 KiB is not read", httpGet: `"path":"/big"`, want: Success},
		{name: "default path, user agent and accept", httpGet: `"path":"/echo?full=1"`, want: Success, check: func(t *testing.T, r seen) {
			assert.Equal(t, "/echo", r.path)
			assert.Equal(t, "full=1", r.query)
			assert.Equal(t, "podslo-agent-probe/1.0", r.header.Get("User-Agent"))
			assert.Equal(t, "*/*", r.header.Get("Accept"))
			assert.Empty(t, r.header.Get("Accept-Encoding"), "compression is off, as in the kubelet")
			assert.Equal(t, "close", r.header.Get("Connection"), "each probe is a new connection")
			assert.Equal(t, srv.Listener.Addr().String(), r.host)
		}},
		{name: "headers are passed, Host sets the host", want: Success,
			httpGet: `"path":"/echo","httpHeaders":[{"name":"Host","value":"ready.example.com"},{"name":"X-Probe","value":"a"},{"name":"x-probe","value":"b"},{"name":"User-Agent","value":"mine"},{"name":"Accept","value":""}]`,
			check: func(t *testing.T, r seen) {
				assert.Equal(t, "ready.example.com", r.host)
				assert.Equal(t, []string{"a", "b"}, r.header.Values("X-Probe"))
				assert.Equal(t, "mine", r.header.Get("User-Agent"))
				assert.NotContains(t, r.header, "Accept", "an empty Accept is dropped, as in the kubelet")
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			probe := mustParse(t, `{"httpGet":{"port":1,`+tc.httpGet+`}}`)
			out := prober.Probe(t.Context(), probe, target)
			assert.Equal(t, tc.want, out.Result, out.Message)
			assert.Equal(t, tc.wantMessage, out.Message)
			assert.Positive(t, out.Duration)
			if tc.check != nil {
				select {
				case r := <-requests:
					tc.check(t, r)
				default:
					t.Fatal("the server saw no request")
				}
			}
		})
	}
	assert.Zero(t, otherHostHits.Load(), "a redirect made the prober connect to another host")
}

func TestProberHTTPS(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	// Plain HTTP to it is a test case, not news.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	target := targetAt(t, srv.Listener.Addr().String())
	prober := NewProber()

	t.Run("self-signed certificate is accepted, as by the kubelet", func(t *testing.T) {
		out := prober.Probe(t.Context(), mustParse(t, `{"httpGet":{"port":1,"scheme":"HTTPS"}}`), target)
		assert.Equal(t, Outcome{Result: Success, Duration: out.Duration}, out)
	})
	t.Run("plain HTTP to an HTTPS server", func(t *testing.T) {
		out := prober.Probe(t.Context(), mustParse(t, `{"httpGet":{"port":1}}`), target)
		assert.Equal(t, Failure, out.Result)
		assert.Equal(t, "HTTP probe failed with statuscode: 400", out.Message)
	})
}

func TestProberTimeout(t *testing.T) {
	target := slowServer(t)
	// 150ms: timeoutSeconds 1 + timeoutMilliseconds -850.
	probe := mustParse(t, `{"httpGet":{"port":1},"timeoutSeconds":1,"timeoutMilliseconds":-850}`)
	require.Equal(t, 150*time.Millisecond, probe.Timeout)

	out := NewProber().Probe(t.Context(), probe, target)
	assert.Equal(t, Timeout, out.Result)
	assert.Equal(t, "probe timed out after 150ms", out.Message)
	assert.GreaterOrEqual(t, out.Duration, 150*time.Millisecond)
}

func TestProberParentContext(t *testing.T) {
	target := slowServer(t)
	probe := mustParse(t, `{"httpGet":{"port":1}}`)

	t.Run("cancelled before", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		out := NewProber().Probe(ctx, probe, target)
		assert.Equal(t, Outcome{Result: Failure, Message: "context canceled", Duration: out.Duration}, out)
	})
	t.Run("parent deadline before the probe's timeout", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		out := NewProber().Probe(ctx, probe, target)
		assert.Equal(t, Outcome{Result: Failure, Message: "context deadline exceeded", Duration: out.Duration}, out)
	})
}

func TestProberTCP(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			_ = conn.Close()
		}
	}()
	probe := mustParse(t, `{"tcpSocket":{"port":1}}`)
	prober := NewProber()

	t.Run("connected", func(t *testing.T) {
		out := prober.Probe(t.Context(), probe, targetAt(t, l.Addr().String()))
		assert.Equal(t, Outcome{Result: Success, Duration: out.Duration}, out)
		assert.Positive(t, out.Duration)
	})
	t.Run("connection refused", func(t *testing.T) {
		target := closedPort(t)
		out := prober.Probe(t.Context(), probe, target)
		assert.Equal(t, Failure, out.Result)
		assert.Equal(t, fmt.Sprintf("dial tcp 127.0.0.1:%d: connect: connection refused", target.Port), out.Message)
	})
}

func TestProberHTTPConnectionRefused(t *testing.T) {
	target := closedPort(t)
	out := NewProber().Probe(t.Context(), mustParse(t, `{"httpGet":{"port":1,"path":"/healthz"}}`), target)
	assert.Equal(t, Failure, out.Result)
	assert.Equal(t, fmt.Sprintf(`Get "http://127.0.0.1:%d/healthz": dial tcp 127.0.0.1:%[1]d: connect: connection refused`, target.Port), out.Message)
}

// blockingHealth answers health checks only when the test ends.
type blockingHealth struct {
	healthpb.UnimplementedHealthServer
	release <-chan struct{}
}

func (b blockingHealth) Check(ctx context.Context, _ *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-b.release:
		return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
	}
}

// startGRPC serves a gRPC server on 127.0.0.1 until the test ends.
func startGRPC(t testing.TB, register func(*grpc.Server)) Target {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	register(srv)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	return targetAt(t, l.Addr().String())
}

func TestProberGRPC(t *testing.T) {
	withHealth := startGRPC(t, func(s *grpc.Server) {
		h := health.NewServer()
		h.SetServingStatus("ready", healthpb.HealthCheckResponse_SERVING)
		h.SetServingStatus("down", healthpb.HealthCheckResponse_NOT_SERVING)
		h.SetServingStatus("unknown", healthpb.HealthCheckResponse_UNKNOWN)
		healthpb.RegisterHealthServer(s, h)
	})
	withoutHealth := startGRPC(t, func(*grpc.Server) {})
	slow := startGRPC(t, func(s *grpc.Server) {
		healthpb.RegisterHealthServer(s, blockingHealth{release: blockUntilCleanup(t)})
	})
	refused := closedPort(t)
	// The server gave up on the deadline first, as grpc-go's does when
	// the client's grpc-timeout runs out on its side a moment earlier.
	expired := startGRPC(t, func(s *grpc.Server) {
		healthpb.RegisterHealthServer(s, expiredHealth{})
	})

	prober := NewProber()
	for _, tc := range []struct {
		name        string
		grpc        string
		target      Target
		want        Result
		wantMessage string
	}{
		{"server health (no service)", `"port":1`, withHealth, Success, ""},
		{"SERVING", `"port":1,"service":"ready"`, withHealth, Success, ""},
		{"NOT_SERVING", `"port":1,"service":"down"`, withHealth, Failure, `gRPC service unhealthy (responded with "NOT_SERVING")`},
		{"UNKNOWN", `"port":1,"service":"unknown"`, withHealth, Failure, `gRPC service unhealthy (responded with "UNKNOWN")`},
		{"unknown service", `"port":1,"service":"nope"`, withHealth, Failure, `gRPC health: unknown service "nope"`},
		{"no health service", `"port":1`, withoutHealth, Failure, "the server does not implement the gRPC health protocol (grpc.health.v1.Health)"},
		{"slow", `"port":1`, slow, Timeout, "probe timed out after 150ms"},
		{"deadline exceeded on the server's side", `"port":1`, expired, Timeout, "probe timed out after 150ms"},
		{"connection refused", `"port":1`, refused, Failure,
			fmt.Sprintf(`rpc error: code = Unavailable desc = connection error: desc = "transport: Error while dialing: dial tcp 127.0.0.1:%d: connect: connection refused"`, refused.Port)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			probe := mustParse(t, `{"grpc":{`+tc.grpc+`},"timeoutSeconds":1,"timeoutMilliseconds":-850}`)
			out := prober.Probe(t.Context(), probe, tc.target)
			assert.Equal(t, Outcome{Result: tc.want, Message: tc.wantMessage, Duration: out.Duration}, out)
			assert.Positive(t, out.Duration)
		})
	}
}

// TestProberConcurrent shares one Prober between workers, as the agent does,
// for the race detector to watch.
func TestProberConcurrent(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(srv.Close)
	grpcTarget := startGRPC(t, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, health.NewServer()) })
	httpTarget := targetAt(t, srv.Listener.Addr().String())
	probes := []struct {
		probe  *Probe
		target Target
	}{
		{mustParse(t, `{"httpGet":{"port":1}}`), httpTarget},
		{mustParse(t, `{"tcpSocket":{"port":1}}`), httpTarget},
		{mustParse(t, `{"grpc":{"port":1}}`), grpcTarget},
	}
	prober := NewProber()
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			p := probes[i%len(probes)]
			for range 5 {
				out := prober.Probe(t.Context(), p.probe, p.target)
				assert.Equal(t, Success, out.Result, out.Message)
			}
		})
	}
	wg.Wait()
}

// TestProbeURL: whatever the path says, the probe goes to the target.
func TestProbeURL(t *testing.T) {
	for _, tc := range []struct {
		name, path, scheme, addr, want string
	}{
		{"root", "/", "HTTP", "10.0.0.1:80", "http://10.0.0.1:80/"},
		{"query", "/ready?full=1", "HTTP", "10.0.0.1:80", "http://10.0.0.1:80/ready?full=1"},
		{"relative path", "healthz", "HTTP", "10.0.0.1:80", "http://10.0.0.1:80/healthz"},
		{"HTTPS", "/", "HTTPS", "10.0.0.1:443", "https://10.0.0.1:443/"},
		{"IPv6", "/", "HTTP", "[fd00::1]:80", "http://[fd00::1]:80/"},
		{"absolute URL keeps only its path", "http://169.254.169.254/latest/meta-data", "HTTP", "10.0.0.1:80", "http://10.0.0.1:80/latest/meta-data"},
		{"scheme-relative URL", "//evil.example/x", "HTTPS", "10.0.0.1:80", "https://10.0.0.1:80/x"},
		{"user info goes to the pod", "http://user:pw@evil.example/x", "HTTP", "10.0.0.1:80", "http://user:pw@10.0.0.1:80/x"},
		{"unparsable path, as the kubelet", "/%zz", "HTTP", "10.0.0.1:80", "http://10.0.0.1:80/%25zz"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			action := &corev1.HTTPGetAction{Path: tc.path, Scheme: corev1.URIScheme(tc.scheme)}
			assert.Equal(t, tc.want, probeURL(action, tc.addr))
		})
	}
}

func TestShorten(t *testing.T) {
	for _, tc := range []struct {
		name, msg, want string
	}{
		{"short", "connection refused", "connection refused"},
		{"exactly the limit", strings.Repeat("a", maxMessage), strings.Repeat("a", maxMessage)},
		{"over the limit", strings.Repeat("a", maxMessage+1), strings.Repeat("a", maxMessage-len("…")) + "…"},
		{"cut before a rune", strings.Repeat("a", maxMessage-4) + "ééé", strings.Repeat("a", maxMessage-4) + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := shorten(tc.msg)
			assert.Equal(t, tc.want, got)
			assert.LessOrEqual(t, len(got), maxMessage)
			assert.True(t, utf8.ValidString(got))
		})
	}
}

// expiredHealth answers every check with the status a server sends when
// the client's deadline has passed on its side.
type expiredHealth struct {
	healthpb.UnimplementedHealthServer
}

func (expiredHealth) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	return nil, status.Error(codes.DeadlineExceeded, "context deadline exceeded")
}
