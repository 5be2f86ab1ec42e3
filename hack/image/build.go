package main

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"debug/elf"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// What the image promises: the deploy/ manifests and the chart give only
// args, and run as this user (distroless' nonroot, so that the Dockerfile's
// image behaves the same).
const (
	entrypoint = "/podslo"
	// exporterPath is the exporter's own binary (make build's
	// bin/podslo-exporter, the podslo_exporter build tag): the chart runs
	// the exporter from it, without the agent's and demo's code.
	exporterPath = "/podslo-exporter"
	user         = "65532:65532"
	caPath       = "/etc/ssl/certs/ca-certificates.crt"
)

// The OCI annotation keys, written both as config labels (docker inspect,
// GHCR) and as manifest and index annotations (registries, crane).
const (
	labelTitle    = "org.opencontainers.image.title"
	labelVersion  = "org.opencontainers.image.version"
	labelRevision = "org.opencontainers.image.revision"
	labelSource   = "org.opencontainers.image.source"
	labelLicenses = "org.opencontainers.image.licenses"
	labelCreated  = "org.opencontainers.image.created"
	// refName is the tag of the index in the layout (skopeo oci:DIR:TAG);
	// containerdName names it on import (ctr, nerdctl, kind).
	refName        = "org.opencontainers.image.ref.name"
	containerdName = "io.containerd.image.name"
)

// elfMachines are the architectures podslo ships, with the ELF machine a
// binary for each must have.
var elfMachines = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}

func parsePlatform(s string) (v1.Platform, error) {
	goos, arch, ok := strings.Cut(s, "/")
	if !ok || goos != "linux" {
		return v1.Platform{}, fmt.Errorf("platform %q: want linux/ARCH", s)
	}
	if _, known := elfMachines[arch]; !known {
		return v1.Platform{}, fmt.Errorf("platform %q: architecture not one of amd64, arm64", s)
	}
	return v1.Platform{OS: goos, Architecture: arch}, nil
}

// checkStatic refuses a binary for the wrong architecture or one that needs
// a dynamic loader: the image has none, and such a binary would fail to
// start with a bare "no such file or directory".
func checkStatic(path, arch string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("binary %s: %w", path, err)
	}
	defer f.Close()
	if want := elfMachines[arch]; f.Machine != want {
		return fmt.Errorf("binary %s is for %s, not %s (%s)", path, f.Machine, arch, want)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("binary %s is dynamically linked; build it with CGO_ENABLED=0 (make image does)", path)
		}
	}
	return nil
}

// labels are the image's OCI labels.
func (o *options) labels() map[string]string {
	return map[string]string{
		labelTitle:    "podslo",
		labelVersion:  o.version,
		labelRevision: o.revision,
		labelSource:   o.source,
		labelLicenses: o.licenses,
		labelCreated:  o.created.UTC().Format(time.RFC3339),
	}
}

// buildIndex assembles one image per platform on a shared base layer. Every
// time in it is o.created, so the same inputs give the same digests.
func buildIndex(o *options) (v1.ImageIndex, error) {
	base, err := baseLayer(o.caCerts, o.created)
	if err != nil {
		return nil, err
	}
	labels := o.labels()
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, platform := range slices.Sorted(maps.Keys(o.binaries)) {
		p, err := parsePlatform(platform)
		if err != nil {
			return nil, err
		}
		img, err := buildImage(o, p, base, labels)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", platform, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
	}
	return mutate.Annotations(idx, labels).(v1.ImageIndex), nil
}

func buildImage(o *options, p v1.Platform, base v1.Layer, labels map[string]string) (v1.Image, error) {
	path := o.binaries[p.OS+"/"+p.Architecture]
	if err := checkStatic(path, p.Architecture); err != nil {
		return nil, err
	}
	bin, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read binary: %w", err)
	}
	exporterBin := o.exporterBinaries[p.OS+"/"+p.Architecture]
	if err := checkStatic(exporterBin, p.Architecture); err != nil {
		return nil, err
	}
	exp, err := os.ReadFile(exporterBin)
	if err != nil {
		return nil, fmt.Errorf("read exporter binary: %w", err)
	}
	app, err := tarLayer(o.created, []file{{name: entrypoint, mode: 0o755, body: bin}, {name: exporterPath, mode: 0o755, body: exp}})
	if err != nil {
		return nil, err
	}
	img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{
		OS:           p.OS,
		Architecture: p.Architecture,
		Created:      v1.Time{Time: o.created},
		Config: v1.Config{
			User:       user,
			Entrypoint: []string{entrypoint},
			WorkingDir: "/",
			Labels:     labels,
		},
		RootFS: v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, err
	}
	created := v1.Time{Time: o.created}
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: created, CreatedBy: "make image: CA certificates, nonroot user, /tmp"}},
		mutate.Addendum{Layer: app, History: v1.History{Created: created, CreatedBy: "make image: " + entrypoint + ", " + exporterPath}},
	)
	if err != nil {
		return nil, err
	}
	img = mutate.ConfigMediaType(mutate.MediaType(img, types.OCIManifestSchema1), types.OCIConfigJSON)
	return mutate.Annotations(img, labels).(v1.Image), nil
}

// baseLayer holds what a distroless static base would give podslo: the CA
// bundle (the exporter and agent verify the API server through the service
// account's CA, but a --kubeconfig may point anywhere), a passwd and group
// naming the nonroot user, its home and a sticky /tmp.
func baseLayer(caCerts string, created time.Time) (v1.Layer, error) {
	pem, err := os.ReadFile(caCerts)
	if err != nil {
		return nil, fmt.Errorf("read CA certificates: %w", err)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("CA certificates %s: no PEM certificate in it", caCerts)
	}
	return tarLayer(created, []file{
		{name: "/etc/", mode: 0o755},
		{name: "/etc/group", mode: 0o644, body: []byte("root:x:0:\nnonroot:x:65532:\n")},
		{name: "/etc/passwd", mode: 0o644, body: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "/etc/ssl/", mode: 0o755},
		{name: "/etc/ssl/certs/", mode: 0o755},
		{name: caPath, mode: 0o644, body: pem},
		{name: "/home/", mode: 0o755},
		{name: "/home/nonroot/", mode: 0o700, owner: 65532},
		{name: "/tmp/", mode: 0o1777},
	})
}

// file is one layer entry; a name ending in / is a directory. Every entry
// belongs to root unless owner says otherwise.
type file struct {
	name  string
	mode  int64
	owner int
	body  []byte
}

func tarLayer(created time.Time, files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{
			Name:     strings.TrimPrefix(f.name, "/"),
			Mode:     f.mode,
			Uid:      f.owner,
			Gid:      f.owner,
			ModTime:  created,
			Typeflag: tar.TypeReg,
			Size:     int64(len(f.body)),
		}
		if strings.HasSuffix(f.name, "/") {
			h.Typeflag = tar.TypeDir
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", f.name, err)
		}
		if _, err := tw.Write(f.body); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", f.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer), tarball.WithCompressedCaching)
}

// run writes the layout next to o.out and moves it into place, so that an
// interrupted build never leaves a half-written layout behind for the test.
func run(o *options) error {
	idx, err := buildIndex(o)
	if err != nil {
		return err
	}
	tmp := o.out + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	p, err := layout.Write(tmp, empty.Index)
	if err != nil {
		return fmt.Errorf("write layout %s: %w", tmp, err)
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		refName:        o.version,
		containerdName: o.name + ":" + o.version,
	})); err != nil {
		return fmt.Errorf("write layout %s: %w", tmp, err)
	}
	if err := os.RemoveAll(o.out); err != nil {
		return err
	}
	if err := os.Rename(tmp, o.out); err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s:%s@%s in %s\n", o.name, o.version, d, o.out)
	return nil
}
