package cmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func runSLO(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root := NewRoot(&bytes.Buffer{})
	root.SetArgs(append([]string{"slo"}, args...))
	root.SetOut(&out)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// TestSLOExport: `podslo slo export` prints the exports of the shipped
// slos.yaml, the alerts package's golden files, and those of a --slos-file.
func TestSLOExport(t *testing.T) {
	for _, format := range []string{"sloth", "openslo"} {
		t.Run(format, func(t *testing.T) {
			out, err := runSLO(t, "export", "--format", format)
			require.NoError(t, err)
			want, err := os.ReadFile(filepath.Join("..", "alerts", "testdata", "export-"+format+".yaml"))
			require.NoError(t, err)
			assert.Equal(t, string(want), out)
		})
	}

	spec, err := os.ReadFile(filepath.Join("..", "alerts", "slos.yaml"))
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "slos.yaml")
	require.NoError(t, os.WriteFile(file, []byte(strings.ReplaceAll(string(spec), "objective: 99.5", "objective: 99.2")), 0o644))
	out, err := runSLO(t, "export", "--format", "sloth", "--slos-file", file, "--service", "platform")
	require.NoError(t, err)
	assert.Contains(t, out, "service: platform\n")
	assert.Contains(t, out, "objective: 99.2\n")
	assert.NotContains(t, out, "objective: 99.5\n")
}

func TestSLOExportRejects(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"export"}, `--format "": want sloth or openslo`},
		{[]string{"export", "--format", "pyrra"}, `--format "pyrra": want sloth or openslo`},
		{[]string{"export", "--format", "openslo", "--service", "Platform"}, `service "Platform" is not an OpenSLO name`},
		{[]string{"export", "--format", "sloth", "--slos-file", "testdata/valid.yaml"}, `--slos-file: testdata/valid.yaml: json: unknown field`},
		{[]string{"export", "--format", "sloth", "extra"}, `unknown command "extra" for "podslo slo export"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, err := runSLO(t, tc.args...)
			assert.ErrorContains(t, err, tc.err)
		})
	}
}

// TestSLOExportWithValues exports an installation's SLOs: the chart's
// values add an extra SLO and change a threshold.
func TestSLOExportWithValues(t *testing.T) {
	values := filepath.Join(t.TempDir(), "values.yaml")
	require.NoError(t, os.WriteFile(values, []byte(`
monitoring:
  slos:
    termination_latency: {threshold: 2m}
  extraSLOs:
    kata_sandbox_creation_latency:
      from: sandbox_creation_latency
      alert: PodsloKataSandboxCreationLatencyBudgetBurn
      title: kata sandbox creation latency
      matchers: ['runtime_class="kata"']
      threshold: 20s
`), 0o644))
	out, err := runSLO(t, "export", "--format", "sloth", "--slos-values", values)
	require.NoError(t, err)
	assert.Contains(t, out, "name: kata_sandbox_creation_latency_by_runtime_class")
	assert.Contains(t, out, `podslo_termination_duration_seconds_bucket{job="podslo-exporter",le=~"120(\\.0)?"}`)
	_, err = runSLO(t, "export", "--format", "sloth", "--slos-values", filepath.Join(t.TempDir(), "none.yaml"))
	assert.ErrorContains(t, err, "--slos-values: open")
}
