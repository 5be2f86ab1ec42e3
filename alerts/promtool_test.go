package alerts

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// promtool finds the promtool binary: $PROMTOOL, else the PATH. CI must
// run these tests, so a missing promtool fails there; locally too, unless
// -short asks to skip what needs outside tools.
func promtool(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PROMTOOL"); p != "" {
		return p
	}
	p, err := exec.LookPath("promtool")
	if err == nil {
		return p
	}
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("promtool not found; install it (apt-get install prometheus) or set PROMTOOL")
	}
	t.Fatal("promtool not found: install it (Debian: apt-get install prometheus) or set PROMTOOL to its path")
	return ""
}

func runPromtool(t *testing.T, args ...string) {
	t.Helper()
	out, err := exec.Command(promtool(t), args...).CombinedOutput()
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
