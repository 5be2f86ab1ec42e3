package main

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
)

// The directory make release wrote; make release runs TestRelease on it,
// and make image-test leaves TestRelease out.
var releaseDir = flag.String("release", "../../bin/release", "release directory written by make release")

// TestRelease checks what make release wrote: every artifact, and only
// those, under SHA256SUMS with the right sums; one version, VERSION, in the
// chart's version and appVersion, the image's tag and labels and the
// binaries; the image archive is the layout make image wrote; and the
// CHANGELOG section is that version's, as CHANGELOG.md has it.
func TestRelease(t *testing.T) {
	rel := currentRelease(t)
	v := rel.version
	dir := *releaseDir
	// One binary per platform of the image (TestImageLayout checks that
	// they are linux/amd64 and linux/arm64).
	builtIdx, _ := openLayout(t, *layoutDir)
	builtManifest, err := builtIdx.IndexManifest()
	require.NoError(t, err)
	binaries := map[string]string{}
	for _, m := range builtManifest.Manifests {
		require.NotNil(t, m.Platform)
		binaries[m.Platform.OS+"/"+m.Platform.Architecture] = "podslo-" + v + "." + m.Platform.OS + "-" + m.Platform.Architecture
	}
	imageArchive, chart, changelog := "podslo-image-"+v+".oci.tar", "podslo-"+v+".tgz", "CHANGELOG-"+v+".md"
	artifacts := append([]string{imageArchive, chart, changelog}, slices.Collect(maps.Values(binaries))...)

	entries, err := os.ReadDir(dir)
	require.NoError(t, err, "run make release")
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.ElementsMatch(t, append([]string{"SHA256SUMS"}, artifacts...), names, "the files in %s", dir)

	t.Run("SHA256SUMS", func(t *testing.T) {
		f, err := os.Open(filepath.Join(dir, "SHA256SUMS"))
		require.NoError(t, err)
		defer f.Close()
		sums := map[string]string{}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			sum, name, ok := strings.Cut(sc.Text(), "  ")
			require.True(t, ok, "line %q: want SUM  NAME, as sha256sum writes it", sc.Text())
			require.NotContains(t, sums, name, "%s listed twice", name)
			sums[name] = sum
		}
		require.NoError(t, sc.Err())
		assert.ElementsMatch(t, artifacts, slices.Collect(maps.Keys(sums)), "the files SHA256SUMS covers")
		for name, want := range sums {
			b, err := os.ReadFile(filepath.Join(dir, name))
			require.NoError(t, err)
			got := sha256.Sum256(b)
			assert.Equal(t, want, hex.EncodeToString(got[:]), "sha256 of %s", name)
		}
	})

	t.Run("chart", func(t *testing.T) {
		files := readTarGz(t, filepath.Join(dir, chart))
		var meta struct {
			Name       string `yaml:"name"`
			Version    string `yaml:"version"`
			AppVersion string `yaml:"appVersion"`
		}
		require.NoError(t, yaml.Unmarshal(files["podslo/Chart.yaml"], &meta), "podslo/Chart.yaml in %s", chart)
		assert.Equal(t, "podslo", meta.Name)
		assert.Equal(t, v, meta.Version, "the chart's version")
		assert.Equal(t, v, meta.AppVersion, "the chart's appVersion, the image tag it runs by default")
		var values struct {
			Image struct {
				Repository string `yaml:"repository"`
				Tag        string `yaml:"tag"`
			} `yaml:"image"`
		}
		require.NoError(t, yaml.Unmarshal(files["podslo/values.yaml"], &values))
		assert.Equal(t, "ghcr.io/podslo/podslo", values.Image.Repository)
		assert.Empty(t, values.Image.Tag, "image.tag is empty, so the image is appVersion's")
		assert.Contains(t, files, "podslo/templates/exporter/statefulset.yaml")
	})

	t.Run("image", func(t *testing.T) {
		unpacked := t.TempDir()
		for name, body := range readTar(t, filepath.Join(dir, imageArchive)) {
			path := filepath.Join(unpacked, filepath.FromSlash(name))
			require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
			require.NoError(t, os.WriteFile(path, body, 0o644))
		}
		idx, desc := openLayout(t, unpacked)
		assert.Equal(t, v, desc.Annotations[refName], "the archive's tag")
		assert.Equal(t, "ghcr.io/podslo/podslo:"+v, desc.Annotations[containerdName])
		im, err := idx.IndexManifest()
		require.NoError(t, err)
		assert.Equal(t, v, im.Annotations[labelVersion])
		assert.Equal(t, rel.revision, im.Annotations[labelRevision])
		_, built := openLayout(t, *layoutDir)
		assert.Equal(t, built.Digest, desc.Digest, "the archive holds the image make image wrote in %s", *layoutDir)

		for _, m := range im.Manifests {
			platform := m.Platform.OS + "/" + m.Platform.Architecture
			img, err := idx.Image(m.Digest)
			require.NoError(t, err)
			inImage := readFS(t, img).file(t, "podslo").body
			name, ok := binaries[platform]
			require.True(t, ok, "the image's platform %s has no binary in the release", platform)
			bin, err := os.ReadFile(filepath.Join(dir, name))
			require.NoError(t, err)
			assert.True(t, slices.Equal(inImage, bin), "%s is the image's %s binary", name, platform)
		}
		assert.Len(t, im.Manifests, len(binaries), "one image per released binary")
	})

	t.Run("binary", func(t *testing.T) {
		name := binaries[runtime.GOOS+"/"+runtime.GOARCH]
		require.NotEmpty(t, name, "a binary this machine runs")
		out, err := exec.Command(filepath.Join(dir, name), "version").CombinedOutput()
		require.NoError(t, err, "%s version: %s", name, out)
		got := versionLine.FindStringSubmatch(string(out))
		require.NotNil(t, got, "podslo version printed:\n%s", out)
		assert.Equal(t, v, got[1], "version")
		assert.Equal(t, rel.revision, got[3], "revision")
		assert.Regexp(t, `(?m)^  state formats:    reads \d+ to \d+, writes \d+$`, string(out))
	})

	t.Run("changelog", func(t *testing.T) {
		section, err := os.ReadFile(filepath.Join(dir, changelog))
		require.NoError(t, err)
		full, err := os.ReadFile(filepath.Join(repoRoot, "CHANGELOG.md"))
		require.NoError(t, err)
		require.True(t, strings.HasPrefix(string(section), "## "+v+"\n"), "%s begins with its heading:\n%.200s", changelog, section)
		assert.True(t, strings.Contains(string(full), string(section)), "%s is not the section as CHANGELOG.md has it", changelog)
		rest := strings.TrimPrefix(string(section), "## "+v+"\n")
		assert.NotContains(t, "\n"+rest, "\n## ", "one release's section only")
		assert.Contains(t, rest, "rollback", "the section says what a rollback does")
	})
}

// openLayout opens an OCI layout and returns its one image index, as
// make image writes it, with its descriptor in index.json.
func openLayout(t *testing.T, dir string) (v1.ImageIndex, v1.Descriptor) {
	t.Helper()
	root, err := layout.ImageIndexFromPath(dir)
	require.NoError(t, err)
	top, err := root.IndexManifest()
	require.NoError(t, err)
	require.Len(t, top.Manifests, 1, "index.json names one image index")
	idx, err := root.ImageIndex(top.Manifests[0].Digest)
	require.NoError(t, err)
	return idx, top.Manifests[0]
}

func readTarGz(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	require.NoError(t, err)
	return readTarFrom(t, zr)
}

func readTar(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	return readTarFrom(t, f)
}

// readTarFrom returns the regular files of a tar stream by name.
func readTarFrom(t *testing.T, r io.Reader) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return files
		}
		require.NoError(t, err)
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		body, err := io.ReadAll(tr)
		require.NoError(t, err)
		files[strings.TrimPrefix(hdr.Name, "./")] = body
	}
}
