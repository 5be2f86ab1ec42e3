package demo

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

// binary is one program the demo runs, and how the Makefile builds it.
type binary struct {
	name   string
	module string // directory of its Go module, under the source tree
	pkg    string
	kwok   bool // lives in KwokBinDir
	// kubernetes: stamped with its version as the Makefile stamps it
	// (K8S_VERSION_LDFLAGS): unstamped, it reports v0.0.0-master, and the
	// Makefile, which shares the cache, would link it again.
	kubernetes bool
}

var binaries = []binary{
	{name: "etcd", module: "hack/tools", pkg: "./cmd/etcd"},
	{name: "kube-apiserver", module: "hack/tools", pkg: "k8s.io/kubernetes/cmd/kube-apiserver", kubernetes: true},
	{name: "kube-controller-manager", module: "hack/tools", pkg: "k8s.io/kubernetes/cmd/kube-controller-manager", kubernetes: true},
	{name: "kube-scheduler", module: "hack/tools", pkg: "k8s.io/kubernetes/cmd/kube-scheduler", kubernetes: true},
	{name: "kwok", module: "hack/kwok", pkg: "sigs.k8s.io/kwok/cmd/kwok", kwok: true},
	{name: "kwokctl", module: "hack/kwok", pkg: "sigs.k8s.io/kwok/cmd/kwokctl", kwok: true},
}

// binDirs resolves the default binary directories as the Makefile does:
// versioned by the modules that pin them, so that a version bump builds
// anew and nothing is built twice.
func (d *Demo) binDirs() error {
	if d.opts.BinDir == "" {
		v, err := moduleVersion(filepath.Join(d.opts.SourceDir, "hack", "tools", "go.mod"), "k8s.io/kubernetes")
		if err != nil {
			return err
		}
		cache, err := os.UserCacheDir()
		if err != nil {
			return fmt.Errorf("find the binary cache: %w", err)
		}
		d.opts.BinDir = filepath.Join(cache, "podslo", "testbin", v)
	}
	if d.opts.KwokBinDir == "" {
		v, err := moduleVersion(filepath.Join(d.opts.SourceDir, "hack", "kwok", "go.mod"), "sigs.k8s.io/kwok")
		if err != nil {
			return err
		}
		d.opts.KwokBinDir = filepath.Join(d.opts.BinDir, "kwok-"+v)
	}
	return nil
}

func moduleVersion(gomod, module string) (string, error) {
	data, err := os.ReadFile(gomod)
	if err != nil {
		return "", fmt.Errorf("read the pinned version of %s: %w", module, err)
	}
	m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(module) + `\s+(v\S+)`).FindSubmatch(data)
	if m == nil {
		return "", fmt.Errorf("%s does not require %s", gomod, module)
	}
	return string(m[1]), nil
}

func (d *Demo) path(b binary) string {
	if b.kwok {
		return filepath.Join(d.opts.KwokBinDir, b.name)
	}
	return filepath.Join(d.opts.BinDir, b.name)
}

// ensureBinaries builds the missing binaries, each with a progress bar:
// a first run compiles a control plane from source, several minutes on a
// small machine.
func (d *Demo) ensureBinaries(ctx context.Context) error {
	for _, b := range binaries {
		out := d.path(b)
		if _, err := os.Stat(out); err == nil {
			continue
		}
		if err := d.buildBinary(ctx, b, out); err != nil {
			return err
		}
	}
	return nil
}

// buildBinary builds b into out as the Makefile does.
func (d *Demo) buildBinary(ctx context.Context, b binary, out string) error {
	dir := filepath.Join(d.opts.SourceDir, b.module)
	// The bar counts packages: go build -v names each one it compiles, and
	// go list -deps says how many there can be (cached ones are not named,
	// so a warm build ends early and jumps to 100%).
	// CGO_ENABLED=0, as the Makefile builds them: the same configuration
	// shares the compiled packages, with the Makefile's builds and with
	// podslo's (a cold make test compiled kube-scheduler a second time for
	// this package's test when it differed).
	env := append(os.Environ(), "CGO_ENABLED=0")
	list := exec.CommandContext(ctx, "go", "list", "-deps", b.pkg)
	list.Dir = dir
	list.Env = env
	deps, err := list.Output()
	if err != nil {
		return fmt.Errorf("list the packages of %s: %w", b.name, err)
	}
	bar := newProgress(d.opts.Out, "building "+b.name, bytes.Count(deps, []byte("\n")))
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return fmt.Errorf("build %s: %w", b.name, err)
	}
	args := []string{"build", "-v", "-o", out + ".tmp"}
	if b.kubernetes {
		flags, err := kubernetesLDFlags(ctx, dir)
		if err != nil {
			return fmt.Errorf("build %s: %w", b.name, err)
		}
		args = append(args, "-ldflags", flags)
	}
	cmd := exec.CommandContext(ctx, "go", append(args, b.pkg)...)
	cmd.Dir = dir
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return fmt.Errorf("build %s: %w", b.name, err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("build %s: %w", b.name, err)
	}
	var errs bytes.Buffer
	lines := bufio.NewScanner(stderr)
	for lines.Scan() {
		if bytes.HasPrefix(lines.Bytes(), []byte("#")) || errs.Len() > 0 {
			errs.Write(lines.Bytes())
			errs.WriteByte('\n')
			continue
		}
		bar.add(1)
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("build %s in %s: %w\n%s", b.name, dir, err, errs.String())
	}
	bar.finish()
	if err := os.Rename(out+".tmp", out); err != nil {
		return fmt.Errorf("build %s: %w", b.name, err)
	}
	return nil
}

// kubernetesLDFlags stamps a Kubernetes binary of the module in dir with
// the k8s.io/kubernetes version it pins, as the Makefile's
// K8S_VERSION_LDFLAGS (and Kubernetes' own hack/lib/version.sh) does; the
// build date is the module's release time, not the day of the build.
func kubernetesLDFlags(ctx context.Context, dir string) (string, error) {
	version, err := moduleVersion(filepath.Join(dir, "go.mod"), "k8s.io/kubernetes")
	if err != nil {
		return "", err
	}
	list := exec.CommandContext(ctx, "go", "list", "-m", "-f", `{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}`, "k8s.io/kubernetes")
	list.Dir = dir
	date, err := list.Output()
	if err != nil {
		return "", fmt.Errorf("the release time of k8s.io/kubernetes %s: %w", version, err)
	}
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if len(parts) < 2 {
		return "", fmt.Errorf("k8s.io/kubernetes version %q is not vMAJOR.MINOR.PATCH", version)
	}
	var flags []string
	for _, pkg := range []string{"k8s.io/client-go/pkg/version", "k8s.io/component-base/version"} {
		flags = append(flags, "-X", pkg+".gitVersion="+version, "-X", pkg+".gitMajor="+parts[0], "-X", pkg+".gitMinor="+parts[1],
			"-X", pkg+".gitTreeState=clean", "-X", pkg+".buildDate="+strings.TrimSpace(string(date)))
	}
	return strings.Join(flags, " "), nil
}
