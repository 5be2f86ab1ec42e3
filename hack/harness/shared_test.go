package harness

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
)

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{errors.New("no cluster"), 1},
		{fmt.Errorf("the exporter's metrics disagree: %w", ErrMismatch), 2},
	} {
		if got := ExitCode(tc.err); got != tc.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestFreePortIsFree(t *testing.T) {
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatalf("port %d: %v", port, err)
	}
	l.Close()
}

func TestRetry(t *testing.T) {
	unavailable := apierrors.NewServiceUnavailable("down")
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "p", errors.New("x"))
	calls := func(errs ...error) (func() error, *int) {
		n := 0
		return func() error {
			n++
			if n <= len(errs) {
				return errs[n-1]
			}
			return nil
		}, &n
	}
	ctx := context.Background()
	fn, n := calls(unavailable, unavailable)
	if err := Retry(ctx, Unavailable, 0, fn); err != nil || *n != 3 {
		t.Errorf("through an outage: err %v after %d calls, want nil after 3", err, *n)
	}
	fn, n = calls(conflict)
	if err := Retry(ctx, Unavailable, 0, fn); !apierrors.IsConflict(err) || *n != 1 {
		t.Errorf("a conflict: err %v after %d calls, want it at once", err, *n)
	}
	fn, n = calls(unavailable, unavailable, unavailable)
	if err := Retry(ctx, Overloaded, 2, fn); !apierrors.IsServiceUnavailable(err) || *n != 2 {
		t.Errorf("2 attempts: err %v after %d calls", err, *n)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	fn, _ = calls(unavailable)
	if err := Retry(cctx, Unavailable, 0, fn); !errors.Is(err, context.Canceled) || !apierrors.IsServiceUnavailable(err) {
		t.Errorf("cancelled: err %v, want both the context's and the last", err)
	}
}

func TestCreateNamespacesTwice(t *testing.T) {
	cs := fake.NewClientset()
	for range 2 {
		if err := CreateNamespaces(context.Background(), cs, "a", "b"); err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range []string{"a", "b"} {
		if _, err := cs.CoreV1().ServiceAccounts(ns).Get(context.Background(), "default", metav1.GetOptions{}); err != nil {
			t.Errorf("namespace %s: %v", ns, err)
		}
	}
}

// The process's output is in its log, its exit is reported with its
// status, and it leads a process group of its own.
func TestStartProcess(t *testing.T) {
	log := filepath.Join(t.TempDir(), "p.log")
	p, err := StartProcess(exec.Command("/bin/sh", "-c", "echo started; exit 3"), log, false)
	if err != nil {
		t.Fatal(err)
	}
	if pgid, err := syscall.Getpgid(p.Cmd.Process.Pid); err == nil && pgid != p.Cmd.Process.Pid {
		t.Errorf("process group %d, want its own %d", pgid, p.Cmd.Process.Pid)
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("no exit")
	}
	at, err := p.Exit()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 || at.Before(p.Started) {
		t.Errorf("exit %v at %v", err, at)
	}
	// A second start appends to the log when asked to.
	p, err = StartProcess(exec.Command("/bin/sh", "-c", "echo again"), log, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Exit(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(log)
	if err != nil || strings.TrimSpace(string(b)) != "started\nagain" {
		t.Errorf("log %q (%v)", b, err)
	}
	// A stopped process group is ended by a signal to the group.
	p, err = StartProcess(exec.Command("/bin/sh", "-c", "sleep 60 & wait"), log, true)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("SIGKILL to the group did not end it")
	}
}
