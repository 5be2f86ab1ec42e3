// Command buildshare fails when a package that podslo's build and one of
// the test tools' builds both compile comes from two versions of its
// module. make test builds podslo, the Kubernetes binaries (hack/tools),
// kwok (hack/kwok) and the harnesses (hack/chaos, hack/scale, hack/harness)
// in one configuration so that such a package compiles once; a version
// apart, it and everything above it compile again, minutes of a cold CI
// run (docs/testing.md). Helm (hack/helm) is left out: its own go.mod
// requires newer golang.org/x modules than podslo's.
//
// Run from the repository's root, as make lint does:
//
//	go run ./hack/buildshare
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strings"
)

// build is one go build of make test: a module directory and its packages.
type build struct {
	dir  string
	pkgs []string
}

var builds = []build{
	{"hack/tools", []string{"./cmd/etcd", "k8s.io/kubernetes/cmd/kube-apiserver", "k8s.io/kubernetes/cmd/kube-scheduler",
		"k8s.io/kubernetes/cmd/kube-controller-manager", "k8s.io/kubernetes/cmd/kubelet", "k8s.io/kubernetes/cmd/kube-proxy"}},
	{"hack/kwok", []string{"sigs.k8s.io/kwok/cmd/kwok", "sigs.k8s.io/kwok/cmd/kwokctl"}},
	{"hack/chaos", []string{"./..."}},
	{"hack/scale", []string{"./..."}},
	{"hack/harness", []string{"./..."}},
}

func main() {
	root, err := modules(".", "./...")
	if err != nil {
		fmt.Fprintln(os.Stderr, "buildshare:", err)
		os.Exit(2)
	}
	var apart []string
	for _, b := range builds {
		deps, err := modules(b.dir, b.pkgs...)
		if err != nil {
			fmt.Fprintln(os.Stderr, "buildshare:", err)
			os.Exit(2)
		}
		shared := 0
		seen := map[string]bool{}
		for pkg, mod := range deps {
			want, ok := root[pkg]
			if !ok {
				continue
			}
			shared++
			if mod != want && !seen[mod] {
				seen[mod] = true
				apart = append(apart, fmt.Sprintf("%s: %s, podslo: %s", b.dir, mod, want))
			}
		}
		fmt.Printf("buildshare: %s builds %d packages, %d of them also podslo's\n", b.dir, len(deps), shared)
	}
	if len(apart) > 0 {
		sort.Strings(apart)
		fmt.Fprintln(os.Stderr, "buildshare: these modules give packages to podslo's build and another at two versions; "+
			"go get podslo's version in the other module (or raise podslo's), then go mod tidy:")
		for _, a := range apart {
			fmt.Fprintln(os.Stderr, "  "+a)
		}
		os.Exit(1)
	}
}

// modules maps each non-standard package that building pkgs in dir
// compiles to its module and version (the replacement's, where replaced),
// as make test builds outside -race: CGO_ENABLED=0.
func modules(dir string, pkgs ...string) (map[string]string, error) {
	args := append([]string{"list", "-deps", "-f",
		`{{if not .Standard}}{{.ImportPath}} {{with .Module}}{{.Path}}@{{with .Replace}}{{.Version}}{{else}}{{.Version}}{{end}}{{end}}{{end}}`}, pkgs...)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list in %s: %w: %s", dir, err, strings.TrimSpace(stderr.String()))
	}
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// A package of the main module has no version: it is no other
		// build's.
		if len(f) == 2 && !strings.HasSuffix(f[1], "@") {
			m[f[0]] = f[1]
		}
	}
	return m, sc.Err()
}
