package charts

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v2"
)

// releaseVersion is the VERSION file: the version `make build` and `make
// image` stamp into the binary and the image tag, and `make release` into
// every artifact.
func releaseVersion(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(Root(), "VERSION"))
	require.NoError(t, err)
	v := strings.TrimSpace(string(b))
	require.Regexp(t, `^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`, v, "VERSION is a semantic version without a v")
	return v
}

// TestVersionsAgree: the chart's version and appVersion are VERSION, so
// that the packaged chart, the image it runs by default (appVersion is its
// tag: TestDefaults) and the binary name one release; CHANGELOG.md has
// that release's section, which `make release` ships.
func TestVersionsAgree(t *testing.T) {
	version := releaseVersion(t)
	raw, err := os.ReadFile(filepath.Join(ChartDir(), "Chart.yaml"))
	require.NoError(t, err)
	var chart struct {
		Version    string `yaml:"version"`
		AppVersion string `yaml:"appVersion"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &chart))
	assert.Equal(t, version, chart.Version, "Chart.yaml's version against VERSION")
	assert.Equal(t, version, chart.AppVersion, "Chart.yaml's appVersion against VERSION")

	changelog, err := os.ReadFile(filepath.Join(Root(), "CHANGELOG.md"))
	require.NoError(t, err)
	assert.True(t, regexp.MustCompile(`(?m)^## `+regexp.QuoteMeta(version)+`$`).Match(changelog),
		"CHANGELOG.md has no section \"## %s\"", version)
}
