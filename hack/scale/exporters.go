package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Names of the three exporters, as in the results.
const (
	podsloOn  = "podslo"
	podsloOff = "podslo --per-pod-metrics=false"
	ksm       = "kube-state-metrics"
)

// process is one exporter under measurement.
type process struct {
	Name     string
	URL      string // http://127.0.0.1:port
	StateDir string // podslo only
	cmd      *exec.Cmd
	done     chan struct{}
	log      *slog.Logger
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startExporters starts podslo with and without per-pod series and
// kube-state-metrics with its pods collector only, all against kubeconfig.
// stop must be called on every returned process, also on error.
func startExporters(o *Options, kubeconfig string, log *slog.Logger) ([]*process, error) {
	// podslo runs from a copy under another name: on a shared machine, a
	// broad `pkill podslo` meant for someone else's exporters stopped both
	// of the benchmark's halfway through a run.
	bin := filepath.Join(o.Workdir, "slo-exporter")
	if err := copyFile(o.Podslo, bin); err != nil {
		return nil, err
	}
	var procs []*process
	start := func(name, logName string, args func(port int) []string, bin, stateDir string) error {
		port, err := freePort()
		if err != nil {
			return err
		}
		logf, err := os.Create(filepath.Join(o.Workdir, logName+".log"))
		if err != nil {
			return err
		}
		cmd := exec.Command(bin, args(port)...)
		cmd.Stdout, cmd.Stderr = logf, logf
		// Its own process group, so that a Ctrl-C reaches the benchmark
		// only and the exporters are stopped in order; killed with the
		// benchmark if it dies.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			logf.Close()
			return fmt.Errorf("start %s: %w", name, err)
		}
		p := &process{Name: name, URL: fmt.Sprintf("http://127.0.0.1:%d", port), StateDir: stateDir, cmd: cmd, done: make(chan struct{}), log: log}
		go func() {
			_ = cmd.Wait()
			logf.Close()
			close(p.done)
		}()
		procs = append(procs, p)
		log.Info("Started exporter", "name", name, "pid", cmd.Process.Pid, "url", p.URL)
		return nil
	}
	for _, perPod := range []bool{true, false} {
		name, logName, dir := podsloOn, "podslo-on", filepath.Join(o.Workdir, "state-on")
		if !perPod {
			name, logName, dir = podsloOff, "podslo-off", filepath.Join(o.Workdir, "state-off")
		}
		err := start(name, logName, func(port int) []string {
			return []string{"exporter", "--kubeconfig", kubeconfig, "--state-dir", dir,
				"--listen-address", fmt.Sprintf("127.0.0.1:%d", port),
				"--per-pod-metrics=" + strconv.FormatBool(perPod)}
		}, bin, dir)
		if err != nil {
			return procs, err
		}
	}
	telemetry, err := freePort()
	if err != nil {
		return procs, err
	}
	err = start(ksm, "kube-state-metrics", func(port int) []string {
		return []string{"--resources=pods", "--kubeconfig", kubeconfig,
			"--host", "127.0.0.1", "--port", strconv.Itoa(port),
			"--telemetry-host", "127.0.0.1", "--telemetry-port", strconv.Itoa(telemetry)}
	}, o.KSM, "")
	return procs, err
}

// waitReady polls podslo's /readyz (informers synced) or
// kube-state-metrics' /healthz.
func (p *process) waitReady(ctx context.Context) error {
	path := "/readyz"
	if p.Name == ksm {
		path = "/healthz"
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited", p.Name)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s%s not ready after 2m: %v", p.URL, path, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stop sends SIGTERM, then SIGKILL after 15 s.
func (p *process) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		p.log.Warn("Exporter ignored SIGTERM, killing it", "name", p.Name)
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// cpuSeconds is utime + stime from /proc/<pid>/stat.
func (p *process) cpuSeconds() (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; the fields after its
	// closing parenthesis start at field 3 (state).
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat", p.cmd.Process.Pid)
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	// USER_HZ is 100 on Linux (sysconf(_SC_CLK_TCK)).
	return float64(utime+stime) / 100, nil
}

// memory returns VmRSS and VmHWM (peak RSS) in bytes.
func (p *process) memory() (rss, hwm int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		return 0, 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", k, err)
		}
		if k == "VmRSS" {
			rss = kb << 10
		} else {
			hwm = kb << 10
		}
	}
	return rss, hwm, nil
}

// diskUsage is what du -sb (apparent) and du -s (allocated) report.
func diskUsage(dir string) (apparent, allocated int64, err error) {
	err = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		apparent += info.Size()
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			allocated += st.Blocks * 512
		}
		return nil
	})
	return apparent, allocated, err
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o755)
}
