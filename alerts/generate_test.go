package alerts

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// TestGeneratedFilesAreUpToDate makes CI fail when slos.yaml or the
// generator changed but the committed rule files were not regenerated.
func TestGeneratedFilesAreUpToDate(t *testing.T) {
	spec, err := Load("slos.yaml")
	require.NoError(t, err)
	rules, alerts := Generate(spec, "slos.yaml")
	for file, want := range map[string][]byte{"prometheus_rules.yaml": rules, "prometheus_alerts.yaml": alerts} {
		got, err := os.ReadFile(file)
		require.NoError(t, err)
		if !bytes.Equal(want, got) {
			t.Errorf("%s is stale: run `go generate ./alerts` (make mixin) and commit the result", file)
		}
	}
}

// The YAML is written by hand: decoding it must give back what was meant.
func TestYAMLRoundTrip(t *testing.T) {
	spec, err := Load("slos.yaml")
	require.NoError(t, err)
	for _, want := range []RuleFile{spec.RecordingRules(), spec.Alerts()} {
		js, err := utilyaml.ToJSON(want.YAML("header\nsecond line"))
		require.NoError(t, err)
		var got RuleFile
		require.NoError(t, json.Unmarshal(js, &got))
		assert.Equal(t, want, got)
	}
	tricky := RuleFile{Groups: []RuleGroup{{Name: `a "quoted": name`, Rules: []Rule{{
		Alert:       "A",
		Expr:        "up\n  == 0",
		Labels:      map[string]string{"x": "yes", "y": "1", "z": ""},
		Annotations: map[string]string{"d": "line\nbreak\t{{ $value }} # not a comment: 'q'"},
	}}}}}
	js, err := utilyaml.ToJSON(tricky.YAML(""))
	require.NoError(t, err)
	var got RuleFile
	require.NoError(t, json.Unmarshal(js, &got))
	assert.Equal(t, tricky, got)
}

// TestRunbooks: docs/runbooks.md has one section per alert, in the order of
// prometheus_alerts.yaml, and each says how to confirm it with PromQL and
// kubectl.
func TestRunbooks(t *testing.T) {
	spec, err := Load("slos.yaml")
	require.NoError(t, err)
	var alerts []string
	for _, g := range spec.Alerts().Groups {
		for _, r := range g.Rules {
			if !slices.Contains(alerts, r.Alert) {
				alerts = append(alerts, r.Alert)
			}
		}
	}
	f, err := os.Open("../docs/runbooks.md")
	require.NoError(t, err)
	defer f.Close()
	heading := regexp.MustCompile(`^## (Podslo\w+)$`)
	sections := map[string]string{}
	var order []string
	var current string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if m := heading.FindStringSubmatch(line); m != nil {
			current = m[1]
			order = append(order, current)
			continue
		}
		if strings.HasPrefix(line, "## ") {
			current = ""
		}
		if current != "" {
			sections[current] += line + "\n"
		}
	}
	require.NoError(t, sc.Err())
	assert.Equal(t, alerts, order)
	for name, text := range sections {
		assert.Contains(t, text, "```promql", "%s: confirm with PromQL", name)
		assert.Contains(t, text, "kubectl", "%s: confirm with kubectl", name)
	}
}
