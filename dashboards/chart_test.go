package dashboards

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podslo/podslo/internal/charttest"
)

const chartDir = "../charts/podslo"

// TestChartTemplateIsUpToDate makes CI fail when the generator or
// slos.yaml changed but the chart's dashboards were not regenerated.
func TestChartTemplateIsUpToDate(t *testing.T) {
	want, err := ChartTemplate(loadSpec(t), "slos.yaml")
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join(chartDir, "templates", "dashboards.yaml"))
	require.NoError(t, err)
	if string(want) != string(got) {
		t.Error("charts/podslo/templates/dashboards.yaml is stale: run `go generate ./dashboards` (make mixin) and commit the result")
	}
}

// renderedDashboards renders the chart and returns its dashboard
// ConfigMaps by name.
func renderedDashboards(t *testing.T, args ...string) map[string]charttest.Object {
	t.Helper()
	out := map[string]charttest.Object{}
	for _, o := range charttest.Template(t, chartDir, args...) {
		if o.Kind == "ConfigMap" && o.Source == "podslo/templates/dashboards.yaml" {
			out[o.Metadata.Name] = o
		}
	}
	return out
}

// TestChartDefaults: with its default values the chart holds exactly the
// files of dashboards_out/, one ConfigMap each, for the Grafana sidecar.
func TestChartDefaults(t *testing.T) {
	cms := renderedDashboards(t)
	files, err := filepath.Glob("dashboards_out/*.json")
	require.NoError(t, err)
	require.Len(t, cms, len(files))
	for _, f := range files {
		uid := strings.TrimSuffix(filepath.Base(f), ".json")
		cm, ok := cms["podslo-dashboard-"+strings.TrimPrefix(uid, "podslo-")]
		require.True(t, ok, "no ConfigMap for %s", f)
		assert.Equal(t, "monitoring", cm.Metadata.Namespace)
		assert.Equal(t, "1", cm.Metadata.Labels["grafana_dashboard"])
		assert.Empty(t, cm.Metadata.Annotations)
		want, err := os.ReadFile(f)
		require.NoError(t, err)
		assert.Equal(t, map[string]string{filepath.Base(f): string(want)}, cm.Data)
	}
}

func TestChartDashboardMetadata(t *testing.T) {
	cms := renderedDashboards(t,
		"--set", "monitoring.dashboards.label=dashboards.example.com/grafana",
		"--set", "monitoring.dashboards.labelValue=podslo",
		"--set", "monitoring.dashboards.namespace=grafana",
		"--set", "monitoring.dashboards.labels.team=platform",
		"--set", "monitoring.dashboards.annotations.grafana_folder=podslo")
	require.Len(t, cms, 4)
	// The chart's version and appVersion are VERSION (charts' TestVersionsAgree).
	raw, err := os.ReadFile("../VERSION")
	require.NoError(t, err)
	version := strings.TrimSpace(string(raw))
	for name, cm := range cms {
		assert.Equal(t, "grafana", cm.Metadata.Namespace, name)
		assert.Equal(t, map[string]string{
			"app.kubernetes.io/name": "podslo", "app.kubernetes.io/instance": "podslo", "app.kubernetes.io/managed-by": "Helm", "app.kubernetes.io/version": version, "helm.sh/chart": "podslo-" + version,
			"dashboards.example.com/grafana": "podslo", "team": "platform",
		}, cm.Metadata.Labels, name)
		assert.Equal(t, map[string]string{"grafana_folder": "podslo"}, cm.Metadata.Annotations, name)
	}
	assert.Empty(t, renderedDashboards(t, "--set", "monitoring.dashboards.enabled=false"))
	assert.Equal(t, `monitoring.dashboards.label: "grafana dashboard" is not a label name`,
		charttest.TemplateError(t, chartDir, "--set", "monitoring.dashboards.label=grafana dashboard"))
}

// TestChartValues: values change the rendered dashboards exactly as the
// same change to slos.yaml changes the generated ones, and their queries
// still parse.
func TestChartValues(t *testing.T) {
	values := filepath.Join(t.TempDir(), "values.yaml")
	require.NoError(t, os.WriteFile(values, []byte(`
monitoring:
  clusterLabel: k8s_cluster
  exporterSelector: job=~"podslo-(exporter|x)",team="a\\b"
  agentSelector: ""
  slos:
    sandbox_creation_latency: {objective: 99.5, threshold: 10s, minEvents: 40, classThresholds: {runtime_class: {kata: 20s}}}
    sandbox_creation_success: {objective: 95}
`), 0o644))
	cms := renderedDashboards(t, "-f", values)

	spec := loadSpec(t)
	spec.Config.ClusterLabel = "k8s_cluster"
	spec.Config.ExporterSelector, spec.Config.AgentSelector = `job=~"podslo-(exporter|x)",team="a\\b"`, ""
	spec.SLOs[0].Objective, spec.SLOs[0].Latency.Threshold, spec.SLOs[0].MinEvents = 99.5, "10s", 40
	spec.SLOs[0].Latency.ClassThresholds = map[string]map[string]string{"runtime_class": {"kata": "20s"}}
	spec.SLOs[1].Objective = 95
	require.NoError(t, spec.Validate())
	want, err := Generate(spec)
	require.NoError(t, err)

	rendered := map[string]dashboardJSON{}
	var all string
	for name, raw := range want {
		cm, ok := cms["podslo-dashboard-"+strings.TrimPrefix(strings.TrimSuffix(name, ".json"), "podslo-")]
		require.True(t, ok, name)
		var wantJSON, gotJSON any
		require.NoError(t, json.Unmarshal(raw, &wantJSON))
		require.NoError(t, json.Unmarshal([]byte(cm.Data[name]), &gotJSON), name)
		assert.Equal(t, wantJSON, gotJSON, name)
		var d dashboardJSON
		require.NoError(t, json.Unmarshal([]byte(cm.Data[name]), &d))
		rendered[name] = d
		all += cm.Data[name]
	}
	for _, s := range []string{
		`label_values(podslo_build_info{job=~\"podslo-(exporter|x)\",team=\"a\\\\b\"}, k8s_cluster)`,
		`k8s_cluster_runtime_class:podslo_sandbox_creation_latency_errors:ratio_rate1h{k8s_cluster=~\"$cluster\", runtime_class=~\"$runtime_class\"} / scalar(max(slo:podslo_error_budget:ratio{slo=\"sandbox_creation_latency\"}))`,
		`le=~\"10(\\\\.0)?\",runtime_class!=\"kata\"`,
		`runtime_class=\"kata\",le=~\"20(\\\\.0)?\"`,
		`"title": "sandbox creations within 10s (20s for runtime_class kata)"`,
		`"value": 0.995`,
		`"value": 0.95`,
		`Sandbox creation latency: 99.5% within 10s (20s for runtime_class kata) over 30d`,
		`the share of the 30d error budget (5%) not yet spent`,
		`podslo_agent_probe_workers{k8s_cluster=~\"$cluster\"}`,
	} {
		assert.Contains(t, all, s)
	}
	checkQueriesParse(t, rendered)
}

// The chart's dashboards are the same code as dashboards_out/: the
// objectives in JSON numbers are the only ones replaced after the fact.
func TestChartSentinels(t *testing.T) {
	chart := loadSpec(t).ForChart()
	files, err := Generate(chart)
	require.NoError(t, err)
	var all string
	for _, f := range files {
		all += string(f)
	}
	for i := range chart.SLOs {
		slo := &chart.SLOs[i]
		n := strings.Count(all, formatFloat(slo.ObjectiveValue()))
		assert.Equal(t, strings.Count(all, `"value": `+formatFloat(slo.ObjectiveValue())), n, slo.Name)
		assert.Positive(t, n, slo.Name)
	}
}
