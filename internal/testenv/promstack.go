package testenv

import (
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

//go:embed promstack.txt
var promstackVersions string

// PromstackVersions is the version of each part of the monitoring stack
// the tests run on (promstack.txt), by name: prometheus, alertmanager,
// prometheus-operator.
func PromstackVersions() (map[string]string, error) {
	return ParsePins("internal/testenv/promstack.txt", promstackVersions, "prometheus", "alertmanager", "prometheus-operator")
}

// ParsePins reads a pin file of lines "name module version" ('#' starts a
// comment line) into the version of each name, and fails, naming file,
// on a malformed line or a missing name of names.
func ParsePins(file, text string, names ...string) (map[string]string, error) {
	v := map[string]string{}
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("%s line %d: want name, module and version, got %q", file, i+1, line)
		}
		v[f[0]] = f[2]
	}
	for _, name := range names {
		if v[name] == "" {
			return nil, fmt.Errorf("%s: no version for %s", file, name)
		}
	}
	return v, nil
}

// promstackBinary is where `make promstackbin` put one binary of part:
// $PODSLO_PROMSTACKBIN (which the Makefile exports) or the user cache
// directory, then <part>-<version>/<binary>.
func promstackBinary(part, binary string) (string, error) {
	v, err := PromstackVersions()
	if err != nil {
		return "", err
	}
	dir := os.Getenv("PODSLO_PROMSTACKBIN")
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(cache, "podslo", "promstack")
	}
	path := filepath.Join(dir, part+"-"+v[part], binary)
	if _, err := os.Stat(path); err != nil {
		return "", fmt.Errorf("%s %s missing (run `make promstackbin`): %w", binary, v[part], err)
	}
	return path, nil
}

// findPromstack fails the test when the binary is missing: CI must run the
// tests that need it. Only -short outside CI skips them.
func findPromstack(t testing.TB, part, binary string) string {
	t.Helper()
	path, err := promstackBinary(part, binary)
	if err == nil {
		return path
	}
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip(err.Error())
	}
	t.Fatal(err)
	return ""
}

// Promtool is $PROMTOOL, else the promtool of the Prometheus that `make
// promstackbin` built. A distribution's older promtool in $PATH is never
// used: the rules are checked by the Prometheus that runs them.
func Promtool(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("PROMTOOL"); p != "" {
		return p
	}
	return findPromstack(t, "prometheus", "promtool")
}

// Prometheus is the Prometheus server `make promstackbin` built.
func Prometheus(t testing.TB) string {
	t.Helper()
	return findPromstack(t, "prometheus", "prometheus")
}

// Amtool is the amtool of the Alertmanager `make promstackbin` built.
func Amtool(t testing.TB) string {
	t.Helper()
	return findPromstack(t, "alertmanager", "amtool")
}

// Alertmanager is the Alertmanager server `make promstackbin` built.
func Alertmanager(t testing.TB) string {
	t.Helper()
	return findPromstack(t, "alertmanager", "alertmanager")
}

// PrometheusOperator is the Prometheus Operator `make promstackbin` built.
func PrometheusOperator(t testing.TB) string {
	t.Helper()
	return findPromstack(t, "prometheus-operator", "operator")
}

// PrometheusRelease is the release of the Prometheus the tests run, as its
// VERSION file and the Operator's spec.version say it: module v0.316.0 is
// release v3.16.0.
func PrometheusRelease() (string, error) {
	v, err := PromstackVersions()
	if err != nil {
		return "", err
	}
	var minor, patch int
	if _, err := fmt.Sscanf(v["prometheus"], "v0.%d.%d", &minor, &patch); err != nil || minor < 300 {
		return "", fmt.Errorf("prometheus module version %q is not v0.3xx.y", v["prometheus"])
	}
	return fmt.Sprintf("v%d.%d.%d", minor/100, minor%100, patch), nil
}
