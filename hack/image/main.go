// Command image writes podslo's multi-arch OCI image layout (make image)
// from static binaries built beforehand, with no base image: nothing is
// pulled, so it builds offline. Its test (image_test.go) checks the layout
// that make image wrote, and runs the binary in it.
//
// It is a module of its own so that go-containerregistry stays out of
// podslo's dependency graph.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
)

func main() {
	o, err := parseOptions(os.Args[1:])
	if err == nil {
		err = run(o)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// options says what goes into the image and where the layout goes.
type options struct {
	// out is the layout directory; it is replaced as a whole.
	out string
	// binaries maps each platform ("linux/amd64") to its podslo binary.
	binaries map[string]string
	// exporterBinaries maps the same platforms to the exporter's binary.
	exporterBinaries map[string]string
	// caCerts is the PEM bundle installed at /etc/ssl/certs/ca-certificates.crt.
	caCerts string
	// name is the image's name without the tag, e.g. ghcr.io/podslo/podslo.
	name string
	// version, revision, created, source and licenses become the
	// org.opencontainers.image.* labels; version is also the tag.
	version, revision, source, licenses string
	created                             time.Time
}

func parseOptions(args []string) (*options, error) {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	o := &options{binaries: map[string]string{}, exporterBinaries: map[string]string{}}
	var created string
	fs.StringVar(&o.out, "out", "", "OCI layout directory to write (replaced)")
	fs.Func("binary", "PLATFORM=PATH of a static podslo binary, e.g. linux/arm64=bin/linux_arm64/podslo; repeat per platform", func(v string) error {
		platform, path, ok := strings.Cut(v, "=")
		if !ok || path == "" {
			return fmt.Errorf("%q: want PLATFORM=PATH", v)
		}
		if _, err := parsePlatform(platform); err != nil {
			return err
		}
		if _, dup := o.binaries[platform]; dup {
			return fmt.Errorf("platform %s given twice", platform)
		}
		o.binaries[platform] = path
		return nil
	})
	fs.Func("exporter-binary", "PLATFORM=PATH of the static exporter binary (make build's podslo-exporter) for each --binary platform", func(v string) error {
		platform, path, ok := strings.Cut(v, "=")
		if !ok || path == "" {
			return fmt.Errorf("%q: want PLATFORM=PATH", v)
		}
		if _, dup := o.exporterBinaries[platform]; dup {
			return fmt.Errorf("exporter binary for %s given twice", platform)
		}
		o.exporterBinaries[platform] = path
		return nil
	})
	fs.StringVar(&o.caCerts, "ca-certs", "", "PEM CA bundle to install (Debian: /etc/ssl/certs/ca-certificates.crt)")
	fs.StringVar(&o.name, "name", "", "image name without tag, e.g. ghcr.io/podslo/podslo")
	fs.StringVar(&o.version, "version", "", "version: the tag and org.opencontainers.image.version")
	fs.StringVar(&o.revision, "revision", "", "git revision: org.opencontainers.image.revision")
	fs.StringVar(&o.source, "source", "", "source repository URL: org.opencontainers.image.source")
	fs.StringVar(&o.licenses, "licenses", "", "SPDX expression: org.opencontainers.image.licenses")
	fs.StringVar(&created, "created", "", "RFC 3339 build date: org.opencontainers.image.created, and every file's time")
	fs.SetOutput(io.Discard) // errors name the flag; -h prints the defaults
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(os.Stderr)
			fs.PrintDefaults()
		}
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var missing []string
	for _, f := range []struct{ name, value string }{
		{"out", o.out}, {"ca-certs", o.caCerts}, {"name", o.name}, {"version", o.version},
		{"revision", o.revision}, {"source", o.source}, {"licenses", o.licenses}, {"created", created},
	} {
		if f.value == "" {
			missing = append(missing, "--"+f.name)
		}
	}
	if len(o.binaries) == 0 {
		missing = append(missing, "--binary")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	for _, platform := range slices.Sorted(maps.Keys(o.binaries)) {
		if o.exporterBinaries[platform] == "" {
			return nil, fmt.Errorf("missing --exporter-binary %s=PATH", platform)
		}
	}
	for _, platform := range slices.Sorted(maps.Keys(o.exporterBinaries)) {
		if o.binaries[platform] == "" {
			return nil, fmt.Errorf("--exporter-binary %s has no --binary", platform)
		}
	}
	var err error
	if o.created, err = time.Parse(time.RFC3339, created); err != nil {
		return nil, fmt.Errorf("--created: %w", err)
	}
	if _, err := name.NewTag(o.name+":"+o.version, name.StrictValidation); err != nil {
		return nil, fmt.Errorf("--name %q and --version %q do not make an image reference (give the name without a tag): %w", o.name, o.version, err)
	}
	return o, nil
}
