package collectors

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/store"
)

func TestFamilyFilterRefusesWhatWouldDropNothingOrEverything(t *testing.T) {
	f, err := NewFamilyFilter(nil, nil)
	require.NoError(t, err)
	assert.Nil(t, f)
	assert.True(t, f.Keep("podslo_pod_readiness_seconds"), "nil keeps everything")

	for _, tc := range []struct {
		allow, deny []string
		want        string
	}{
		{[]string{"podslo_.*"}, []string{"go_.*"}, "--metric-allowlist and --metric-denylist are exclusive"},
		{nil, []string{"podslo_pod_(.*"}, `--metric-denylist: "podslo_pod_(.*": error parsing regexp`},
		// A name 0.2.0 renamed: it would drop nothing.
		{nil, []string{"podslo_pod_readiness_duration_seconds"}, `--metric-denylist: "podslo_pod_readiness_duration_seconds" matches no family podslo exports`},
		{[]string{"podslo_sandbox_creation_duration_second"}, nil, `--metric-allowlist: "podslo_sandbox_creation_duration_second" matches no family`},
	} {
		_, err := NewFamilyFilter(tc.allow, tc.deny)
		require.Error(t, err, "%v %v", tc.allow, tc.deny)
		assert.Contains(t, err.Error(), tc.want)
	}
	// Other collectors' families are not podslo's to check.
	_, err = NewFamilyFilter(nil, []string{"go_.*", "process_.*"})
	require.NoError(t, err)
}

// A denylist drops the families it matches, per-pod ones included, and
// nothing else; an allowlist keeps only its own.
func TestHandlerServesOnlyTheKeptFamilies(t *testing.T) {
	s := newStore(t)
	require.NoError(t, s.Apply(store.Change{
		UID: "u1", Meta: &store.PodMeta{Namespace: "ns", Name: "web", Node: "n1", RuntimeClass: "runc", StorageClass: "none"},
		State:   lifecycle.State{Scheduled: 98, FirstSandboxReady: 100, LastSandboxReady: 100, SandboxCreationMs: 2000, HasSandboxCreation: true},
		Observe: []store.Sample{{Family: "sandbox_creation", Labels: []string{"runc", "none"}, Value: 2}},
	}))
	families := func(allow, deny []string) []string {
		f, err := NewFamilyFilter(allow, deny)
		require.NoError(t, err)
		reg := prometheus.NewRegistry()
		reg.MustRegister(NewSLIs(s, Labels{}, discard))
		var names []string
		for _, line := range strings.Split(scrapeBody(t, Handler(reg, NewPerPod(s, Labels{}, f), f, discard), false), "\n") {
			if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
				names = append(names, strings.Fields(name)[0])
			}
		}
		return names
	}
	all := families(nil, nil)
	require.Contains(t, all, "podslo_pod_sandbox_creation_seconds")
	require.Contains(t, all, "podslo_sandbox_creation_duration_seconds")
	require.Contains(t, all, "promhttp_metric_handler_requests_total")

	denied := families(nil, []string{"podslo_pod_.*", "promhttp_.*"})
	for _, name := range all {
		kept := !strings.HasPrefix(name, "podslo_pod_") && !strings.HasPrefix(name, "promhttp_")
		assert.Equal(t, kept, contains(denied, name), name)
	}
	assert.Equal(t, []string{"podslo_sandbox_creation_duration_seconds", "podslo_pod_sandbox_creation_seconds"},
		families([]string{"podslo_sandbox_creation_duration_seconds", "podslo_pod_sandbox_creation_seconds"}, nil))
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
