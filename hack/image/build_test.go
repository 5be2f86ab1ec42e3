package main

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeELF writes the smallest ELF file debug/elf reads: a header for the
// machine and, for a dynamically linked one, a PT_INTERP program header.
func fakeELF(t *testing.T, machine elf.Machine, dynamic bool) string {
	t.Helper()
	h := elf.Header64{
		Type: uint16(elf.ET_EXEC), Machine: uint16(machine), Version: uint32(elf.EV_CURRENT),
		Ehsize: 64, Phentsize: 56, Shentsize: 64,
	}
	copy(h.Ident[:], elf.ELFMAG)
	h.Ident[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	h.Ident[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	h.Ident[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	var progs []elf.Prog64
	if dynamic {
		h.Phoff, h.Phnum = 64, 1
		progs = append(progs, elf.Prog64{Type: uint32(elf.PT_INTERP)})
	}
	var buf bytes.Buffer
	require.NoError(t, binary.Write(&buf, binary.LittleEndian, h))
	require.NoError(t, binary.Write(&buf, binary.LittleEndian, progs))
	path := filepath.Join(t.TempDir(), "podslo")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o755))
	return path
}

// testOptions are valid options with fake binaries and the machine's CA
// bundle.
func testOptions(t *testing.T) []string {
	t.Helper()
	return []string{
		"--out", filepath.Join(t.TempDir(), "image"),
		"--binary", "linux/amd64=" + fakeELF(t, elf.EM_X86_64, false),
		"--binary", "linux/arm64=" + fakeELF(t, elf.EM_AARCH64, false),
		"--exporter-binary", "linux/amd64=" + fakeELF(t, elf.EM_X86_64, false),
		"--exporter-binary", "linux/arm64=" + fakeELF(t, elf.EM_AARCH64, false),
		"--ca-certs", "/etc/ssl/certs/ca-certificates.crt",
		"--name", "ghcr.io/podslo/podslo", "--version", "0.1.0", "--revision", "0123abcd",
		"--source", "https://github.com/podslo/podslo", "--licenses", "Apache-2.0",
		"--created", "2026-01-02T03:04:05Z",
	}
}

// TestReproducible: the same inputs give the same index digest, so a
// rebuild of one commit pushes nothing new, and both platforms share the
// base layer.
func TestReproducible(t *testing.T) {
	args := testOptions(t)
	var digests []string
	for range 2 {
		o, err := parseOptions(args)
		require.NoError(t, err)
		idx, err := buildIndex(o)
		require.NoError(t, err)
		d, err := idx.Digest()
		require.NoError(t, err)
		digests = append(digests, d.String())

		im, err := idx.IndexManifest()
		require.NoError(t, err)
		require.Len(t, im.Manifests, 2)
		var bases []string
		for _, m := range im.Manifests {
			img, err := idx.Image(m.Digest)
			require.NoError(t, err)
			layers, err := img.Layers()
			require.NoError(t, err)
			require.Len(t, layers, 2)
			base, err := layers[0].Digest()
			require.NoError(t, err)
			bases = append(bases, base.String())
		}
		assert.Equal(t, bases[0], bases[1], "one base layer for both platforms")
	}
	assert.Equal(t, digests[0], digests[1])
}

// TestRunWritesLayout: run writes a layout that reads back, replacing a
// previous one, and leaves no temporary directory behind.
func TestRunWritesLayout(t *testing.T) {
	o, err := parseOptions(testOptions(t))
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Join(o.out, "stale"), 0o755))
	require.NoError(t, run(o))
	_, err = os.Stat(filepath.Join(o.out, "stale"))
	assert.ErrorIs(t, err, os.ErrNotExist, "the old layout is replaced")
	_, err = os.Stat(o.out + ".tmp")
	assert.ErrorIs(t, err, os.ErrNotExist)
	root, err := layout.ImageIndexFromPath(o.out)
	require.NoError(t, err)
	im, err := root.IndexManifest()
	require.NoError(t, err)
	require.Len(t, im.Manifests, 1)
	assert.Equal(t, "0.1.0", im.Manifests[0].Annotations[refName])
	assert.Equal(t, "ghcr.io/podslo/podslo:0.1.0", im.Manifests[0].Annotations[containerdName])
}

// TestRefuses: each bad input names its cause.
func TestRefuses(t *testing.T) {
	set := func(args []string, flag, value string) []string {
		out := append([]string(nil), args...)
		for i := range out {
			if out[i] == flag {
				out[i+1] = value
				return out
			}
		}
		return append(out, flag, value)
	}
	without := func(args []string, flag string) []string {
		var out []string
		for i := 0; i < len(args); i++ {
			if args[i] == flag {
				i++
				continue
			}
			out = append(out, args[i])
		}
		return out
	}
	notPEM := filepath.Join(t.TempDir(), "ca.crt")
	require.NoError(t, os.WriteFile(notPEM, []byte("not a certificate\n"), 0o644))

	for _, tc := range []struct {
		name    string
		args    func(base []string) []string
		wantErr string
	}{
		{"no binary", func(b []string) []string { return without(without(b, "--binary"), "--exporter-binary") }, "missing --binary"},
		{"no exporter binary", func(b []string) []string { return without(b, "--exporter-binary") }, "missing --exporter-binary linux/amd64=PATH"},
		{"exporter binary alone", func(b []string) []string {
			return append(without(b, "--exporter-binary"), "--exporter-binary", "linux/amd64=x", "--exporter-binary", "linux/arm64=x", "--exporter-binary", "linux/ppc64le=x")
		}, "--exporter-binary linux/ppc64le has no --binary"},
		{"no labels", func(b []string) []string { return without(without(b, "--revision"), "--licenses") }, "missing --revision, --licenses"},
		{"bad date", func(b []string) []string { return set(b, "--created", "2026-01-02") }, `--created: parsing time "2026-01-02"`},
		{"tagged name", func(b []string) []string { return set(b, "--name", "ghcr.io/podslo/podslo:dev") }, "give the name without a tag"},
		{"windows", func(b []string) []string { return append(b, "--binary", "windows/amd64=x.exe") }, `platform "windows/amd64": want linux/ARCH`},
		{"riscv", func(b []string) []string { return append(b, "--binary", "linux/riscv64=x") }, "architecture not one of amd64, arm64"},
		{"twice", func(b []string) []string { return append(b, "--binary", "linux/amd64=x") }, "platform linux/amd64 given twice"},
		{"stray argument", func(b []string) []string { return append(b, "extra") }, `unexpected arguments ["extra"]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseOptions(tc.args(testOptions(t)))
			assert.ErrorContains(t, err, tc.wantErr)
		})
	}

	// The cases below build for amd64 alone.
	amd64Only := func(b []string) []string {
		return set(without(without(b, "--binary"), "--exporter-binary"), "--exporter-binary", "linux/amd64="+fakeELF(t, elf.EM_X86_64, false))
	}
	for _, tc := range []struct {
		name    string
		args    func(base []string) []string
		wantErr string
	}{
		{"dynamic exporter", func(b []string) []string {
			return set(set(amd64Only(b), "--binary", "linux/amd64="+fakeELF(t, elf.EM_X86_64, false)), "--exporter-binary", "linux/amd64="+fakeELF(t, elf.EM_X86_64, true))
		}, "is dynamically linked; build it with CGO_ENABLED=0"},
		{"dynamic", func(b []string) []string {
			return set(amd64Only(b), "--binary", "linux/amd64="+fakeELF(t, elf.EM_X86_64, true))
		}, "is dynamically linked; build it with CGO_ENABLED=0"},
		{"wrong architecture", func(b []string) []string {
			return set(set(without(without(b, "--binary"), "--exporter-binary"), "--exporter-binary", "linux/arm64="+fakeELF(t, elf.EM_AARCH64, false)), "--binary", "linux/arm64="+fakeELF(t, elf.EM_X86_64, false))
		}, "is for EM_X86_64, not arm64 (EM_AARCH64)"},
		{"not ELF", func(b []string) []string { return set(amd64Only(b), "--binary", "linux/amd64="+notPEM) }, "bad magic number"},
		{"missing binary", func(b []string) []string {
			return set(amd64Only(b), "--binary", "linux/amd64=/nonexistent/podslo")
		}, "no such file or directory"},
		{"no certificates", func(b []string) []string { return set(b, "--ca-certs", notPEM) }, "no PEM certificate in it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseOptions(tc.args(testOptions(t)))
			require.NoError(t, err)
			err = run(o)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.wantErr)
			_, statErr := os.Stat(o.out)
			assert.ErrorIs(t, statErr, os.ErrNotExist, "nothing written")
		})
	}
}

// TestDockerfile: the Dockerfile's image promises what make image's does
// (the user, the entrypoint, the binary from make build), on the Go release
// go.mod names.
func TestDockerfile(t *testing.T) {
	df, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	require.NoError(t, err)
	mod, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	require.NoError(t, err)
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	require.NotNil(t, goVersion, "go.mod's go directive")

	lines := strings.Split(string(df), "\n")
	for _, want := range []string{
		"FROM --platform=$BUILDPLATFORM golang:" + string(goVersion[1]) + " AS build",
		"FROM gcr.io/distroless/static:nonroot",
		"COPY --from=build /src/bin/podslo " + entrypoint,
		"COPY --from=build /src/bin/podslo-exporter " + exporterPath,
		"USER " + user,
		`ENTRYPOINT ["` + entrypoint + `"]`,
	} {
		assert.Contains(t, lines, want)
	}
	assert.Regexp(t, `(?m)^\s+GOOS=\$TARGETOS GOARCH=\$TARGETARCH .*make build$`, string(df), "the binary comes from make build, with its ldflags")
}

// TestManifestsRunTheRelease: the deploy/ manifests run the image of the
// VERSION make image tags.
func TestManifestsRunTheRelease(t *testing.T) {
	v, err := os.ReadFile(filepath.Join(repoRoot, "VERSION"))
	require.NoError(t, err)
	want := "ghcr.io/podslo/podslo:" + strings.TrimSpace(string(v))
	images := regexp.MustCompile(`(?m)^\s+image:\s*(\S*podslo\S*)\s*$`)
	var found int
	for _, dir := range []string{"deploy/exporter", "deploy/agent"} {
		files, err := filepath.Glob(filepath.Join(repoRoot, dir, "*.yaml"))
		require.NoError(t, err)
		for _, f := range files {
			b, err := os.ReadFile(f)
			require.NoError(t, err)
			for _, m := range images.FindAllSubmatch(b, -1) {
				found++
				assert.Equal(t, want, string(m[1]), f)
			}
		}
	}
	assert.Equal(t, 2, found, "the exporter's and the agent's container")
}
