package harness

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
)

// Machine is what a run's results say of the machine it ran on.
type Machine struct {
	CPUs     int    `json:"cpus"`
	CPUModel string `json:"cpuModel"`
	MemBytes int64  `json:"memBytes"`
	Kernel   string `json:"kernel"`
	Go       string `json:"go"`
}

// DescribeMachine reads the machine's CPUs, memory and kernel.
func DescribeMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	var info syscall.Sysinfo_t
	if syscall.Sysinfo(&info) == nil {
		m.MemBytes = int64(info.Totalram) * int64(info.Unit)
	}
	var u syscall.Utsname
	if syscall.Uname(&u) == nil {
		var b []byte
		for _, c := range u.Release {
			if c == 0 {
				break
			}
			b = append(b, byte(c))
		}
		m.Kernel = string(b)
	}
	return m
}

// Versions are the versions a run measured.
type Versions struct {
	Podslo     string `json:"podslo"`     // git describe of the repository
	Kubernetes string `json:"kubernetes"` // the testbin directory's name
	Kwok       string `json:"kwok"`
}

// DescribeVersions reads them from the checkout at repo and the binary
// directories: testbin is named after the Kubernetes version, kwokbin
// kwok-<version> (make testbin kwokbin).
func DescribeVersions(ctx context.Context, repo, testbin, kwokbin string) Versions {
	v := Versions{Kubernetes: filepath.Base(testbin), Kwok: strings.TrimPrefix(filepath.Base(kwokbin), "kwok-")}
	if out, err := exec.CommandContext(ctx, "git", "-C", repo, "describe", "--always", "--dirty").Output(); err == nil {
		v.Podslo = strings.TrimSpace(string(out))
	}
	return v
}
