// Package charttest renders the Helm chart charts/podslo for tests, with
// the helm binary that `make helmbin` builds (PODSLO_HELM).
package charttest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"regexp"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Helm is the helm binary of $PODSLO_HELM. The chart tests are part of
// `make test`, so a missing helm fails them rather than skipping them.
func Helm(t testing.TB) string {
	t.Helper()
	p := os.Getenv("PODSLO_HELM")
	if p == "" {
		t.Fatal("PODSLO_HELM is not set: run the tests through make, or build helm with `make helmbin` and export PODSLO_HELM=<its path>")
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("PODSLO_HELM: %v: build it with `make helmbin`", err)
	}
	return p
}

// Object is one rendered manifest, with the fields the tests read.
type Object struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name        string            `json:"name"`
		Namespace   string            `json:"namespace"`
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Spec json.RawMessage   `json:"spec"`
	Data map[string]string `json:"data"`
	// Source is the template the manifest came from, as helm names it.
	Source string `json:"-"`
}

var sourceComment = regexp.MustCompile(`(?m)^# Source: (\S+)$`)

// Template runs helm template on chartDir, as release podslo in namespace
// monitoring, with args added (e.g. --set, -f), and decodes every object.
func Template(t testing.TB, chartDir string, args ...string) []Object {
	t.Helper()
	out, err := run(t, chartDir, args...)
	if err != nil {
		t.Fatalf("helm template %v: %v", args, err)
	}
	var objs []Object
	for _, doc := range bytes.Split(out, []byte("\n---\n")) {
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(doc), 4096)
		var obj Object
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			continue
		} else if err != nil {
			t.Fatalf("decode the output of helm template %v: %v\n%s", args, err, doc)
		}
		if obj.Kind == "" {
			continue
		}
		if m := sourceComment.FindSubmatch(doc); m != nil {
			obj.Source = string(m[1])
		}
		objs = append(objs, obj)
	}
	return objs
}

// TemplateError runs helm template as Template does, expects it to fail,
// and returns the message of a template's fail call.
func TemplateError(t testing.TB, chartDir string, args ...string) string {
	t.Helper()
	_, err := run(t, chartDir, args...)
	if err == nil {
		t.Fatalf("helm template %v succeeded; want an error", args)
	}
	m := failMessage.FindStringSubmatch(err.Error())
	if m == nil {
		t.Fatalf("helm template %v: want a template's fail message, got: %v", args, err)
	}
	return m[1]
}

// Helm prints a template's fail as "execution error at (<template>:<line>:
// <column>): <message>"; which template fails first is helm's choice.
var failMessage = regexp.MustCompile(`execution error at \([^)]*\): (.*)`)

type helmError struct{ stderr []byte }

func (e *helmError) Error() string { return string(bytes.TrimSpace(e.stderr)) }

func run(t testing.TB, chartDir string, args ...string) ([]byte, error) {
	t.Helper()
	// The agent is off by default, which leaves out its alerts; the mixin's
	// tests compare the whole rule set, so they render with it on (args
	// may turn it off again).
	// The cluster serves the Prometheus Operator's kinds, without which
	// the chart leaves out the PrometheusRules (prometheusOperator: auto).
	cmd := exec.Command(Helm(t), append([]string{"template", "podslo", chartDir, "--namespace", "monitoring", "--set", "agent.enabled=true",
		"--api-versions", "monitoring.coreos.com/v1/ServiceMonitor", "--api-versions", "monitoring.coreos.com/v1/PodMonitor",
		"--api-versions", "monitoring.coreos.com/v1/PrometheusRule"}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return nil, &helmError{stderr: stderr.Bytes()}
		}
		return nil, err
	}
	return stdout.Bytes(), nil
}

// Find returns the object of kind and name, failing the test without one.
func Find(t testing.TB, objs []Object, kind, name string) Object {
	t.Helper()
	for _, o := range objs {
		if o.Kind == kind && o.Metadata.Name == name {
			return o
		}
	}
	t.Fatalf("no %s %s among the rendered objects", kind, name)
	return Object{}
}
