package main

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

func TestParseMemoryLimit(t *testing.T) {
	for _, tc := range []struct {
		in                string
		bytes, gomemlimit int64
		err               string
	}{
		// The chart's exporter and agent limits; 483183820 is what
		// deploy/exporter/exporter.yaml, rendered from the chart, sets.
		{in: "512Mi", bytes: 536870912, gomemlimit: 483183820},
		{in: "256Mi", bytes: 268435456, gomemlimit: 241591910},
		{in: "1Gi", bytes: 1073741824, gomemlimit: 966367641},
		{in: "1.5Gi", bytes: 1610612736, gomemlimit: 1449551462},
		{in: "500M", bytes: 500000000, gomemlimit: 450000000},
		{in: "2k", bytes: 2000, gomemlimit: 1800},
		{in: "1Ti", bytes: 1 << 40, gomemlimit: 989560464998},
		// No suffix: bytes, truncated as the chart's integer division.
		{in: "1001", bytes: 1001, gomemlimit: 900},
		{in: "0.5Ki", bytes: 512, gomemlimit: 460},
		{in: "512MiB", err: "not a memory quantity"},
		{in: "512mi", err: "not a memory quantity"},
		{in: "512m", err: "not a memory quantity"}, // millibytes: Kubernetes takes it, the chart does not
		{in: "1e9", err: "not a memory quantity"},
		{in: "-1Gi", err: "not a memory quantity"},
		{in: " 512Mi", err: "not a memory quantity"},
		{in: "", err: "not a memory quantity"},
		{in: "0", err: "must be positive"},
		{in: "99999999999Ti", err: "too large"},
		{in: "99999999999.5Ti", err: "too large"},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := parseMemoryLimit(tc.in)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("parseMemoryLimit(%q) = %+v, %v; want an error with %q", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Bytes != tc.bytes || got.GOMEMLIMIT != tc.gomemlimit || got.Quantity != tc.in {
				t.Errorf("parseMemoryLimit(%q) = %+v, want %d bytes, GOMEMLIMIT %d", tc.in, got, tc.bytes, tc.gomemlimit)
			}
		})
	}
}

// TestGOMEMLIMITAsTheManifest reads the exporter's limit and GOMEMLIMIT
// from deploy/exporter/exporter.yaml (rendered from the chart) and checks
// that the harness derives the same GOMEMLIMIT from that limit.
func TestGOMEMLIMITAsTheManifest(t *testing.T) {
	b, err := os.ReadFile("../../deploy/exporter/exporter.yaml")
	if err != nil {
		t.Fatal(err)
	}
	env := regexp.MustCompile(`name: GOMEMLIMIT\s+value: "([0-9]+)"`).FindSubmatch(b)
	limit := regexp.MustCompile(`limits:\s+memory: (\S+)`).FindSubmatch(b)
	if env == nil || limit == nil {
		t.Fatal("deploy/exporter/exporter.yaml: no GOMEMLIMIT or no limits.memory")
	}
	want, err := strconv.ParseInt(string(env[1]), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	got, err := parseMemoryLimit(string(limit[1]))
	if err != nil {
		t.Fatal(err)
	}
	if got.GOMEMLIMIT != want {
		t.Errorf("limit %s: harness GOMEMLIMIT %d, the manifest's %d", limit[1], got.GOMEMLIMIT, want)
	}
}

func TestFindMemoryController(t *testing.T) {
	// This machine's: v1 controllers and a cgroup2 mount with none.
	const v1 = `cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
`
	const v2 = `proc /proc proc rw 0 0
cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid,nodev,noexec,relatime,nsdelegate 0 0
`
	const unifiedOnly = `cgroup /sys/fs/cgroup/cpu cgroup rw,relatime,cpu 0 0
cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0
`
	controllers := map[string]string{
		"/sys/fs/cgroup":         "cpuset cpu io memory hugetlb pids rdma misc\n",
		"/sys/fs/cgroup/unified": "\n",
	}
	read := func(root string) (string, error) {
		c, ok := controllers[root]
		if !ok {
			return "", os.ErrNotExist
		}
		return c, nil
	}
	for _, tc := range []struct {
		name, mounts string
		want         memoryController
		err          string
	}{
		{name: "v1", mounts: v1, want: memoryController{cgroupV1, "/sys/fs/cgroup/memory"}},
		{name: "v2", mounts: v2, want: memoryController{cgroupV2, "/sys/fs/cgroup"}},
		{name: "cgroup2 without memory", mounts: unifiedOnly, err: "cgroup2 at /sys/fs/cgroup/unified has no memory controller"},
		{name: "none", mounts: "proc /proc proc rw 0 0\n", err: "no memory cgroup controller mounted"},
		// memory must be an option of its own, not a prefix of one.
		{name: "memory_recursiveprot", mounts: "cgroup /x cgroup rw,memory_recursiveprot 0 0\n", err: "no memory cgroup controller"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := findMemoryController(tc.mounts, read)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %+v, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestStatValue(t *testing.T) {
	// Excerpts of a v1 memory.stat and memory.oom_control.
	const stat = `cache 1048576
rss 20480000
inactive_file 4096
active_file 8192
total_cache 2097152
total_inactive_file 65536
total_active_file 8192
`
	const oomControl = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"
	for _, tc := range []struct {
		text, key string
		want      int64
		err       string
	}{
		{text: stat, key: "inactive_file", want: 4096},
		{text: stat, key: "total_inactive_file", want: 65536},
		{text: oomControl, key: "oom_kill", want: 3},
		{text: oomControl, key: "oom_kill_disable", want: 0},
		{text: stat, key: "oom_kill", err: "no oom_kill"},
		{text: "oom_kill x\n", key: "oom_kill", err: "oom_kill: strconv.ParseInt"},
	} {
		got, err := statValue(tc.text, tc.key)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("statValue(%q) = %d, %v; want an error with %q", tc.key, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("statValue(%q) = %d, %v; want %d", tc.key, got, err, tc.want)
		}
	}
}

// TestMemCgroupFigures reads a group's files as the kernel lays them out,
// from a plain directory.
func TestMemCgroupFigures(t *testing.T) {
	limit, err := parseMemoryLimit("512Mi")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		v     cgroupVersion
		files map[string]string
		want  MemcgResult
	}{
		{
			name: "v1",
			v:    cgroupV1,
			files: map[string]string{
				"memory.usage_in_bytes":     "300000000\n",
				"memory.max_usage_in_bytes": "536870912\n",
				// Hierarchical total_inactive_file counts, as cAdvisor's.
				"memory.stat":        "inactive_file 1\ntotal_inactive_file 120000000\n",
				"memory.oom_control": "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
				"memory.failcnt":     "42\n",
			},
			want: MemcgResult{CgroupVersion: 1, PeakUsageBytes: 536870912, PeakWorkingSetBytes: 180000000, OOMKills: 0, LimitHits: 42},
		},
		{
			name: "v2",
			v:    cgroupV2,
			files: map[string]string{
				"memory.current": "300000000\n",
				"memory.peak":    "400000000\n",
				"memory.stat":    "anon 1\ninactive_file 100000000\n",
				"memory.events":  "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\noom_group_kill 0\n",
			},
			want: MemcgResult{CgroupVersion: 2, PeakUsageBytes: 400000000, PeakWorkingSetBytes: 200000000, OOMKills: 1, LimitHits: 12},
		},
		{
			// Page cache above usage (a stale stat) is no negative
			// working set.
			name: "inactive above usage",
			v:    cgroupV1,
			files: map[string]string{
				"memory.usage_in_bytes":     "1000\n",
				"memory.max_usage_in_bytes": "5000\n",
				"memory.stat":               "total_inactive_file 2000\n",
				"memory.oom_control":        "oom_kill 0\n",
				"memory.failcnt":            "0\n",
			},
			want: MemcgResult{CgroupVersion: 1, PeakUsageBytes: 5000, PeakWorkingSetBytes: 0},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, text := range tc.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			c := &memCgroup{ctl: memoryController{Version: tc.v, Root: filepath.Dir(dir)}, Path: dir, limit: limit}
			got, err := c.result()
			if err != nil {
				t.Fatal(err)
			}
			tc.want.Limit, tc.want.LimitBytes, tc.want.GOMEMLIMIT, tc.want.WorkingSetSamples = "512Mi", 536870912, 483183820, 1
			if *got != tc.want {
				t.Errorf("got %+v\nwant %+v", *got, tc.want)
			}
		})
	}
	t.Run("missing oom_kill", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "memory.oom_control"), []byte("oom_kill_disable 0\nunder_oom 0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		c := &memCgroup{ctl: memoryController{Version: cgroupV1}, Path: dir}
		if _, err := c.oomKills(); err == nil || !strings.Contains(err.Error(), "no oom_kill") {
			t.Errorf("oomKills without an oom_kill line: %v", err)
		}
	})
	t.Run("missing file", func(t *testing.T) {
		c := &memCgroup{ctl: memoryController{Version: cgroupV1}, Path: t.TempDir()}
		if _, err := c.workingSet(); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("workingSet of an empty directory: %v", err)
		}
	})
}

func TestParseOptionsKSM(t *testing.T) {
	if _, err := parseOptions(nil); err == nil || !strings.Contains(err.Error(), `--ksm is required`) {
		t.Errorf("no --ksm: %v, want an error that says it is required", err)
	}
	o, err := parseOptions([]string{"--ksm", ""})
	if err != nil || o.KSM != "" || o.memoryLimit != nil {
		t.Errorf(`--ksm "": %+v, %v`, o, err)
	}
	o, err = parseOptions([]string{"--ksm", "", "--podslo-memory-limit", "512Mi"})
	if err != nil || o.memoryLimit == nil || o.memoryLimit.GOMEMLIMIT != 483183820 {
		t.Errorf("--podslo-memory-limit 512Mi: %+v, %v", o, err)
	}
	if _, err := parseOptions([]string{"--ksm", "", "--podslo-memory-limit", "512MB"}); err == nil || !strings.Contains(err.Error(), "--podslo-memory-limit") {
		t.Errorf("--podslo-memory-limit 512MB: %v, want an error naming the flag", err)
	}
}
