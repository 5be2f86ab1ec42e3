package realnode

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The runtime's versions come from runtime.txt, and a missing binary is
// named with the make target that builds it.
func TestFindRuntime(t *testing.T) {
	v, err := RuntimeVersions()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"containerd", "runc", "cni-plugins"} {
		if !strings.HasPrefix(v[name], "v") {
			t.Errorf("%s version %q", name, v[name])
		}
	}
	if !strings.HasPrefix(v["containerd"], "v2.") {
		t.Errorf("containerd %s: the kubelet 1.37 needs containerd 2", v["containerd"])
	}

	root := t.TempDir()
	t.Setenv("PODSLO_RUNTIMEBIN", root)
	_, err = findRuntime()
	if err == nil {
		t.Fatal("an empty runtime directory must be refused")
	}
	for _, want := range []string{"make runtimebin", filepath.Join(root, "runc-"+v["runc"], "runc"),
		filepath.Join(root, "containerd-"+v["containerd"], "containerd-shim-runc-v2"),
		filepath.Join(root, "cni-plugins-"+v["cni-plugins"], "host-local")} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}

	// All present: found where the Makefile puts them.
	r := runtimeBins{containerdDir: filepath.Join(root, "containerd-"+v["containerd"]),
		runc: filepath.Join(root, "runc-"+v["runc"], "runc"), cniDir: filepath.Join(root, "cni-plugins-"+v["cni-plugins"])}
	for _, p := range append([]string{r.runc, r.ctr(), filepath.Join(r.containerdDir, "containerd"),
		filepath.Join(r.containerdDir, "containerd-shim-runc-v2")}, r.cniPlugins()...) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	got, err := findRuntime()
	if err != nil {
		t.Fatal(err)
	}
	if got.runc != r.runc || got.containerdDir != r.containerdDir || got.cniDir != r.cniDir {
		t.Errorf("found %+v, want %+v", got, r)
	}
}
