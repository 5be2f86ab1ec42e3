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

// TestLicenseEverywhere: the repository is Apache-2.0 (LICENSE), and every
// artifact that names its license says so: the chart's ArtifactHub
// annotation, the image label make image writes (IMAGE_LICENSES) and the
// Dockerfile's.
func TestLicenseEverywhere(t *testing.T) {
	license, err := os.ReadFile(filepath.Join(Root(), "LICENSE"))
	require.NoError(t, err)
	assert.Regexp(t, `^\s*Apache License\s+Version 2\.0, January 2004\s`, string(license))

	raw, err := os.ReadFile(filepath.Join(ChartDir(), "Chart.yaml"))
	require.NoError(t, err)
	var chart struct {
		Annotations map[string]string `yaml:"annotations"`
		Maintainers []struct {
			Name string `yaml:"name"`
		} `yaml:"maintainers"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &chart))
	assert.Equal(t, "Apache-2.0", chart.Annotations["artifacthub.io/license"])
	assert.NotEmpty(t, chart.Maintainers, "Chart.yaml names its maintainers")

	makefile, err := os.ReadFile(filepath.Join(Root(), "Makefile"))
	require.NoError(t, err)
	assert.Regexp(t, `(?m)^IMAGE_LICENSES \?= Apache-2\.0$`, string(makefile))
	dockerfile, err := os.ReadFile(filepath.Join(Root(), "Dockerfile"))
	require.NoError(t, err)
	assert.Regexp(t, `org\.opencontainers\.image\.licenses=Apache-2\.0\b`, string(dockerfile))
}
