package testenv

import (
	"strings"
	"testing"
)

// A pin file's malformed line or missing name is refused, naming the file;
// comments and blank lines are skipped.
func TestParsePins(t *testing.T) {
	v, err := ParsePins("pins.txt", "# a comment\n\nprometheus github.com/prometheus/prometheus v0.316.0\n", "prometheus")
	if err != nil || v["prometheus"] != "v0.316.0" {
		t.Fatalf("ParsePins = %v, %v", v, err)
	}
	for text, want := range map[string]string{
		"prometheus v0.316.0\n": `pins.txt line 1: want name, module and version, got "prometheus v0.316.0"`,
		"# nothing\n":           "pins.txt: no version for prometheus",
	} {
		if _, err := ParsePins("pins.txt", text, "prometheus"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParsePins(%q) = %v, want an error with %q", text, err, want)
		}
	}
	// The shipped pins name a Prometheus 3 (module v0.3xx).
	pins, err := PromstackVersions()
	if err != nil || !strings.HasPrefix(pins["prometheus"], "v0.3") {
		t.Errorf("PromstackVersions = %v, %v", pins, err)
	}
}

func TestPrometheusRelease(t *testing.T) {
	r, err := PrometheusRelease()
	if err != nil {
		t.Fatal(err)
	}
	pins, err := PromstackVersions()
	if err != nil {
		t.Fatal(err)
	}
	// v0.316.0 is v3.16.0: the module's minor is the release's major and
	// minor.
	if want := "v3." + strings.TrimPrefix(strings.TrimPrefix(pins["prometheus"], "v0.3"), "0"); r != want {
		t.Errorf("PrometheusRelease() = %q for module %s, want %q", r, pins["prometheus"], want)
	}
}
