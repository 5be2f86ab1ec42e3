package main

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"debug/elf"
	"encoding/pem"
	"flag"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The layout make image writes; make image-test (part of make test) builds
// it first. A missing layout fails the test: there is nothing to skip to.
var layoutDir = flag.String("layout", "../../bin/image", "OCI layout written by make image")

// platforms are those make image was asked for: make image-test builds
// this machine's alone, make release both.
var wantPlatforms = flag.String("platforms", "linux/amd64 linux/arm64", "the platforms the layout must have, space-separated")

const repoRoot = "../.."

// release is what the checkout says the image must carry: the VERSION file,
// the git HEAD (with -dirty when the tree has uncommitted changes, as the
// Makefile stamps it) and the commit's date.
type release struct {
	version, revision string
	created           time.Time
}

func currentRelease(t *testing.T) release {
	t.Helper()
	v, err := os.ReadFile(filepath.Join(repoRoot, "VERSION"))
	require.NoError(t, err)
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = repoRoot
		out, err := cmd.Output()
		require.NoError(t, err, "git %s", strings.Join(args, " "))
		return strings.TrimSpace(string(out))
	}
	r := release{version: strings.TrimSpace(string(v)), revision: git("rev-parse", "HEAD")}
	if git("status", "--porcelain") != "" {
		r.revision += "-dirty"
	}
	r.created, err = time.Parse(time.RFC3339, git("log", "-1", "--format=%cI"))
	require.NoError(t, err)
	return r
}

// TestImageLayout opens the layout make image wrote and checks, for every
// platform, what the deploy manifests and the chart rely on: the user, the
// entrypoint, the labels, the CA bundle, and a static binary of the right
// architecture. It then runs the host platform's binary from the image with
// `version`.
func TestImageLayout(t *testing.T) {
	rel := currentRelease(t)
	if _, err := os.Stat(filepath.Join(*layoutDir, "index.json")); err != nil {
		t.Fatalf("no image layout at %s (run make image): %v", *layoutDir, err)
	}
	root, err := layout.ImageIndexFromPath(*layoutDir)
	require.NoError(t, err)
	top, err := root.IndexManifest()
	require.NoError(t, err)
	require.Len(t, top.Manifests, 1, "index.json names one image index")
	desc := top.Manifests[0]
	assert.Equal(t, types.OCIImageIndex, desc.MediaType)
	assert.Equal(t, rel.version, desc.Annotations[refName], "the layout's tag")
	assert.Equal(t, "ghcr.io/podslo/podslo:"+rel.version, desc.Annotations[containerdName])

	idx, err := root.ImageIndex(desc.Digest)
	require.NoError(t, err)
	im, err := idx.IndexManifest()
	require.NoError(t, err)
	wantLabels := func(t *testing.T, got map[string]string) {
		t.Helper()
		assert.Equal(t, "podslo", got[labelTitle])
		assert.Equal(t, rel.version, got[labelVersion])
		assert.Equal(t, rel.revision, got[labelRevision])
		assert.Equal(t, "https://github.com/podslo/podslo", got[labelSource])
		assert.Equal(t, "Apache-2.0", got[labelLicenses], "the LICENSE of the repository")
		created, err := time.Parse(time.RFC3339, got[labelCreated])
		if assert.NoError(t, err) {
			assert.True(t, rel.created.Equal(created), "created %s, HEAD's commit date %s", created, rel.created)
		}
	}
	wantLabels(t, im.Annotations)

	var platforms []string
	for _, m := range im.Manifests {
		require.NotNil(t, m.Platform)
		platform := m.Platform.OS + "/" + m.Platform.Architecture
		platforms = append(platforms, platform)
		t.Run(platform, func(t *testing.T) {
			img, err := idx.Image(m.Digest)
			require.NoError(t, err)
			mt, err := img.MediaType()
			require.NoError(t, err)
			assert.Equal(t, types.OCIManifestSchema1, mt)
			cfg, err := img.ConfigFile()
			require.NoError(t, err)
			assert.Equal(t, m.Platform.OS, cfg.OS)
			assert.Equal(t, m.Platform.Architecture, cfg.Architecture)
			assert.Equal(t, "65532:65532", cfg.Config.User)
			assert.Equal(t, []string{"/podslo"}, cfg.Config.Entrypoint)
			assert.Empty(t, cfg.Config.Cmd, "the manifests give the subcommand as args")
			wantLabels(t, cfg.Config.Labels)

			fs := readFS(t, img)
			bin := fs.file(t, "podslo")
			assert.Equal(t, int64(0o755), bin.hdr.Mode, "/podslo mode")
			assert.Equal(t, 0, bin.hdr.Uid, "/podslo belongs to root, so the nonroot user cannot change it")
			assertStatic(t, bin.body, m.Platform.Architecture)
			exp := fs.file(t, "podslo-exporter")
			assert.Equal(t, int64(0o755), exp.hdr.Mode, "/podslo-exporter mode")
			assert.Equal(t, 0, exp.hdr.Uid, "/podslo-exporter belongs to root")
			assertStatic(t, exp.body, m.Platform.Architecture)
			assert.Less(t, len(exp.body), len(bin.body)*3/4, "the exporter's binary leaves out the agent, the demo and client-go's clientset")

			ca := fs.file(t, "etc/ssl/certs/ca-certificates.crt")
			assert.Greater(t, countCerts(t, ca.body), 0, "the CA bundle holds certificates")
			assert.Contains(t, string(fs.file(t, "etc/passwd").body), "nonroot:x:65532:65532:")
			assert.Equal(t, int64(0o1777), fs.file(t, "tmp").hdr.Mode, "/tmp is sticky and world-writable")

			if platform != runtime.GOOS+"/"+runtime.GOARCH {
				return
			}
			path := filepath.Join(t.TempDir(), "podslo")
			require.NoError(t, os.WriteFile(path, bin.body, 0o755))
			out, err := exec.Command(path, "version").CombinedOutput()
			require.NoError(t, err, "podslo version: %s", out)
			got := versionLine.FindStringSubmatch(string(out))
			require.NotNil(t, got, "podslo version printed:\n%s", out)
			assert.Equal(t, rel.version, got[1], "version")
			assert.Equal(t, rel.revision, got[3], "revision")
			assert.Contains(t, string(out), "build date:       "+rel.created.UTC().Format(time.RFC3339))
			assert.Contains(t, string(out), "platform:         "+platform)
			assert.Contains(t, string(out), "build:            full (exporter, agent, demo)")

			// The exporter's binary is the same release, and says what it is.
			path = filepath.Join(t.TempDir(), "podslo-exporter")
			require.NoError(t, os.WriteFile(path, exp.body, 0o755))
			out, err = exec.Command(path, "version").CombinedOutput()
			require.NoError(t, err, "podslo-exporter version: %s", out)
			got = versionLine.FindStringSubmatch(string(out))
			require.NotNil(t, got, "podslo-exporter version printed:\n%s", out)
			assert.Equal(t, rel.version, got[1], "version")
			assert.Equal(t, rel.revision, got[3], "revision")
			assert.Contains(t, string(out), "build:            exporter (no agent, no demo)")
			out, err = exec.Command(path, "agent").CombinedOutput()
			assert.Error(t, err, "the exporter's binary has no agent")
			assert.Contains(t, string(out), `unknown command "agent"`)
		})
	}
	assert.ElementsMatch(t, strings.Fields(*wantPlatforms), platforms)
	assert.Contains(t, platforms, runtime.GOOS+"/"+runtime.GOARCH, "the image has a binary this machine can run")
}

var versionLine = regexp.MustCompile(`(?m)^podslo, version (\S+) \(branch: (\S*), revision: (\S+)\)$`)

type entry struct {
	hdr  *tar.Header
	body []byte
}

type filesystem map[string]entry

func (fs filesystem) file(t *testing.T, name string) entry {
	t.Helper()
	e, ok := fs[name]
	require.True(t, ok, "no /%s in the image; it has %v", name, slices.Sorted(maps.Keys(fs)))
	return e
}

// readFS reads the image's flattened filesystem, the way a runtime unpacks it.
func readFS(t *testing.T, img v1.Image) filesystem {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	fs := filesystem{}
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return fs
		}
		require.NoError(t, err)
		body, err := io.ReadAll(tr)
		require.NoError(t, err)
		fs[strings.TrimSuffix(hdr.Name, "/")] = entry{hdr: hdr, body: body}
	}
}

func assertStatic(t *testing.T, bin []byte, arch string) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(bin))
	require.NoError(t, err)
	assert.Equal(t, elfMachines[arch], f.Machine)
	for _, p := range f.Progs {
		assert.NotEqual(t, elf.PT_INTERP, p.Type, "a static binary asks for no dynamic loader")
	}
}

func countCerts(t *testing.T, bundle []byte) int {
	t.Helper()
	n := 0
	for block, rest := pem.Decode(bundle); block != nil; block, rest = pem.Decode(rest) {
		_, err := x509.ParseCertificate(block.Bytes)
		require.NoError(t, err)
		n++
	}
	return n
}
