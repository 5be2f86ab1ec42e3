package alerts

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/podslo/podslo/internal/testenv"
)

func runPromtool(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(testenv.Promtool(t), args...).CombinedOutput()
	require.NoError(t, err, "promtool %v:\n%s", args, out)
}

func TestPromtoolCheckRules(t *testing.T) {
	runPromtool(t, "check", "rules", "prometheus_rules.yaml", "prometheus_alerts.yaml")
}

// TestPromtoolUnitTests runs the rule unit tests of tests/, one promtool per
// file so that they run side by side.
func TestPromtoolUnitTests(t *testing.T) {
	files, err := filepath.Glob("tests/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			t.Parallel()
			runPromtool(t, "test", "rules", f)
		})
	}
}

// TestClassThresholds evaluates the rules of a kata class with a threshold
// of its own, 20s, on sandboxes that all take between 5s and 20s: with the
// override they are good, in both groupings; with the SLO's 5s alone, kata
// burns its budget and pages. runc's sandboxes are within 5s.
func TestClassThresholds(t *testing.T) {
	const series = `
      - series: podslo_sandbox_creation_duration_seconds_count{cluster="prod",job="podslo-exporter",runtime_class="runc",storage_class="none"}
        values: 0+100x60
      - series: podslo_sandbox_creation_duration_seconds_bucket{cluster="prod",job="podslo-exporter",runtime_class="runc",storage_class="none",le="5"}
        values: 0+100x60
      - series: podslo_sandbox_creation_duration_seconds_bucket{cluster="prod",job="podslo-exporter",runtime_class="runc",storage_class="none",le="20"}
        values: 0+100x60
      - series: podslo_sandbox_creation_duration_seconds_count{cluster="prod",job="podslo-exporter",runtime_class="kata",storage_class="none"}
        values: 0+4x60
      - series: podslo_sandbox_creation_duration_seconds_bucket{cluster="prod",job="podslo-exporter",runtime_class="kata",storage_class="none",le="5"}
        values: 0+0x60
      - series: podslo_sandbox_creation_duration_seconds_bucket{cluster="prod",job="podslo-exporter",runtime_class="kata",storage_class="none",le="20"}
        values: 0+4x60`
	for _, tc := range []struct {
		name       string
		thresholds map[string]map[string]string
		// kata and none are the 5m error ratios of runtime_class kata and
		// storage_class none; pages, whether kata pages.
		kata, none string
		pages      bool
	}{
		{"kata within its own 20s", map[string]map[string]string{"runtime_class": {"kata": "20s"}}, "0", "0", false},
		{"kata held to 5s", nil, "1", "0.038461538461538464", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := Load("slos.yaml")
			require.NoError(t, err)
			spec.SLOs[0].Latency.ClassThresholds = tc.thresholds
			require.NoError(t, spec.Validate())
			dir := t.TempDir()
			rules, alerts := Generate(spec, "a test")
			require.NoError(t, os.WriteFile(filepath.Join(dir, "rules.yaml"), rules, 0o644))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "alerts.yaml"), alerts, 0o644))
			page := "[]"
			if tc.pages {
				page = `
          - exp_labels: {severity: critical, long: 1h, short: 5m, cluster: prod, runtime_class: kata}
            exp_annotations:
              summary: Sandbox creation latency SLO of runtime_class kata burns its error budget 14.4 times too fast.
              description: 100% of sandbox creations of runtime_class kata in cluster prod were slower than 5s over the last 1h, and more than 14.4% over the last 5m too. The objective, 99% per 30d, allows 1%; at 14.4 times that rate the error budget is gone in 2d2h.
              runbook_url: https://github.com/podslo/podslo/blob/main/docs/runbooks.md#podslosandboxcreationlatencybudgetburn
              dashboard_url: https://grafana.example.com/d/podslo-pod-startup?var-cluster=prod&var-runtime_class=kata`
			}
			test := fmt.Sprintf(`rule_files: [rules.yaml, alerts.yaml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:%s
    promql_expr_test:
      - expr: cluster_runtime_class:podslo_sandbox_creation_latency_errors:ratio_rate5m{runtime_class="kata"}
        eval_time: 30m
        exp_samples:
          - labels: cluster_runtime_class:podslo_sandbox_creation_latency_errors:ratio_rate5m{cluster="prod",runtime_class="kata"}
            value: %s
      - expr: cluster_storage_class:podslo_sandbox_creation_latency_errors:ratio_rate5m
        eval_time: 30m
        exp_samples:
          - labels: cluster_storage_class:podslo_sandbox_creation_latency_errors:ratio_rate5m{cluster="prod",storage_class="none"}
            value: %s
    alert_rule_test:
      # After the 14.4x page's 2m, before the 6x page's 15m.
      - eval_time: 10m
        alertname: PodsloSandboxCreationLatencyBudgetBurn
        exp_alerts: %s
`, series, tc.kata, tc.none, page)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "test.yaml"), []byte(test), 0o644))
			runPromtool(t, "test", "rules", filepath.Join(dir, "test.yaml"))
		})
	}
}
