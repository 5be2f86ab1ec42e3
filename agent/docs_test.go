package agent

import (
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podslo/podslo/lifecycle"
)

var agentRowRE = regexp.MustCompile("^\\| `(podslo_agent_[a-z_]+)` \\| ([a-z]+) \\|([^|]*)\\| ([A-Z]+) \\|")

// TestDocsMatchAgentMetrics: docs/metrics.md's agent table lists exactly the
// families the agent registers, with their types and labels.
func TestDocsMatchAgentMetrics(t *testing.T) {
	md, err := os.ReadFile("../docs/metrics.md")
	require.NoError(t, err)
	docs := map[string]string{}
	for _, line := range strings.Split(string(md), "\n") {
		if m := agentRowRE.FindStringSubmatch(line); m != nil {
			docs[m[1]] = m[2] + " " + strings.TrimSpace(m[3]) + " " + m[4]
		}
	}

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(newBuildInfo())
	m := newMetrics(reg, DefaultStableConditionType)
	m.duration.Observe(0.01)
	pm := newProbeMetrics(reg, m)
	pm.toCondition.Observe(0.01)
	fams, err := reg.Gather()
	require.NoError(t, err)
	code := map[string]string{}
	for _, f := range fams {
		labels := map[string]bool{}
		for _, metric := range f.GetMetric() {
			for _, l := range metric.GetLabel() {
				labels["`"+l.GetName()+"`"] = true
			}
		}
		names := make([]string, 0, len(labels))
		for l := range labels {
			names = append(names, l)
		}
		sort.Strings(names)
		code[f.GetName()] = strings.ToLower(f.GetType().String()) + " " + strings.Join(names, ", ") + " ALPHA"
	}
	assert.Equal(t, code, docs)
	assert.Equal(t, dto.MetricType_COUNTER, fams[2].GetType(), "families sorted by name: writes_total third")
	assert.Len(t, fams, 8)
}

// The exporter observes the condition the agent writes: one name for both.
func TestStableTypeMatchesExporter(t *testing.T) {
	assert.Equal(t, string(lifecycle.DefaultStableConditionType), DefaultStableConditionType)
}
