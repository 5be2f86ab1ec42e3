package testenv

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes/scheme"
)

// Manifests decodes every object of a multi-document YAML file with
// client-go's scheme, so that the shipped deploy/ files are what tests load.
func Manifests(t testing.TB, path string) []runtime.Object {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var out []runtime.Object
	for {
		var doc runtime.RawExtension
		if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("decode %s: %v", path, err)
		}
		if len(bytes.TrimSpace(doc.Raw)) == 0 {
			continue
		}
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(doc.Raw, nil, nil)
		if err != nil {
			t.Fatalf("decode %s: %v\n%s", path, err, doc.Raw)
		}
		out = append(out, obj)
	}
}
