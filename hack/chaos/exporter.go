package main

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/podslo/podslo/hack/harness"
)

// supervisor runs the exporter as a child process, restarts it when it dies
// (as a kubelet would, after a second: a crash loop is part of what the run
// shows), and records every process: start, /readyz, exit.
type supervisor struct {
	bin, logDir string
	args        []string
	URL         string
	log         *slog.Logger

	mu    sync.Mutex
	insts []instance
	cur   *exec.Cmd
	done  chan struct{} // closed when cur exits
	// downUntil: a planned down time after a kill; the supervisor does not
	// restart the process before it.
	downUntil time.Time
	stopped   bool
	changed   chan struct{}
}

// newSupervisor prepares the exporter: a copy of the binary under another
// name (a broad `pkill podslo` by someone else on a shared machine must not
// reach it), its flags and its address.
func newSupervisor(o *Options, kubeconfig, stateDir string, log *slog.Logger) (*supervisor, error) {
	bin := filepath.Join(o.Workdir, "slo-exporter")
	b, err := os.ReadFile(o.Podslo)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		return nil, err
	}
	port, err := harness.FreePort()
	if err != nil {
		return nil, err
	}
	logDir := filepath.Join(o.Workdir, "exporter-logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	return &supervisor{
		bin: bin, logDir: logDir, log: log,
		URL: fmt.Sprintf("http://127.0.0.1:%d", port),
		args: []string{"exporter", "--kubeconfig", kubeconfig, "--state-dir", stateDir,
			"--listen-address", fmt.Sprintf("127.0.0.1:%d", port),
			"--sandbox-creation-timeout", o.SandboxTimeout.String(),
			// Debug: each recorded sample is logged with its pod, what the
			// run reads when a family is off (podobs.go).
			"--log-level", "debug"},
		changed: make(chan struct{}),
	}, nil
}

// run starts the exporter and keeps it running until ctx ends or stop.
func (s *supervisor) run(ctx context.Context) {
	for {
		s.mu.Lock()
		if s.stopped || ctx.Err() != nil {
			s.mu.Unlock()
			return
		}
		wait := time.Until(s.downUntil)
		s.mu.Unlock()
		if wait > 0 {
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
			continue
		}
		if err := s.startOne(ctx); err != nil {
			s.log.Error("Starting the exporter failed", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		s.mu.Lock()
		done := s.done
		s.mu.Unlock()
		<-done
		s.mu.Lock()
		in := s.insts[len(s.insts)-1]
		planned := in.Killed || s.stopped
		s.mu.Unlock()
		if !planned {
			s.log.Warn("The exporter exited by itself; restarting it in 1s", "n", in.N, "status", in.Status, "fatal", in.Fatal)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}
}

func (s *supervisor) startOne(ctx context.Context) error {
	s.mu.Lock()
	n := len(s.insts) + 1
	s.mu.Unlock()
	logPath := filepath.Join(s.logDir, fmt.Sprintf("exporter-%03d.log", n))
	p, err := harness.StartProcess(exec.Command(s.bin, s.args...), logPath, false)
	if err != nil {
		return fmt.Errorf("start the exporter: %w", err)
	}
	cmd := p.Cmd
	done := make(chan struct{})
	s.mu.Lock()
	s.insts = append(s.insts, instance{N: n, Start: p.Started})
	idx := len(s.insts) - 1
	s.cur, s.done = cmd, done
	s.notify()
	s.mu.Unlock()
	go func() {
		exit, err := p.Exit()
		status := "exit 0"
		if err != nil {
			status = err.Error()
		}
		fatal := firstFatal(logPath)
		s.mu.Lock()
		in := &s.insts[idx]
		in.Exit, in.Status, in.Fatal = exit, status, fatal
		s.cur = nil
		s.notify()
		s.mu.Unlock()
		close(done)
	}()
	go s.watchReady(ctx, idx, done)
	return nil
}

// watchReady polls /readyz every 50 ms until the first 200 or the exit.
func (s *supervisor) watchReady(ctx context.Context, idx int, done chan struct{}) {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-done:
			return
		case <-t.C:
		}
		if get(ctx, s.URL+"/readyz") == http.StatusOK {
			now := time.Now()
			s.mu.Lock()
			if s.insts[idx].Exit.IsZero() {
				s.insts[idx].Ready = now
				s.notify()
			}
			s.mu.Unlock()
			return
		}
	}
}

func (s *supervisor) notify() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// kill SIGKILLs the exporter's process group and keeps it down for down.
func (s *supervisor) kill(down time.Duration) (instance, error) {
	s.mu.Lock()
	cmd, done := s.cur, s.done
	if cmd == nil {
		s.mu.Unlock()
		return instance{}, fmt.Errorf("no exporter runs")
	}
	s.downUntil = time.Now().Add(down)
	s.insts[len(s.insts)-1].Killed = true
	s.mu.Unlock()
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.insts[len(s.insts)-1], nil
}

// stop ends the exporter for good: SIGTERM, SIGKILL after 15 s.
func (s *supervisor) stop() {
	s.mu.Lock()
	s.stopped = true
	cmd, done := s.cur, s.done
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		s.log.Warn("The exporter ignored SIGTERM, killing it")
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// downBeyond reports whether no exporter runs and none will start before t
// (a planned down time after a kill).
func (s *supervisor) downBeyond(t time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur == nil && s.downUntil.After(t)
}

// instances returns a copy of every process record.
func (s *supervisor) instances() []instance {
	s.mu.Lock()
	insts := append([]instance(nil), s.insts...)
	s.mu.Unlock()
	for i := range insts {
		insts[i].Held = heldChecks(filepath.Join(s.logDir, fmt.Sprintf("exporter-%03d.log", insts[i].N)))
	}
	return insts
}

// firstLog is the time of the first line holding msg, at or after after,
// in the logs of every exporter process; zero if there is none.
func (s *supervisor) firstLog(after time.Time, msg string) time.Time {
	s.mu.Lock()
	n := len(s.insts)
	s.mu.Unlock()
	var first time.Time
	for i := 1; i <= n; i++ {
		for _, line := range grepLog(filepath.Join(s.logDir, fmt.Sprintf("exporter-%03d.log", i)), msg) {
			if at, ok := logTime(line); ok && !at.Before(after) && (first.IsZero() || at.Before(first)) {
				first = at
			}
		}
	}
	return first
}

// heldChecks reads from an exporter's log when its timeout check held
// (pipeline.CheckTimeouts logs each change): the oracle must not expect a
// timeout counted then, nor allow one.
func heldChecks(path string) []span {
	var held []span
	for _, line := range grepLog(path, "Holding sandbox creation timeouts", "current again, checking sandbox creation timeouts") {
		at, ok := logTime(line)
		if !ok {
			continue
		}
		switch open := len(held) > 0 && held[len(held)-1].To.IsZero(); {
		case strings.Contains(line, "Holding"):
			if !open {
				held = append(held, span{From: at})
			}
		case open:
			held[len(held)-1].To = at
		}
	}
	return held
}

// logTime is the time= of a log line of slog's text handler.
func logTime(line string) (time.Time, bool) {
	v, ok := strings.CutPrefix(line, "time=")
	if !ok {
		return time.Time{}, false
	}
	v, _, _ = strings.Cut(v, " ")
	t, err := time.Parse(time.RFC3339Nano, v)
	return t, err == nil
}

// ready reports whether the current process answered /readyz.
func (s *supervisor) ready() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.insts) == 0 {
		return false
	}
	in := s.insts[len(s.insts)-1]
	return in.Exit.IsZero() && !in.Ready.IsZero()
}

// readySince is when the current process became ready (zero if it is not).
func (s *supervisor) readySince() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.insts) == 0 {
		return time.Time{}
	}
	in := s.insts[len(s.insts)-1]
	if !in.Exit.IsZero() {
		return time.Time{}
	}
	return in.Ready
}

// waitReady waits until a process is ready, for at most timeout.
func (s *supervisor) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.After(timeout)
	for {
		s.mu.Lock()
		ch := s.changed
		s.mu.Unlock()
		if s.ready() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("the exporter was not ready within %s", timeout)
		case <-ch:
		}
	}
}

// firstFatal sums up how a process died from its log: a Go runtime fatal
// error with its signal and the first frame outside the runtime (where it
// died), a panic, or else the last error it logged. Addresses are left out
// so that the same crash reads the same every time.
func firstFatal(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var what, signal, first string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case what == "" && (strings.HasPrefix(line, "fatal error:") || strings.HasPrefix(line, "panic:")):
			what = line
		case what != "" && signal == "" && strings.HasPrefix(line, "[signal "):
			// [signal SIGBUS: bus error code=0x2 addr=0x7f... pc=0x...]
			signal = line
			if i := strings.Index(signal, " addr="); i >= 0 {
				signal = signal[:i] + "]"
			}
		case what != "" && strings.HasPrefix(line, "goroutine "):
		case what != "" && line == "" && first != "":
			// The end of the crashing goroutine's stack.
			return strings.TrimSpace(what + " " + signal + " in " + first)
		case what != "" && line != "" && !strings.HasPrefix(line, "\t") && !strings.HasPrefix(line, "runtime.") && strings.Contains(line, "("):
			frame := line
			if i := strings.LastIndex(frame, "("); i > 0 {
				frame = frame[:i]
			}
			// The state store's own frame says more than a helper's.
			if strings.Contains(frame, "/badger/") {
				return strings.TrimSpace(what + " " + signal + " in " + frame)
			}
			if first == "" {
				first = frame
			}
		}
	}
	if what != "" && first != "" {
		return strings.TrimSpace(what + " " + signal + " in " + first)
	}
	if what != "" {
		return strings.TrimSpace(what + " " + signal)
	}
	return lastErrorLine(path)
}

func lastErrorLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	for i := len(lines) - 1; i >= 0 && i >= len(lines)-5; i-- {
		if strings.HasPrefix(lines[i], "podslo:") || strings.Contains(lines[i], "level=ERROR") {
			return lines[i]
		}
	}
	return ""
}
