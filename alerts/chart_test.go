package alerts

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/podslo/podslo/internal/charttest"
)

const chartDir = "../charts/podslo"

// TestChartFilesAreUpToDate makes CI fail when slos.yaml or the generator
// changed but the chart's generated files were not regenerated.
func TestChartFilesAreUpToDate(t *testing.T) {
	spec, err := Load("slos.yaml")
	require.NoError(t, err)
	files, err := ChartFiles(spec, "slos.yaml", chartDir)
	require.NoError(t, err)
	require.Len(t, files, 4)
	for path, want := range files {
		got, err := os.ReadFile(path)
		require.NoError(t, err)
		if string(want) != string(got) {
			t.Errorf("%s is stale: run `go generate ./alerts` (make mixin) and commit the result", path)
		}
	}
}

func TestReplaceValuesSection(t *testing.T) {
	values := "image: x\n" + valuesBegin + "\nmonitoring: old\n" + valuesEnd + "\nrbac: y\n"
	got, err := ReplaceValuesSection([]byte(values), []byte(valuesBegin+"\nmonitoring: new\n"+valuesEnd+"\n"))
	require.NoError(t, err)
	assert.Equal(t, "image: x\n"+valuesBegin+"\nmonitoring: new\n"+valuesEnd+"\nrbac: y\n", string(got))
	_, err = ReplaceValuesSection([]byte("image: x\n"), nil)
	assert.ErrorIs(t, err, ErrNoValuesSection)
}

// ruleFile decodes the rule groups of a rule file or of a PrometheusRule's
// spec, which have the same shape.
func ruleFile(t *testing.T, raw []byte) RuleFile {
	t.Helper()
	js, err := utilyaml.ToJSON(raw)
	require.NoError(t, err)
	var f RuleFile
	require.NoError(t, json.Unmarshal(js, &f))
	require.NotEmpty(t, f.Groups)
	return f
}

// renderedRules renders the chart and returns the groups of its two
// PrometheusRule objects.
func renderedRules(t *testing.T, args ...string) (rules, alerts RuleFile) {
	t.Helper()
	objs := charttest.Template(t, chartDir, args...)
	return ruleFile(t, charttest.Find(t, objs, "PrometheusRule", "podslo-rules").Spec),
		ruleFile(t, charttest.Find(t, objs, "PrometheusRule", "podslo-alerts").Spec)
}

// TestChartDefaults: with its default values the chart holds exactly the
// committed rule files, which the promtool tests of tests/ test.
func TestChartDefaults(t *testing.T) {
	objs := charttest.Template(t, chartDir)
	// The chart's version and appVersion are VERSION (charts' TestVersionsAgree).
	raw, err := os.ReadFile("../VERSION")
	require.NoError(t, err)
	version := strings.TrimSpace(string(raw))
	for _, kind := range []string{"rules", "alerts"} {
		obj := charttest.Find(t, objs, "PrometheusRule", "podslo-"+kind)
		assert.Equal(t, "monitoring", obj.Metadata.Namespace)
		assert.Equal(t, map[string]string{"app.kubernetes.io/name": "podslo", "app.kubernetes.io/instance": "podslo", "app.kubernetes.io/managed-by": "Helm", "app.kubernetes.io/version": version, "helm.sh/chart": "podslo-" + version}, obj.Metadata.Labels)
		raw, err := os.ReadFile("prometheus_" + kind + ".yaml")
		require.NoError(t, err)
		assert.Equal(t, ruleFile(t, raw), ruleFile(t, obj.Spec), kind)
	}
}

// TestChartWithoutTheAgent: the chart's default leaves the agent out, and
// with it its alerts, which absent() would otherwise fire forever.
func TestChartWithoutTheAgent(t *testing.T) {
	_, alerts := renderedRules(t, "--set", "agent.enabled=false")
	var names []string
	for _, g := range alerts.Groups {
		for _, r := range g.Rules {
			names = append(names, r.Alert)
		}
	}
	assert.Contains(t, names, "PodsloExporterDown")
	assert.Contains(t, names, "PodsloExporterInstanceDown")
	assert.NotContains(t, names, "PodsloAgentDown")
	assert.NotContains(t, names, "PodsloAgentDownOnNode")
}

func TestChartToggles(t *testing.T) {
	objs := charttest.Template(t, chartDir, "--set", "monitoring.prometheusRule.labels.release=kube-prometheus-stack",
		"--set", "monitoring.prometheusRule.annotations.team=platform")
	for _, kind := range []string{"rules", "alerts"} {
		obj := charttest.Find(t, objs, "PrometheusRule", "podslo-"+kind)
		assert.Equal(t, "kube-prometheus-stack", obj.Metadata.Labels["release"], kind)
		assert.Equal(t, map[string]string{"team": "platform"}, obj.Metadata.Annotations, kind)
	}
	for _, tc := range []struct {
		set  string
		want []string
	}{
		{"monitoring.rules.enabled=false", []string{"podslo-alerts"}},
		{"monitoring.alerts.enabled=false", []string{"podslo-rules"}},
	} {
		var got []string
		for _, o := range charttest.Template(t, chartDir, "--set", tc.set) {
			if o.Kind == "PrometheusRule" {
				got = append(got, o.Metadata.Name)
			}
		}
		assert.Equal(t, tc.want, got, tc.set)
	}
}

// TestChartRulesPassPromtool runs promtool's checks and every unit test of
// tests/ on the rules the chart renders, as a Prometheus would load them.
func TestChartRulesPassPromtool(t *testing.T) {
	rules, alerts := renderedRules(t)
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "tests"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "prometheus_rules.yaml"), rules.YAML("rendered by helm"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "prometheus_alerts.yaml"), alerts.YAML("rendered by helm"), 0o644))
	runPromtool(t, "check", "rules", filepath.Join(dir, "prometheus_rules.yaml"), filepath.Join(dir, "prometheus_alerts.yaml"))
	tests, err := filepath.Glob("tests/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, tests)
	for _, f := range tests {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		// The tests name the rule files relative to themselves.
		require.Contains(t, string(raw), "../prometheus_", f)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "tests", filepath.Base(f)), raw, 0o644))
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			runPromtool(t, "test", "rules", filepath.Join(dir, "tests", filepath.Base(f)))
		})
	}
}

// TestChartValues: values change the rendered rules exactly as the same
// change to slos.yaml changes the generated rule files, and as the case
// spells out.
func TestChartValues(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values string
		// spec makes the same change to slos.yaml.
		spec func(*Spec)
		// want holds what a rule of the alerts must say.
		want map[string][]string
	}{{
		name: "objectives and thresholds",
		values: `
monitoring:
  slos:
    sandbox_creation_latency: {objective: 99.5, threshold: 10s, minEvents: 40}
    termination_latency: {objective: 99.95, threshold: 120s, minEvents: 400}
    sandbox_creation_success: {objective: 95}
`,
		spec: func(s *Spec) {
			s.SLOs[0].Objective, s.SLOs[0].Latency.Threshold, s.SLOs[0].MinEvents = 99.5, "10s", 40
			s.SLOs[2].Objective, s.SLOs[2].Latency.Threshold, s.SLOs[2].MinEvents = 99.95, "120s", 400
			s.SLOs[1].Objective = 95
		},
		want: map[string][]string{
			"PodsloSandboxCreationLatencyBudgetBurn": {
				"> (14.4 * (1 - 0.995))", ">= 40", "were slower than 10s", "more than 7.2% over the last 5m", "The objective, 99.5% per 30d, allows 0.5%",
			},
			"PodsloTerminationLatencyBudgetBurn":     {"> (6 * (1 - 0.9995))", "more than 0.3% over the last 30m", "allows 0.05%"},
			"PodsloSandboxCreationSuccessBudgetBurn": {"> (14.4 * (1 - 0.95))", "more than 72% over the last 5m", "allows 5%"},
		},
	}, {
		name: "selectors cluster and URLs",
		values: `
monitoring:
  clusterLabel: k8s_cluster
  cluster: prod "eu"
  exporterSelector: job=~"podslo-(exporter|x)",team="a\\b"
  agentSelector: job="node-agent"
  grafanaURL: https://grafana.internal/g/
  runbookURL: https://wiki.internal/podslo
`,
		spec: func(s *Spec) {
			s.Config.ClusterLabel, s.Config.Cluster = "k8s_cluster", `prod "eu"`
			s.Config.ExporterSelector, s.Config.AgentSelector = `job=~"podslo-(exporter|x)",team="a\\b"`, `job="node-agent"`
			s.Config.GrafanaURL, s.Config.RunbookURL = "https://grafana.internal/g/", "https://wiki.internal/podslo"
		},
		want: map[string][]string{
			"PodsloSandboxCreationLatencyBudgetBurn": {"k8s_cluster_runtime_class:podslo_sandbox_creation_latency_errors:ratio_rate1h", "and on (k8s_cluster, runtime_class)", `k8s_cluster: prod "eu"`, "https://grafana.internal/g/d/podslo-pod-startup?var-cluster={{ $labels.k8s_cluster | urlquery }}", "https://wiki.internal/podslo#podslosandboxcreationlatencybudgetburn"},
			"PodsloSandboxCreationStuck":             {`podslo_sandbox_creation_pending_pods{job=~"podslo-(exporter|x)",team="a\\b",user_error="false",timed_out="true"}`},
			"PodsloExporterInstanceDown":             {`up{job=~"podslo-(exporter|x)",team="a\\b"} == 0`, `k8s_cluster: prod "eu"`, "in k8s_cluster {{ $labels.k8s_cluster }} has been down"},
			"PodsloAgentDown":                        {`absent(up{job="node-agent"} == 1)`, `No target of {job="node-agent"} has been up`},
			"PodsloAgentDownOnNode":                  {`up{job="node-agent"} == 0`, `k8s_cluster: prod "eu"`},
		},
	}, {
		name: "routing labels and disabled alerts",
		values: `
monitoring:
  alertLabels: {team: platform, pager: "yes"}
  disabledAlerts: [PodsloPodWatchNotCurrent, PodsloSandboxCreationSuccessBudgetBurn, PodsloAgentDownOnNode]
`,
		spec: func(s *Spec) {
			s.Config.AlertLabels = map[string]string{"team": "platform", "pager": "yes"}
			s.Config.DisabledAlerts = []string{"PodsloPodWatchNotCurrent", "PodsloSandboxCreationSuccessBudgetBurn", "PodsloAgentDownOnNode"}
		},
		want: map[string][]string{
			"PodsloSandboxCreationLatencyBudgetBurn": {"team: platform", "pager: yes"},
			"PodsloExporterDown":                     {"team: platform"},
		},
	}, {
		name: "class thresholds",
		values: `
monitoring:
  slos:
    sandbox_creation_latency:
      classThresholds: {runtime_class: {kata: 20s, gvisor: 10s}}
    readiness_latency:
      classThresholds: {storage_class: {ebs: 1m}}
`,
		spec: func(s *Spec) {
			s.SLOs[0].Latency.ClassThresholds = map[string]map[string]string{"runtime_class": {"kata": "20s", "gvisor": "10s"}}
			s.SLOs[3].Latency.ClassThresholds = map[string]map[string]string{"storage_class": {"ebs": "1m"}}
		},
		want: map[string][]string{
			"PodsloSandboxCreationLatencyBudgetBurn": {"were slower than 5s (10s for runtime_class gvisor, 20s for runtime_class kata)"},
			"PodsloReadinessLatencyBudgetBurn":       {"slower than 30s (1m for storage_class ebs)"},
		},
	}, {
		name: "extra SLOs",
		values: `
monitoring:
  extraSLOs:
    kata_sandbox_creation_latency:
      from: sandbox_creation_latency
      alert: PodsloKataSandboxCreationLatencyBudgetBurn
      title: kata sandbox creation latency
      matchers: ['runtime_class="kata"']
      objective: 95
      threshold: 20s
    ebs_sandbox_creation_success:
      from: sandbox_creation_success
      alert: PodsloEBSSandboxCreationSuccessBudgetBurn
      title: EBS "gp3" sandbox creation success
      matchers: ['storage_class=~"ebs-.*"', 'runtime_class!="kata"']
      objective: 99
`,
		spec: func(s *Spec) {
			kata := s.SLOs[0]
			kata.Name, kata.Alert, kata.Title, kata.Runbook = "kata_sandbox_creation_latency", "PodsloKataSandboxCreationLatencyBudgetBurn", "kata sandbox creation latency", kata.Alert
			kata.Matchers = []string{`runtime_class="kata"`}
			kata.Objective, kata.Latency = 95, &Latency{Histogram: kata.Latency.Histogram, Threshold: "20s"}
			ebs := s.SLOs[1]
			ebs.Name, ebs.Alert, ebs.Title, ebs.Runbook = "ebs_sandbox_creation_success", "PodsloEBSSandboxCreationSuccessBudgetBurn", `EBS "gp3" sandbox creation success`, ebs.Alert
			ebs.Matchers = []string{`storage_class=~"ebs-.*"`, `runtime_class!="kata"`}
			ebs.Objective = 99
			s.SLOs = slices.Concat(s.SLOs[:1], []SLO{kata}, s.SLOs[1:2], []SLO{ebs}, s.SLOs[2:])
		},
		want: map[string][]string{
			"PodsloKataSandboxCreationLatencyBudgetBurn": {
				"> (14.4 * (1 - 0.95))", "kata sandbox creation latency SLO of runtime_class", "were slower than 20s",
				"docs/runbooks.md#podslosandboxcreationlatencybudgetburn",
			},
			"PodsloEBSSandboxCreationSuccessBudgetBurn": {`EBS "gp3" sandbox creation success SLO`, "> (14.4 * (1 - 0.99))"},
		},
	}, {
		name:   "no agent",
		values: "monitoring: {agentSelector: \"\"}\n",
		spec:   func(s *Spec) { s.Config.AgentSelector = "" },
		want:   map[string][]string{"PodsloExporterDown": {`absent(up{job="podslo-exporter"} == 1)`}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			values := filepath.Join(t.TempDir(), "values.yaml")
			require.NoError(t, os.WriteFile(values, []byte(tc.values), 0o644))
			rules, alerts := renderedRules(t, "-f", values)

			spec, err := Load("slos.yaml")
			require.NoError(t, err)
			// What the exporter evaluates (--slos-values): the SLOs the
			// chart's rules hold.
			fromValues, err := spec.WithValues([]byte(tc.values))
			require.NoError(t, err)
			tc.spec(spec)
			require.NoError(t, spec.Validate())
			assert.Equal(t, spec.SLOs, fromValues.SLOs, "WithValues")
			assert.Equal(t, spec.RecordingRules(), rules, "recording rules")
			assert.Equal(t, spec.Alerts(), alerts, "alerts")

			seen := map[string]string{}
			for _, g := range alerts.Groups {
				for _, r := range g.Rules {
					seen[r.Alert] += ruleText(r)
				}
			}
			for alert, wants := range tc.want {
				require.Contains(t, seen, alert)
				for _, w := range wants {
					assert.Contains(t, seen[alert], w, alert)
				}
			}
			_, agent := seen["PodsloAgentDown"]
			assert.Equal(t, spec.Config.AgentSelector != "", agent, "the agent's alerts are there with an agent selector")
			for _, a := range spec.Config.DisabledAlerts {
				assert.NotContains(t, seen, a, "disabled")
			}

			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.yaml"), rules.YAML(""), 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "alerts.yaml"), alerts.YAML(""), 0o644))
			runPromtool(t, "check", "rules", filepath.Join(dir, "rules.yaml"), filepath.Join(dir, "alerts.yaml"))
		})
	}
}

// ruleText prints a rule's expression, labels and annotations unquoted,
// one a line, for the test's substring checks.
func ruleText(r Rule) string {
	text := r.Expr + "\n"
	for _, m := range []map[string]string{r.Labels, r.Annotations} {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			text += k + ": " + m[k] + "\n"
		}
	}
	return text
}

// TestChartRejectsBadValues: each testdata/chart-invalid-*.yaml values
// file sits next to the exact message the rendering must fail with.
func TestChartRejectsBadValues(t *testing.T) {
	files, err := filepath.Glob("testdata/chart-invalid-*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			want, err := os.ReadFile(strings.TrimSuffix(f, ".yaml") + ".err")
			require.NoError(t, err, "every invalid fixture needs its .err")
			assert.Equal(t, strings.TrimSpace(string(want)), charttest.TemplateError(t, chartDir, "-f", f))
		})
	}
}
