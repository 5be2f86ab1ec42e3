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
)

// binary is one program the demo runs, and how the Makefile builds it.
type binary struct {
	name   string
	module string // directory of its Go module, under the source tree
	pkg    string
	kwok   bool // lives in KwokBinDir
}

var binaries = []binary{
	{name: "etcd", module: "hack/tools", pkg: "./cmd/etcd"},
	{name: "kube-apiserver", module: "hack/tools", pkg: "k8s.io/kubernetes/cmd/kube-apiserver"},
	{name: "kube-controller-manager", module: "hack/tools", pkg: "k8s.io/kubernetes/cmd/kube-controller-manager"},
	{name: "kube-scheduler", module: "hack/tools", pkg: "k8s.io/kubernetes/cmd/kube-scheduler"},
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
		if err := d.build(ctx, b, out); err != nil {
			return err
		}
	}
	return nil
}

func (d *Demo) build(ctx context.Context, b binary, out string) error {
	dir := filepath.Join(d.opts.SourceDir, b.module)
	// The bar counts packages: go build -v names each one it compiles, and
	// go list -deps says how many there can be (cached ones are not named,
	// so a warm build ends early and jumps to 100%).
	list := exec.CommandContext(ctx, "go", "list", "-deps", b.pkg)
	list.Dir = dir
	deps, err := list.Output()
	if err != nil {
		return fmt.Errorf("list the packages of %s: %w", b.name, err)
	}
	bar := newProgress(d.opts.Out, "building "+b.name, bytes.Count(deps, []byte("\n")))
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return fmt.Errorf("build %s: %w", b.name, err)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-v", "-o", out+".tmp", b.pkg)
	cmd.Dir = dir
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
