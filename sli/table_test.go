package sli

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podslo/podslo/lifecycle"
)

// forKind returns the aggregates an observation of kind k feeds, in the
// order the pipeline writes them.
func forKind(k lifecycle.Kind) []*AggregateSpec {
	var out []*AggregateSpec
	for _, a := range Aggregates() {
		if a.Kind == k {
			out = append(out, a)
		}
	}
	return out
}

// TestForKind pins which store families each observation kind feeds, and
// how: a histogram observes the latency, a counter counts one.
func TestForKind(t *testing.T) {
	for _, tc := range []struct {
		kind lifecycle.Kind
		want []string
	}{
		{lifecycle.SandboxCreated, []string{"sandbox_creation histogram"}},
		{lifecycle.SandboxRecreated, []string{"sandbox_recreations counter"}},
		{lifecycle.SandboxTimedOut, []string{"sandbox_creation_timeouts counter"}},
		{lifecycle.SandboxExcluded, []string{"sandbox_creations_excluded counter"}},
		{lifecycle.Terminated, []string{"termination histogram", "terminations_over_grace counter"}},
		{lifecycle.BecameReady, []string{"readiness histogram"}},
		{lifecycle.PhaseDone, []string{"startup_phase histogram"}},
		{lifecycle.Stabilized, []string{"stabilization histogram"}},
		{lifecycle.StabilityLost, []string{"stable_transitions counter"}},
	} {
		var got []string
		for _, a := range forKind(tc.kind) {
			got = append(got, a.Store+" "+a.Type.String())
		}
		assert.Equal(t, tc.want, got, "kind %d", tc.kind)
	}
}

func TestDerivedFamilies(t *testing.T) {
	phase := forKind(lifecycle.PhaseDone)[0]
	assert.Equal(t, []string{"runtime_class", "storage_class", "phase"}, phase.MetricFamily().Labels)
	assert.True(t, phase.MetricFamily().HistogramLabels)
	assert.Equal(t, "init", phase.LabelValue(lifecycle.Observation{Kind: lifecycle.PhaseDone, Phase: lifecycle.PhaseInit}))
	over := forKind(lifecycle.Terminated)[1]
	assert.True(t, over.When(lifecycle.Observation{OverGrace: true}))
	assert.False(t, over.When(lifecycle.Observation{}))
	assert.Equal(t, "startup_phase{tier,team}", phase.ID([]string{"tier", "team"}))
	assert.Equal(t, "startup_phase", phase.ID(nil))

	pod := PerPod()[0]
	assert.Equal(t, PodSeriesLabels, pod.MetricFamily().Labels)
	assert.True(t, pod.MetricFamily().PodLabels)
	assert.Len(t, Families(), len(Aggregates())+len(PerPod()))
}

func TestMustByStore(t *testing.T) {
	assert.Equal(t, "podslo_sandbox_recreations_total", MustByStore("sandbox_recreations").Name)
	assert.PanicsWithValue(t, `sli: no aggregate has store family "nope"`, func() { MustByStore("nope") })
}

func TestDeriveRejects(t *testing.T) {
	value := func(*lifecycle.State, int64) (float64, bool) { return 0, false }
	for name, tc := range map[string]struct {
		table []SLI
		err   string
	}{
		"gauge aggregate": {
			[]SLI{{Aggregates: []*AggregateSpec{{Store: "a", Name: "podslo_a", Type: Gauge, Stability: Alpha}}}},
			"podslo_a: an aggregate is a histogram or a counter, not a gauge",
		},
		"no stability": {
			[]SLI{{Aggregates: []*AggregateSpec{{Store: "a", Name: "podslo_a", Type: Counter}}}},
			"podslo_a: no stability level",
		},
		"label without value": {
			[]SLI{{Aggregates: []*AggregateSpec{{Store: "a", Name: "podslo_a", Type: Counter, Stability: Alpha, Label: "reason"}}}},
			"podslo_a: Label and LabelValue go together",
		},
		"counter label without its values": {
			[]SLI{{Aggregates: []*AggregateSpec{{Store: "a", Name: "podslo_a", Type: Counter, Stability: Alpha, Label: "reason", LabelValue: func(lifecycle.Observation) string { return "r" }}}}},
			"podslo_a: a counter with a Label lists its LabelDomain",
		},
		"store family twice": {
			[]SLI{{Aggregates: []*AggregateSpec{
				{Store: "a", Name: "podslo_a", Type: Counter, Stability: Alpha},
				{Store: "a", Name: "podslo_b", Type: Counter, Stability: Alpha},
			}}},
			`podslo_b: store family "a" is empty or used twice`,
		},
		"store family of the skips": {
			[]SLI{{Aggregates: []*AggregateSpec{{Store: FamilySkipped, Name: "podslo_a", Type: Counter, Stability: Alpha}}}},
			`podslo_a: store family "skipped" is empty or used twice`,
		},
		"name twice": {
			[]SLI{{
				Aggregates: []*AggregateSpec{{Store: "a", Name: "podslo_a", Type: Counter, Stability: Alpha}},
				PerPod:     []*PodSeries{{Name: "podslo_a", Type: Gauge, Stability: Alpha, Value: value}},
			}},
			"podslo_a: declared twice",
		},
		"histogram per pod": {
			[]SLI{{PerPod: []*PodSeries{{Name: "podslo_p", Type: Histogram, Stability: Alpha, Value: value}}}},
			"podslo_p: a per-pod series is a gauge or a counter, not a histogram",
		},
		"per pod without value": {
			[]SLI{{PerPod: []*PodSeries{{Name: "podslo_p", Type: Gauge, Stability: Alpha}}}},
			"podslo_p: no Value",
		},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := derive(tc.table)
			require.Error(t, err)
			assert.Equal(t, "sli table: "+tc.err, err.Error())
		})
	}
}

func TestTypedStrings(t *testing.T) {
	assert.Equal(t, []string{"counter", "gauge", "histogram"}, []string{Counter.String(), Gauge.String(), Histogram.String()})
	assert.Equal(t, []string{"ALPHA", "STABLE"}, []string{Alpha.String(), Stable.String()})
}
