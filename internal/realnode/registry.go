package realnode

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/registry"
)

// Registry is an OCI registry in the test's process, on loopback, that the
// node's containerd pulls from over plain HTTP: the kubelet's image pulls,
// and its Pulling and Pulled events, for real.
type Registry struct {
	// Host is its host:port, the start of its images' names.
	Host string
	srv  *httptest.Server
	// archive is the sleeper image's docker archive, which Push uploads.
	archive string
}

// registryHosts is containerd's directory of hosts.toml files.
func (n *Node) registryHosts() string { return filepath.Join(n.dir, "certs.d") }

// StartRegistry serves a registry on 127.0.0.1 until the test ends, tells
// the node's containerd to reach it over HTTP, and pushes the sleeper
// image to it under each of repos (e.g. "podslo/sleeper:1").
func (n *Node) StartRegistry(t testing.TB, repos ...string) *Registry {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("registry listener: %v", err)
	}
	// Its requests go to a log beside the node's others.
	logFile, err := os.Create(filepath.Join(n.dir, "registry.log"))
	if err != nil {
		t.Fatalf("registry log: %v", err)
	}
	t.Cleanup(func() { _ = logFile.Close() })
	srv := &httptest.Server{Listener: lis, Config: &http.Server{Handler: registry.New(registry.Logger(log.New(logFile, "", log.LstdFlags|log.Lmicroseconds)))}}
	srv.Start()
	t.Cleanup(srv.Close)
	r := &Registry{Host: lis.Addr().String(), srv: srv, archive: filepath.Join(n.dir, "sleeper.tar")}
	// containerd reads hosts.toml at each pull: no restart.
	hosts := filepath.Join(n.registryHosts(), r.Host)
	if err := os.MkdirAll(hosts, 0o755); err != nil {
		t.Fatalf("registry hosts: %v", err)
	}
	toml := fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", "http://"+r.Host, "http://"+r.Host)
	if err := os.WriteFile(filepath.Join(hosts, "hosts.toml"), []byte(toml), 0o644); err != nil {
		t.Fatalf("registry hosts: %v", err)
	}
	r.Push(t, repos...)
	return r
}

// Push uploads the sleeper image under each of repos: a pull of one that
// failed before succeeds from now on.
func (r *Registry) Push(t testing.TB, repos ...string) {
	t.Helper()
	layer, config, err := sleeperImage(r.archive)
	if err != nil {
		t.Fatalf("read the sleeper image: %v", err)
	}
	for _, repo := range repos {
		if err := r.push(repo, layer, config); err != nil {
			t.Fatalf("push %s: %v", repo, err)
		}
	}
}

// Image is the name of repo in the registry.
func (r *Registry) Image(repo string) string { return r.Host + "/" + repo }

// sleeperImage reads the layer and the config of the sleeper image from
// its docker archive (buildImage).
func sleeperImage(archive string) (layer, config []byte, err error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, nil, err
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, nil, err
		}
		switch h.Name {
		case "layer.tar":
			layer = b
		case "config.json":
			config = b
		}
	}
	if layer == nil || config == nil {
		return nil, nil, fmt.Errorf("%s: no layer.tar or config.json", archive)
	}
	return layer, config, nil
}

func digest(b []byte) string {
	d := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(d[:])
}

// push uploads the image's blobs and its OCI manifest as repo (name:tag),
// through the distribution API as a client would.
func (r *Registry) push(repo string, layer, config []byte) error {
	name, tag, ok := strings.Cut(repo, ":")
	if !ok {
		return fmt.Errorf("%s: no tag", repo)
	}
	for _, blob := range [][]byte{layer, config} {
		resp, err := http.Post(r.srv.URL+"/v2/"+name+"/blobs/uploads/", "", nil)
		if err != nil {
			return err
		}
		resp.Body.Close()
		loc := resp.Header.Get("Location")
		if resp.StatusCode != http.StatusAccepted || loc == "" {
			return fmt.Errorf("start a blob upload: %s", resp.Status)
		}
		if !strings.HasPrefix(loc, "http") {
			loc = r.srv.URL + loc
		}
		sep := "?"
		if strings.Contains(loc, "?") {
			sep = "&"
		}
		if err := put(loc+sep+"digest="+digest(blob), "application/octet-stream", blob); err != nil {
			return fmt.Errorf("upload a blob: %w", err)
		}
	}
	manifest, err := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"mediaType":     "application/vnd.oci.image.manifest.v1+json",
		"config":        map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest(config), "size": len(config)},
		"layers":        []map[string]any{{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": digest(layer), "size": len(layer)}},
	})
	if err != nil {
		return err
	}
	return put(r.srv.URL+"/v2/"+name+"/manifests/"+tag, "application/vnd.oci.image.manifest.v1+json", manifest)
}

func put(url, contentType string, body []byte) error {
	req, err := http.NewRequest(http.MethodPut, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		return fmt.Errorf("PUT %s: %s", url, resp.Status)
	}
	return nil
}
