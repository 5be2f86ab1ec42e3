package main

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// testController is the machine's memory controller. Making cgroups needs
// root and a memory controller: without them the test fails, as `make
// test` must never pass by skipping; only -short skips it.
func testController(t *testing.T) memoryController {
	t.Helper()
	if os.Geteuid() != 0 {
		if testing.Short() {
			t.Skip("needs root to make memory cgroups")
		}
		t.Fatal("needs root to make memory cgroups (or run with -short)")
	}
	ctl, err := detectMemoryController()
	if err != nil {
		if testing.Short() {
			t.Skip(err)
		}
		t.Fatalf("no memory controller: %v", err)
	}
	return ctl
}

// testProcess runs bin args in a memory cgroup with limit q, as the
// harness runs podslo, and stops it in Cleanup.
func testProcess(t *testing.T, ctl memoryController, q, bin string, args ...string) *process {
	t.Helper()
	path, err := exec.LookPath(bin)
	if err != nil {
		t.Fatal(err)
	}
	l, err := parseMemoryLimit(q)
	if err != nil {
		t.Fatal(err)
	}
	p := &process{Name: bin, bin: path, args: args, logPath: filepath.Join(t.TempDir(), bin+".log"),
		limit: &l, ctl: ctl, log: slog.New(slog.DiscardHandler)}
	if err := p.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.memcg != nil {
			_ = p.stop()
		}
	})
	return p
}

func TestCgroupLimitAndGOMEMLIMIT(t *testing.T) {
	ctl := testController(t)
	p := testProcess(t, ctl, "64Mi", "sleep", "600")
	dir := p.memcg.Path
	// The shell moves itself in before it execs; the pid is sleep's once
	// /proc/<pid>/exe is.
	proc := "/proc/" + strconv.Itoa(p.cmd.Process.Pid)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for exe, _ := os.Readlink(proc + "/exe"); !strings.HasSuffix(exe, "/sleep"); exe, _ = os.Readlink(proc + "/exe") {
		select {
		case <-deadline:
			t.Fatalf("pid %d is %q, not sleep, after 10 s", p.cmd.Process.Pid, exe)
		case <-tick.C:
		}
	}
	if err := p.inCgroup(); err != nil {
		t.Fatal(err)
	}
	limitFile := "memory.limit_in_bytes"
	if ctl.Version == cgroupV2 {
		limitFile = "memory.max"
	}
	if got, err := p.memcg.readInt(limitFile); err != nil || got != 64<<20 {
		t.Errorf("%s = %d, %v; want %d", limitFile, got, err, 64<<20)
	}
	env, err := os.ReadFile(proc + "/environ")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains("\x00"+string(env), "\x00GOMEMLIMIT=60397977\x00") {
		t.Errorf("environment lacks GOMEMLIMIT=60397977 (90%% of 64Mi)")
	}
	if err := p.failure(); err != nil {
		t.Errorf("a running process within its limit: %v", err)
	}
	if err := p.stop(); err != nil {
		t.Errorf("stop: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("cgroup %s still there after stop: %v", dir, err)
	}
}

func TestCgroupOOMKillFails(t *testing.T) {
	ctl := testController(t)
	// A worker touching 256 MiB under a 32 MiB limit, with no swap.
	p := testProcess(t, ctl, "32Mi", "stress", "--vm", "1", "--vm-bytes", "256M", "--vm-keep", "--timeout", "60")
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("stress still running after 30 s under a 32Mi limit")
	}
	err := p.failure()
	if err == nil || !strings.Contains(err.Error(), "was OOM-killed: oom_kill 1") || !strings.Contains(err.Error(), "exited while being measured") {
		t.Fatalf("failure() = %v; want an OOM kill and an exit", err)
	}
	if again := p.failure(); again != nil {
		t.Errorf("the same failure reported twice: %v", again)
	}
	r, err := p.memcg.result()
	if err != nil {
		t.Fatal(err)
	}
	if r.OOMKills != 1 || r.PeakUsageBytes < 30<<20 || r.PeakUsageBytes > 32<<20 {
		t.Errorf("result %+v: want 1 OOM kill and a peak near the 32Mi limit", *r)
	}
	dir := p.memcg.Path
	if err := p.stop(); err != nil {
		t.Errorf("stop after the failure was reported: %v", err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("cgroup %s still there after stop: %v", dir, err)
	}
}
