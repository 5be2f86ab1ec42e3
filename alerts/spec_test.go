package alerts

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podslo/podslo/store"
)

func TestShippedSpec(t *testing.T) {
	spec, err := Load("slos.yaml")
	require.NoError(t, err)
	var names []string
	for _, slo := range spec.SLOs {
		names = append(names, slo.Name)
		if len(slo.Matchers) == 0 {
			assert.Equal(t, []string{"runtime_class", "storage_class"}, slo.GroupBy, slo.Name)
		}
		assert.Equal(t, 30*24*time.Hour, slo.WindowDuration(), slo.Name)
	}
	assert.Equal(t, []string{"sandbox_creation_latency", "sandbox_creation_success", "termination_latency", "readiness_latency", "runc_sandbox_creation_latency", "pod_startup_latency"}, names)
	// The sub-second objective holds for stateless pods of the default
	// runtime handler: no RuntimeClass (every pod on a managed cluster's
	// defaults), or one named runc.
	runc := spec.SLOs[4]
	assert.Equal(t, []string{"runtime_class"}, runc.GroupBy)
	assert.Equal(t, []string{`runtime_class=~"none|runc"`, `storage_class="none"`}, runc.Matchers)
	assert.Equal(t, 500*time.Millisecond, runc.Latency.ThresholdDuration())
	assert.Equal(t, 5*time.Second, spec.SLOs[0].Latency.ThresholdDuration())
}

// TestInvalidSpecs: each testdata/invalid-*.yaml sits next to the exact
// error it must produce, in invalid-*.err.
func TestInvalidSpecs(t *testing.T) {
	files, err := filepath.Glob("testdata/invalid-*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			want, err := os.ReadFile(strings.TrimSuffix(f, ".yaml") + ".err")
			require.NoError(t, err, "every invalid fixture needs its .err")
			raw, err := os.ReadFile(f)
			require.NoError(t, err)
			_, err = Parse(raw)
			require.Error(t, err)
			assert.Equal(t, strings.TrimSpace(string(want)), err.Error())
		})
	}
}

// The thresholds are checked against this list, so it must be the one the
// exporter's histograms really have.
func TestBucketsAreTheExportersBuckets(t *testing.T) {
	assert.Equal(t, store.Buckets, Buckets)
}

func TestBurnFactorsOf30Days(t *testing.T) {
	var got []float64
	for _, w := range BurnWindows {
		got = append(got, w.Factor(30*24*time.Hour))
	}
	assert.Equal(t, []float64{14.4, 6, 3, 1}, got)
	assert.Equal(t, []time.Duration{5 * time.Minute, 30 * time.Minute, time.Hour, 2 * time.Hour, 6 * time.Hour, 24 * time.Hour, 72 * time.Hour}, RatioWindows())
}

func TestLeMatcher(t *testing.T) {
	for seconds, want := range map[float64]string{
		5:    `le=~"5(\\.0)?"`,
		0.5:  `le=~"0\\.5"`,
		60:   `le=~"60(\\.0)?"`,
		3600: `le=~"3600(\\.0)?"`,
	} {
		assert.Equal(t, want, LeMatcher(seconds), seconds)
	}
}
