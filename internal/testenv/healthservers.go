package testenv

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// healthServersEnv holds the number of servers and the flapping period for
// the child process; set only there.
const healthServersEnv = "PODSLO_TESTENV_HEALTH_SERVERS"

// HealthServersChild is the body of a package's TestHelperHealthServers,
// which StartHealthServers runs in a child process so that the probed
// servers' CPU is not the prober's. Outside that child it skips. It serves
// HTTP health endpoints on 127.0.0.1, prints "listening <addr>" for each,
// and returns when its stdin closes. One server in ten (index 1, 11, 21…)
// flaps: it fails for every other flap period, so that a prober has
// transitions to write; the others always pass.
func HealthServersChild(t *testing.T) {
	n, flap, ok := strings.Cut(os.Getenv(healthServersEnv), ",")
	if !ok {
		t.Skip("only run by StartHealthServers") // not a test: the helper process's entry
	}
	count, err := strconv.Atoi(n)
	if err != nil {
		t.Fatal(err)
	}
	every, err := time.ParseDuration(flap)
	if err != nil {
		t.Fatal(err)
	}
	for i := range count {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		handler := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			if every > 0 && i%10 == 1 && time.Now().UnixNano()/int64(every)%2 == 1 {
				w.WriteHeader(http.StatusServiceUnavailable)
			}
		})
		srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(l) }()
		fmt.Println("listening", l.Addr())
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// StartHealthServers runs the calling package's TestHelperHealthServers
// (which must call HealthServersChild) in a child process, stopped when tb
// ends, and returns the addresses of its n servers. flap 0 keeps every
// server healthy.
func StartHealthServers(tb testing.TB, n int, flap time.Duration) []string {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHealthServers$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d,%s", healthServersEnv, n, flap))
	cmd.Stderr = os.Stderr
	DieWithParent(cmd)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		tb.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start the health servers: %v", err)
	}
	tb.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	var addrs []string
	lines := bufio.NewScanner(stdout)
	for len(addrs) < n && lines.Scan() {
		if addr, ok := strings.CutPrefix(lines.Text(), "listening "); ok {
			addrs = append(addrs, addr)
		}
	}
	if len(addrs) < n {
		tb.Fatalf("the health servers printed %d of %d addresses: %v", len(addrs), n, lines.Err())
	}
	return addrs
}
