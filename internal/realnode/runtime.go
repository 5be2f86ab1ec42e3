package realnode

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/podslo/podslo/internal/testenv"
)

// runtimeVersions pins the node's container runtime; the Makefile reads the
// same file, so a test and `make runtimebin` cannot disagree on a version.
//
//go:embed runtime.txt
var runtimeVersions string

// runtime is where the node's container runtime binaries are: containerd,
// its runc shim and ctr; runc; the CNI plugins.
type runtimeBins struct {
	containerdDir string
	runc          string
	cniDir        string
	// versions by name, for messages and for docs/compatibility.md.
	versions map[string]string
}

// RuntimeVersions is the containerd, runc and CNI plugins version the node
// runs, by name ("containerd", "runc", "cni-plugins").
func RuntimeVersions() (map[string]string, error) {
	return testenv.ParsePins("internal/realnode/runtime.txt", runtimeVersions, "containerd", "runc", "cni-plugins")
}

// findRuntime locates the binaries `make runtimebin` built, under
// $PODSLO_RUNTIMEBIN (which the Makefile exports) or the user cache
// directory, and names the missing ones.
func findRuntime() (runtimeBins, error) {
	v, err := RuntimeVersions()
	if err != nil {
		return runtimeBins{}, err
	}
	root := os.Getenv("PODSLO_RUNTIMEBIN")
	if root == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return runtimeBins{}, err
		}
		root = filepath.Join(cache, "podslo", "runtime")
	}
	r := runtimeBins{
		containerdDir: filepath.Join(root, "containerd-"+v["containerd"]),
		runc:          filepath.Join(root, "runc-"+v["runc"], "runc"),
		cniDir:        filepath.Join(root, "cni-plugins-"+v["cni-plugins"]),
		versions:      v,
	}
	var missing []string
	for _, p := range append([]string{r.runc,
		filepath.Join(r.containerdDir, "containerd"),
		filepath.Join(r.containerdDir, "containerd-shim-runc-v2"),
		filepath.Join(r.containerdDir, "ctr")}, r.cniPlugins()...) {
		if _, err := os.Stat(p); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return r, fmt.Errorf("container runtime binaries missing (run `make runtimebin`): %s", strings.Join(missing, ", "))
	}
	return r, nil
}

func (r runtimeBins) cniPlugins() []string {
	var p []string
	for _, name := range cniPlugins {
		p = append(p, filepath.Join(r.cniDir, name))
	}
	return p
}

func (r runtimeBins) ctr() string { return filepath.Join(r.containerdDir, "ctr") }
