package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/podslo/podslo/hack/harness"
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
	bin      string
	args     []string
	logPath  string
	// limit, when set, runs the process in a memory cgroup of its own
	// with that hard limit and GOMEMLIMIT, as the chart runs the exporter.
	limit *memoryLimit
	ctl   memoryController
	memcg *memCgroup
	// starts counts the starts, for the cgroup's name.
	starts int
	cmd    *exec.Cmd
	done   chan struct{}
	// waitErr is cmd.Wait's error, read once done is closed.
	waitErr error
	// stopping is set before the harness itself ends the process, so that
	// its exit is not reported as a failure.
	stopping bool
	// exitReported and oomReported keep failure from reporting the same
	// exit or OOM kills twice.
	exitReported bool
	oomReported  int64
	log          *slog.Logger
	// profile: the process serves /debug/pprof/ (podslo with --profile);
	// profileName names its profiles.
	profile     bool
	profileName string
}

// workingSetPeriod is how often a podslo's cgroup is sampled for its
// working set: the peak working set is the largest sample, so a spike
// shorter than this may be missed (the cgroup's own peak usage is not).
const workingSetPeriod = 250 * time.Millisecond

// start starts the process; with a memory limit, in a new memory cgroup
// that it is in from its first instruction.
func (p *process) start() error {
	p.starts++
	var cmd *exec.Cmd
	// harness.StartProcess adds its own process group (a Ctrl-C reaches
	// the benchmark only, which stops the exporters in order) and the
	// death signal (killed with the benchmark if it dies).
	attr := &syscall.SysProcAttr{}
	var err error
	if p.limit == nil {
		cmd = exec.Command(p.bin, p.args...)
	} else {
		name := fmt.Sprintf("%s%d-%s-%d", cgroupPrefix, os.Getpid(), filepath.Base(strings.TrimSuffix(p.logPath, ".log")), p.starts)
		if p.memcg, err = newMemCgroup(p.ctl, name, *p.limit); err != nil {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
		switch p.ctl.Version {
		case cgroupV1:
			// v1 cannot start a process in a group: a shell moves itself
			// in, then execs podslo under the same pid, so that nothing
			// podslo allocates is charged elsewhere.
			cmd = exec.Command("/bin/sh", append([]string{"-c", `echo $$ > "$1" || exit 125; shift; exec "$@"`,
				"sh", filepath.Join(p.memcg.Path, "cgroup.procs"), p.bin}, p.args...)...)
		case cgroupV2:
			dir, err := os.Open(p.memcg.Path)
			if err != nil {
				return errors.Join(err, p.memcg.remove())
			}
			defer dir.Close()
			cmd = exec.Command(p.bin, p.args...)
			attr.UseCgroupFD, attr.CgroupFD = true, int(dir.Fd())
		}
		// GOMEMLIMIT as the chart sets it: 90% of limits.memory, in
		// bytes (podslo.gomemlimit in charts/podslo/templates/_helpers.tpl).
		cmd.Env = append(os.Environ(), "GOMEMLIMIT="+strconv.FormatInt(p.limit.GOMEMLIMIT, 10))
	}
	cmd.SysProcAttr = attr
	proc, err := harness.StartProcess(cmd, p.logPath, true)
	if err != nil {
		err = fmt.Errorf("%s: %w", p.Name, err)
		if p.memcg != nil {
			err = errors.Join(err, p.memcg.remove())
		}
		return err
	}
	p.cmd, p.done, p.stopping, p.exitReported = cmd, make(chan struct{}), false, false
	done := p.done
	go func() {
		_, err := proc.Exit()
		p.waitErr = err
		close(done)
	}()
	if p.memcg != nil {
		p.oomReported = 0
		p.memcg.startSampling(workingSetPeriod)
		p.log.Info("Started exporter", "name", p.Name, "pid", cmd.Process.Pid, "url", p.URL,
			"cgroup", p.memcg.Path, "limit", p.limit.Quantity, "GOMEMLIMIT", p.limit.GOMEMLIMIT)
	} else {
		p.log.Info("Started exporter", "name", p.Name, "pid", cmd.Process.Pid, "url", p.URL)
	}
	return nil
}

// startExporters starts podslo with and without per-pod series and, unless
// o.KSM is empty, kube-state-metrics with its pods collector only, all
// against kubeconfig. stop must be called on every returned process, also
// on error.
func startExporters(o *Options, kubeconfig string, log *slog.Logger) ([]*process, error) {
	// podslo runs from a copy under another name: on a shared machine, a
	// broad `pkill podslo` meant for someone else's exporters stopped both
	// of the benchmark's halfway through a run.
	bin := filepath.Join(o.Workdir, "slo-exporter")
	if err := copyFile(o.Podslo, bin); err != nil {
		return nil, err
	}
	var ctl memoryController
	if o.memoryLimit != nil {
		var err error
		if ctl, err = detectMemoryController(); err != nil {
			return nil, fmt.Errorf("--podslo-memory-limit: %w", err)
		}
		if err := removeStaleCgroups(ctl); err != nil {
			log.Warn("Stale memory cgroups left", "err", err)
		}
		log.Info("Memory cgroups", "version", int(ctl.Version), "root", ctl.Root)
	}
	var procs []*process
	add := func(p *process, args func(port int) []string) error {
		port, err := harness.FreePort()
		if err != nil {
			return err
		}
		p.URL = fmt.Sprintf("http://127.0.0.1:%d", port)
		p.args = args(port)
		p.log = log
		if err := p.start(); err != nil {
			return err
		}
		procs = append(procs, p)
		return nil
	}
	for _, perPod := range []bool{true, false} {
		name, logName, dir := podsloOn, "podslo-on", filepath.Join(o.Workdir, "state-on")
		if !perPod {
			name, logName, dir = podsloOff, "podslo-off", filepath.Join(o.Workdir, "state-off")
		}
		p := &process{Name: name, StateDir: dir, bin: bin, logPath: filepath.Join(o.Workdir, logName+".log"), limit: o.memoryLimit, ctl: ctl}
		p.profile = o.Profile != ""
		if p.profile {
			p.profileName = logName
		}
		err := add(p, func(port int) []string {
			args := []string{"exporter", "--kubeconfig", kubeconfig, "--state-dir", dir,
				"--listen-address", fmt.Sprintf("127.0.0.1:%d", port),
				"--per-pod-metrics=" + strconv.FormatBool(perPod)}
			if p.profile {
				args = append(args, "--enable-profiling")
			}
			return args
		})
		if err != nil {
			return procs, err
		}
	}
	if o.KSM == "" {
		return procs, nil
	}
	telemetry, err := harness.FreePort()
	if err != nil {
		return procs, err
	}
	p := &process{Name: ksm, bin: o.KSM, logPath: filepath.Join(o.Workdir, "kube-state-metrics.log")}
	return procs, add(p, func(port int) []string {
		return []string{"--resources=pods", "--kubeconfig", kubeconfig,
			"--host", "127.0.0.1", "--port", strconv.Itoa(port),
			"--telemetry-host", "127.0.0.1", "--telemetry-port", strconv.Itoa(telemetry)}
	})
}

// waitReady polls podslo's /readyz (informers synced) or
// kube-state-metrics' /healthz, which answers once it listens: it has no
// readiness on its stores (its /readyz, on the telemetry port, only checks
// its own registry), and only its /metrics shows when it has caught up.
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
				return p.inCgroup()
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

// inCgroup checks that a process with a memory limit runs in its cgroup:
// the limit measured is the one it ran under.
func (p *process) inCgroup() error {
	if p.memcg == nil {
		return nil
	}
	ok, err := p.memcg.contains(p.cmd.Process.Pid)
	if err != nil {
		return fmt.Errorf("%s: %w", p.Name, err)
	}
	if !ok {
		return fmt.Errorf("%s (pid %d) is not in its memory cgroup %s", p.Name, p.cmd.Process.Pid, p.memcg.Path)
	}
	return nil
}

// stop sends SIGTERM, then SIGKILL after 15 s, and removes the process's
// memory cgroup. It returns what failure reports, read before the cgroup
// goes: an exit the harness did not cause, OOM kills.
func (p *process) stop() error {
	failed := p.failure()
	select {
	case <-p.done:
	default:
		p.stopping = true
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			p.log.Warn("Exporter ignored SIGTERM, killing it", "name", p.Name)
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}
	// OOM kills while it shut down count too.
	failed = errors.Join(failed, p.failure())
	if p.memcg != nil {
		failed = errors.Join(failed, p.memcg.remove())
		p.memcg = nil
	}
	return failed
}

// kill SIGKILLs the process, as a node or the OOM killer would, and waits
// for it to exit; its cgroup stays, for its figures, until start or stop.
func (p *process) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	p.stopping = true
	_ = p.cmd.Process.Kill()
	<-p.done
}

// failure reports, once each, an exit that the harness did not cause and
// OOM kills in the process's memory cgroup.
func (p *process) failure() error {
	var errs []error
	select {
	case <-p.done:
		if !p.stopping && !p.exitReported {
			p.exitReported = true
			errs = append(errs, fmt.Errorf("%s (pid %d) exited while being measured: %v; its log is %s (keep it with --keep)",
				p.Name, p.cmd.Process.Pid, p.waitErr, p.logPath))
		}
	default:
	}
	if p.memcg != nil {
		n, err := p.memcg.oomKills()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.Name, err))
		} else if n > p.oomReported {
			errs = append(errs, fmt.Errorf("%s was OOM-killed: oom_kill %d in %s (limit %s, GOMEMLIMIT %d)",
				p.Name, n, p.memcg.Path, p.limit.Quantity, p.limit.GOMEMLIMIT))
			p.oomReported = n
		}
	}
	return errors.Join(errs...)
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
