package collectors

import (
	"maps"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/version"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestBuildInfo: podslo_build_info carries what the release build stamps into
// prometheus/common/version, and its declaration (hence docs/metrics.md)
// names exactly the labels client_golang's version collector emits.
func TestBuildInfo(t *testing.T) {
	saved := []string{version.Version, version.Revision, version.Branch}
	t.Cleanup(func() { version.Version, version.Revision, version.Branch = saved[0], saved[1], saved[2] })
	version.Version, version.Revision, version.Branch = "0.1.0", "0123abcd", "main"

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewBuildInfo())
	fams, err := reg.Gather()
	require.NoError(t, err)
	require.Len(t, fams, 1)
	f := fams[0]
	assert.Equal(t, buildInfo.Name, f.GetName())
	assert.Equal(t, buildInfo.Help, f.GetHelp())
	assert.Equal(t, buildInfo.Type.String(), strings.ToLower(f.GetType().String()))
	require.Len(t, f.GetMetric(), 1)
	m := f.GetMetric()[0]
	assert.Equal(t, 1.0, m.GetGauge().GetValue())
	got := map[string]string{}
	for _, l := range m.GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	names := slices.Sorted(maps.Keys(got))
	assert.Equal(t, slices.Sorted(slices.Values(buildInfo.Labels)), names)
	assert.Equal(t, "0.1.0", got["version"])
	assert.Equal(t, "0123abcd", got["revision"])
	assert.Equal(t, "main", got["branch"])
	assert.Equal(t, runtime.Version(), got["goversion"])
}
