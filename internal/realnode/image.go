package realnode

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// Image is the one image the node has: the sandbox (pause) image and every
// test container's. No registry is reachable, so it is built here and
// imported into containerd; pods must use ImagePullPolicy Never.
const Image = "podslo.test/sleeper:1"

// buildImage builds the sleeper command statically and writes it, as /pause,
// into a docker-archive tarball (the format `docker save` writes and
// `ctr images import` reads) at out.
func buildImage(dir, out string) error {
	bin := filepath.Join(dir, "sleeper")
	// CGO_ENABLED=0 without -trimpath, as make test's other builds outside
	// -race: the standard library then compiles once for them all.
	cmd := exec.Command("go", "build", "-o", bin, "./internal/realnode/sleeper")
	cmd.Dir = repoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build the sleeper: %w\n%s", err, b)
	}
	exe, err := os.ReadFile(bin)
	if err != nil {
		return err
	}
	var layer bytes.Buffer
	lw := tar.NewWriter(&layer)
	if err := lw.WriteHeader(&tar.Header{Name: "pause", Mode: 0o755, Size: int64(len(exe)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	if _, err := lw.Write(exe); err != nil {
		return err
	}
	if err := lw.Close(); err != nil {
		return err
	}
	diffID := sha256.Sum256(layer.Bytes())
	config, err := json.Marshal(map[string]any{
		"architecture": runtime.GOARCH,
		"os":           "linux",
		"config":       map[string]any{"Entrypoint": []string{"/pause"}},
		"rootfs":       map[string]any{"type": "layers", "diff_ids": []string{"sha256:" + hex.EncodeToString(diffID[:])}},
	})
	if err != nil {
		return err
	}
	manifest, err := json.Marshal([]map[string]any{{"Config": "config.json", "RepoTags": []string{Image}, "Layers": []string{"layer.tar"}}})
	if err != nil {
		return err
	}
	var archive bytes.Buffer
	aw := tar.NewWriter(&archive)
	for _, f := range []struct {
		name string
		data []byte
	}{{"layer.tar", layer.Bytes()}, {"config.json", config}, {"manifest.json", manifest}} {
		if err := aw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		if _, err := aw.Write(f.data); err != nil {
			return err
		}
	}
	if err := aw.Close(); err != nil {
		return err
	}
	return os.WriteFile(out, archive.Bytes(), 0o644)
}

// ImportOCILayout imports the OCI image layout in dir (what `make image`
// writes in bin/image) into the node's containerd. `ctr images import`
// reads an archive, not a directory, so the layout is archived first; the
// image takes its name from the index's io.containerd.image.name
// annotation.
func (n *Node) ImportOCILayout(dir string) error {
	archive := filepath.Join(n.dir, "oci-layout.tar")
	f, err := os.Create(archive)
	if err != nil {
		return err
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	err = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return tw.WriteHeader(&tar.Header{Name: rel + "/", Mode: 0o755, Typeflag: tar.TypeDir})
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: rel, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err = tw.Write(data)
		return err
	})
	if err != nil {
		return fmt.Errorf("archive %s: %w", dir, err)
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return n.ctr("images", "import", archive)
}

// Dir is the node's temporary directory, removed by its teardown: a test's
// hostPath volumes belong under it.
func (n *Node) Dir() string { return n.dir }
