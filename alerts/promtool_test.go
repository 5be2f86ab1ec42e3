package alerts

import (
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
