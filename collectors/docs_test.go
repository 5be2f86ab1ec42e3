package collectors

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podslo/podslo/sli"
)

// docRow is one family as docs/metrics.md documents it.
type docRow struct {
	Type, Labels, Stability string
}

var docRowRE = regexp.MustCompile("^\\| `(podslo_[a-z_]+)` \\| ([a-z]+) \\|([^|]*)\\| ([A-Z]+) \\|")

// documented returns the exporter's rows of docs/metrics.md; the agent's
// (podslo_agent_*) are checked by agent/docs_test.go.
func documented(t *testing.T) map[string]docRow {
	t.Helper()
	md, err := os.ReadFile("../docs/metrics.md")
	require.NoError(t, err)
	out := map[string]docRow{}
	for _, line := range strings.Split(string(md), "\n") {
		if m := docRowRE.FindStringSubmatch(line); m != nil && !strings.HasPrefix(m[1], "podslo_agent_") {
			require.NotContains(t, out, m[1], "documented twice")
			out[m[1]] = docRow{Type: m[2], Labels: strings.TrimSpace(m[3]), Stability: m[4]}
		}
	}
	return out
}

// docLabels renders a family's labels the way docs/metrics.md writes them.
func docLabels(f *sli.MetricFamily) string {
	var parts []string
	for _, l := range f.Labels {
		parts = append(parts, "`"+l+"`")
	}
	if f.HistogramLabels {
		parts = append(parts, "*histogram labels*")
	}
	if f.PodLabels {
		parts = append(parts, "*pod labels*")
	}
	return strings.Join(parts, ", ")
}

func TestDocsMatchCode(t *testing.T) {
	docs := documented(t)
	code := map[string]docRow{}
	for _, f := range All() {
		code[f.Name] = docRow{Type: f.Type.String(), Labels: docLabels(f), Stability: f.Stability.String()}
	}
	assert.Equal(t, code, docs, "docs/metrics.md and collectors disagree")
}

// TestPerPodPrefixIsPerPodOnly: podslo_pod_* names the per-pod families and
// nothing else, so that a relabelling that drops podslo_pod_.* to cut
// cardinality (docs/metrics.md) drops no series an SLO reads.
func TestPerPodPrefixIsPerPodOnly(t *testing.T) {
	perPod := map[string]bool{}
	for _, p := range sli.PerPod() {
		perPod[p.MetricFamily().Name] = true
		assert.True(t, strings.HasPrefix(p.MetricFamily().Name, "podslo_pod_"), "per-pod family %s", p.MetricFamily().Name)
	}
	require.NotEmpty(t, perPod)
	for _, f := range All() {
		if !perPod[f.Name] {
			assert.False(t, strings.HasPrefix(f.Name, "podslo_pod_"), "%s is not per pod", f.Name)
		}
	}
}
