package testenv

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os/exec"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Process is one podslo exporter run as a separate process, so that a
// test can kill it without warning.
type Process struct {
	Cmd *exec.Cmd
	// URL is where it serves, http://host:port.
	URL string
	// Done is closed once the process has exited.
	Done chan struct{}
}

// StartExporterProcess runs `bin exporter` with args on a free loopback
// port and returns once it is ready; t.Cleanup kills it, also when the
// test fails, and then logs its output if the test failed.
func StartExporterProcess(t testing.TB, bin string, args ...string) *Process {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"exporter", "--listen-address", "127.0.0.1:0", "--log-format", "json"}, args...)...)
	DieWithParent(cmd)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &Process{Cmd: cmd, Done: make(chan struct{})}
	var (
		mu   sync.Mutex
		logs bytes.Buffer
	)
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			logs.WriteString(sc.Text() + "\n")
			mu.Unlock()
			var line struct{ Msg, Address string }
			if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "Serving metrics" {
				addr <- line.Address
			}
		}
		_ = cmd.Wait()
		close(p.Done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.Done
		if t.Failed() {
			mu.Lock()
			t.Logf("exporter pid %d logs:\n%s", cmd.Process.Pid, logs.String())
			mu.Unlock()
		}
	})
	select {
	case a := <-addr:
		p.URL = "http://" + a
	case <-p.Done:
		t.Fatal("exporter exited before serving")
	case <-time.After(30 * time.Second):
		t.Fatal("exporter did not serve within 30s")
	}
	WaitReady(t, p.URL, "exporter")
	return p
}

// Kill SIGKILLs the process, as the OOM killer or a node loss would, and
// waits until it has exited.
func (p *Process) Kill(t testing.TB) {
	t.Helper()
	require.NoError(t, p.Cmd.Process.Signal(syscall.SIGKILL))
	<-p.Done
}

// Output is a process's stdout and stderr, collected from both pipes.
type Output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// StartCommand starts cmd with its output collected; t.Cleanup kills it,
// also when the test fails, and then logs its output, named what, if the
// test failed. done is closed once cmd has exited.
func StartCommand(t testing.TB, what string, cmd *exec.Cmd) (out *Output, done <-chan struct{}) {
	t.Helper()
	DieWithParent(cmd)
	out = &Output{}
	cmd.Stdout, cmd.Stderr = out, out
	require.NoError(t, cmd.Start(), "start %s", what)
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("%s's output:\n%s", what, out.String())
		}
	})
	return out, exited
}
