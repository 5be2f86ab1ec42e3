package probe

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// BenchmarkProbe is one probe against an in-process server, whose own CPU
// and allocations are counted too; BenchmarkLoad1100 leaves them out.
func BenchmarkProbe(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	b.Cleanup(srv.Close)
	httpTarget := targetAt(b, srv.Listener.Addr().String())

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			_ = conn.Close()
		}
	}()
	tcpTarget := targetAt(b, l.Addr().String())

	grpcTarget := startGRPC(b, func(s *grpc.Server) { healthpb.RegisterHealthServer(s, health.NewServer()) })

	prober := NewProber()
	for _, bc := range []struct {
		name   string
		probe  *Probe
		target Target
	}{
		{"http", mustParse(b, `{"httpGet":{"port":1,"path":"/ready"}}`), httpTarget},
		{"tcp", mustParse(b, `{"tcpSocket":{"port":1}}`), tcpTarget},
		{"grpc", mustParse(b, `{"grpc":{"port":1}}`), grpcTarget},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if out := prober.Probe(b.Context(), bc.probe, bc.target); out.Result != Success {
					b.Fatalf("%s: %s", out.Result, out.Message)
				}
			}
		})
	}
}

func BenchmarkParse(b *testing.B) {
	const value = `{"container":"web","httpGet":{"path":"/ready","port":"http","httpHeaders":[{"name":"X-Probe","value":"podslo"}]},` +
		`"periodSeconds":1,"periodMilliseconds":-900,"timeoutSeconds":1,"timeoutMilliseconds":-900,"failureThreshold":2}`
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(value, 0); err != nil {
			b.Fatal(err)
		}
	}
}
