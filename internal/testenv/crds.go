package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
)

// PrometheusOperatorVersion is the Prometheus Operator whose CRDs the chart
// tests install: the module the Go module proxy serves, whose
// example/prometheus-operator-crd/ holds them.
const PrometheusOperatorVersion = "v0.85.0"

// PrometheusOperatorCRDs returns the directory of the Prometheus Operator's
// CRDs in the Go module cache, downloading the module through the module
// proxy if it is not there yet. Their text never enters this repository.
func PrometheusOperatorCRDs(t testing.TB) string {
	t.Helper()
	cmd := exec.Command("go", "mod", "download", "-json", "github.com/prometheus-operator/prometheus-operator@"+PrometheusOperatorVersion)
	// Outside any module: the download must not touch podslo's go.mod.
	cmd.Dir = os.TempDir()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("download the Prometheus Operator %s module: %v\n%s", PrometheusOperatorVersion, err, stderr.String())
	}
	var mod struct{ Dir, Error string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("download the Prometheus Operator %s module: no directory in %q (%v) %s", PrometheusOperatorVersion, out, err, mod.Error)
	}
	return filepath.Join(mod.Dir, "example", "prometheus-operator-crd")
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRDs creates the CRDs of files (YAML) and waits until the API
// server serves them.
func (e *Env) InstallCRDs(t testing.TB, files ...string) {
	t.Helper()
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(e.Config)
	if err != nil {
		t.Fatalf("dynamic client: %v", err)
	}
	var names []string
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("read CRD: %v", err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
		for {
			var crd unstructured.Unstructured
			if err := dec.Decode(&crd.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("decode %s: %v", f, err)
			}
			if crd.Object == nil {
				continue
			}
			if crd.GetKind() != "CustomResourceDefinition" {
				t.Fatalf("%s holds a %s, not a CustomResourceDefinition", f, crd.GetKind())
			}
			if _, err := dyn.Resource(crdResource).Create(ctx, &crd, metav1.CreateOptions{}); err != nil {
				t.Fatalf("create CRD %s from %s: %v", crd.GetName(), f, err)
			}
			names = append(names, crd.GetName())
		}
	}
	for _, name := range names {
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			return crdEstablished(ctx, dyn, name), nil
		})
		if err != nil {
			t.Fatalf("CRD %s not established within 60s: %v", name, err)
		}
	}
}

func crdEstablished(ctx context.Context, dyn dynamic.Interface, name string) bool {
	crd, err := dyn.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false
	}
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}
