package testenv

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// PrometheusOperatorCRDs returns the directory of the Prometheus Operator's
// CRDs, those of the Operator the tests run (promstack.txt), which `make
// promstackbin` copies from its module's example/prometheus-operator-crd.
// Their text never enters this repository.
func PrometheusOperatorCRDs(t testing.TB) string {
	t.Helper()
	return findPromstack(t, "prometheus-operator", "crds")
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRDs creates the CRDs of files (YAML) and waits until the API
// server serves them.
func (e *Env) InstallCRDs(t testing.TB, files ...string) {
	t.Helper()
	InstallCRDs(t, e.Config, files...)
}

// InstallCRDs creates the CRDs of files (YAML) on the API server of cfg
// and waits until it serves them.
func InstallCRDs(t testing.TB, cfg *rest.Config, files ...string) {
	t.Helper()
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(cfg)
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
