package sli

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podslo/podslo/lifecycle"
)

func TestParseHistogramLabels(t *testing.T) {
	for _, tc := range []struct {
		specs []string
		want  HistogramLabels
		err   string
	}{
		{nil, HistogramLabels{}, ""},
		{[]string{"team=label:team", "tier=annotation:example.com/tier"},
			HistogramLabels{{Name: "team", Source: FromLabel, Key: "team"}, {Name: "tier", Source: FromAnnotation, Key: "example.com/tier"}}, ""},
		{[]string{"team"}, nil, `--histogram-label "team": want NAME=label:KEY, NAME=annotation:KEY, NAME=node-label:KEY or NAME=owner-kind`},
		{[]string{"team=label:"}, nil, `--histogram-label "team=label:": want NAME=label:KEY, NAME=annotation:KEY, NAME=node-label:KEY or NAME=owner-kind`},
		{[]string{"=label:team"}, nil, `--histogram-label "=label:team": want NAME=label:KEY, NAME=annotation:KEY, NAME=node-label:KEY or NAME=owner-kind`},
		{[]string{"team=field:team"}, nil, `--histogram-label: histogram label "team": source must be "label", "annotation", "node-label" or "owner-kind", got "field"`},
		{[]string{"zone=node-label:topology.kubernetes.io/zone", "kind=owner-kind"},
			HistogramLabels{{Name: "zone", Source: FromNodeLabel, Key: "topology.kubernetes.io/zone"}, {Name: "kind", Source: FromOwnerKind}}, ""},
		{[]string{"zone=node-label:"}, nil, `--histogram-label "zone=node-label:": want NAME=label:KEY, NAME=annotation:KEY, NAME=node-label:KEY or NAME=owner-kind`},
		{[]string{"kind=owner-kind:x"}, nil, `--histogram-label: histogram label "kind": owner-kind takes no key, got "x"`},
		{[]string{"=owner-kind"}, nil, `--histogram-label "=owner-kind": want NAME=label:KEY, NAME=annotation:KEY, NAME=node-label:KEY or NAME=owner-kind`},
		{[]string{"kind=owner-kind", "kind=node-label:k"}, nil, `--histogram-label: histogram label name "kind" is used twice or clashes with a built-in label`},
		{[]string{"a=label:x", "a=annotation:y"}, nil, `--histogram-label: histogram label name "a" is used twice or clashes with a built-in label`},
		// Every built-in label of an aggregated family, not only the class
		// labels: a second "phase" would make the descriptor invalid.
		{[]string{"phase=label:phase"}, nil, `--histogram-label: histogram label name "phase" is used twice or clashes with a built-in label`},
		{[]string{"reason=label:x"}, nil, `--histogram-label: histogram label name "reason" is used twice or clashes with a built-in label`},
		{[]string{"storage_class=label:x"}, nil, `--histogram-label: histogram label name "storage_class" is used twice or clashes with a built-in label`},
	} {
		got, err := ParseHistogramLabels(tc.specs)
		if tc.err != "" {
			assert.EqualError(t, err, tc.err, "%q", tc.specs)
			continue
		}
		require.NoError(t, err, "%q", tc.specs)
		assert.Equal(t, tc.want, got, "%q", tc.specs)
	}
}

func TestHistogramLabelsNamesKeysValues(t *testing.T) {
	h := HistogramLabels{{Name: "team", Source: FromLabel, Key: "t"}, {Name: "tier", Source: FromAnnotation, Key: "a/tier"}, {Name: "app", Source: FromLabel, Key: "app"}}
	assert.Equal(t, []string{"team", "tier", "app"}, h.Names())
	labels, annotations := h.Keys()
	assert.Equal(t, []string{"t", "app"}, labels)
	assert.Equal(t, []string{"a/tier"}, annotations)
	assert.Equal(t, []string{"pay", "gold", ""}, h.Values(podWith(map[string]string{"t": "pay", "tier": "no"}, map[string]string{"a/tier": "gold", "t": "no"})), "a missing key is the empty value")
	assert.Nil(t, HistogramLabels(nil).Names())
	assert.Nil(t, HistogramLabels(nil).Values(podWith(map[string]string{"t": "x"}, nil)))
	assert.Nil(t, h.NodeLabelKeys(), "no node label: no Node watch")
	assert.False(t, h.OwnerKind(), "no owner-kind: no ReplicaSet or Job watch")
}

func podWith(labels, annotations map[string]string) *lifecycle.Pod {
	return &lifecycle.Pod{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations}}
}

// TestNodeAndOwnerLabels: node-label values come from the pod's resolved
// node labels, never from its own labels of the same key; owner-kind from
// its resolved owner kind; and each asks for its watch.
func TestNodeAndOwnerLabels(t *testing.T) {
	h := HistogramLabels{
		{Name: "zone", Source: FromNodeLabel, Key: "topology.kubernetes.io/zone"},
		{Name: "team", Source: FromLabel, Key: "team"},
		{Name: "kind", Source: FromOwnerKind},
		{Name: "pool", Source: FromNodeLabel, Key: "pool"},
	}
	labels, annotations := h.Keys()
	assert.Equal(t, []string{"team"}, labels, "the pod trim keeps no node label key")
	assert.Nil(t, annotations)
	assert.Equal(t, []string{"topology.kubernetes.io/zone", "pool"}, h.NodeLabelKeys())
	assert.True(t, h.OwnerKind())
	pod := podWith(map[string]string{"team": "pay", "topology.kubernetes.io/zone": "pod's own", "pool": "pod's own"}, nil)
	pod.NodeLabels = map[string]string{"topology.kubernetes.io/zone": "eu-1a", "team": "node's"}
	pod.OwnerKind = "Deployment"
	assert.Equal(t, []string{"eu-1a", "pay", "Deployment", ""}, h.Values(pod), "a node without the label: empty")
	pod.NodeLabels = nil
	assert.Equal(t, []string{"", "pay", "Deployment", ""}, h.Values(pod), "an unknown node: empty")
}

// TestLabelNamesMatchValues pins the positional contract between what the
// pipeline writes (LabelValues) and what the collectors declare
// (LabelNames), for every aggregate of the table.
func TestLabelNamesMatchValues(t *testing.T) {
	h := HistogramLabels{{Name: "team", Source: FromLabel, Key: "team"}, {Name: "tier", Source: FromLabel, Key: "tier"}}
	values := h.Values(podWith(map[string]string{"team": "pay", "tier": "gold"}, nil))
	o := lifecycle.Observation{Kind: lifecycle.PhaseDone, Phase: lifecycle.PhaseInit}
	for _, a := range Aggregates() {
		names := a.MetricFamily().LabelNames(h.Names(), []string{"label_app"})
		got := a.LabelValues("kata", "ssd", o, values)
		require.Len(t, got, len(names), a.Name)
		byName := map[string]string{}
		for i, n := range names {
			byName[n] = got[i]
		}
		assert.Equal(t, "kata", byName["runtime_class"], a.Name)
		assert.Equal(t, "ssd", byName["storage_class"], a.Name)
		assert.Equal(t, "pay", byName["team"], a.Name)
		assert.Equal(t, "gold", byName["tier"], a.Name)
		if a.Label != "" {
			assert.Equal(t, a.LabelValue(o), byName[a.Label], a.Name)
		}
		assert.NotContains(t, names, "label_app", "aggregates carry no pod labels")
	}
	phase := forKind(lifecycle.PhaseDone)[0]
	assert.Equal(t, []string{"runtime_class", "storage_class", "phase", "team", "tier"}, phase.MetricFamily().LabelNames(h.Names(), nil))
	assert.Equal(t, []string{"kata", "ssd", "init", "pay", "gold"}, phase.LabelValues("kata", "ssd", o, values))
	pod := PerPod()[0]
	assert.Equal(t, append(append([]string(nil), PodSeriesLabels...), "label_app"), pod.MetricFamily().LabelNames(h.Names(), []string{"label_app"}), "per-pod series carry no histogram labels")
}

// TestLabelValuesRoundTrip: what the collectors read back of a series
// (ParseLabelValues) is what AppendLabelValues wrote, for every aggregate,
// and a series written under another number of histogram labels is
// refused.
func TestLabelValuesRoundTrip(t *testing.T) {
	for _, a := range Aggregates() {
		for _, histogram := range [][]string{nil, {"pay"}, {"pay", "gold"}} {
			values := a.AppendLabelValues(nil, "kata", "ssd", "extra", histogram)
			names := a.MetricFamily().LabelNames(make([]string, len(histogram)), nil)
			require.Len(t, values, len(names), a.Name)
			if a.Label != "" {
				assert.Equal(t, "extra", values[slices.Index(names, a.Label)], a.Name)
			} else {
				assert.NotContains(t, values, "extra", "%s has no extra label", a.Name)
			}
			runtimeClass, storageClass, got, ok := a.ParseLabelValues(values, len(histogram))
			require.True(t, ok, a.Name)
			assert.Equal(t, "kata", runtimeClass, a.Name)
			assert.Equal(t, "ssd", storageClass, a.Name)
			assert.Equal(t, append([]string{}, histogram...), append([]string{}, got...), a.Name)
			_, _, _, ok = a.ParseLabelValues(values, len(histogram)+1)
			assert.False(t, ok, "%s: a series of another histogram label set", a.Name)
		}
	}
}

// TestPodAndSkipLabelValues: the per-pod, skip and precision label values
// land under the label names the families declare.
func TestPodAndSkipLabelValues(t *testing.T) {
	names := PerPod()[0].MetricFamily().LabelNames(nil, []string{"label_app"})
	values := AppendPodLabelValues(nil, "ns", "web-1", "u1", "node-a", "kata", "ssd", []string{"web"})
	require.Len(t, values, len(names))
	byName := map[string]string{}
	for i, n := range names {
		byName[n] = values[i]
	}
	assert.Equal(t, map[string]string{"namespace": "ns", "pod": "web-1", "uid": "u1", "node": "node-a", "runtime_class": "kata", "storage_class": "ssd", "label_app": "web"}, byName)

	skip := lifecycle.Skip{SLI: lifecycle.Readiness, Reason: lifecycle.TooOld}
	assert.Equal(t, []string{"sli", "reason"}, Skipped.Labels)
	assert.Equal(t, []string{"readiness", "too_old"}, SkipLabelValues(skip))
	assert.Equal(t, []string{"sli", "precision"}, Observations.Labels)
	assert.Equal(t, []string{"readiness", "millisecond"}, PrecisionLabelValues(lifecycle.Readiness, true))
	assert.Equal(t, []string{"readiness", "second"}, PrecisionLabelValues(lifecycle.Readiness, false))
}

// TestHistogramLabelsValidate: a HistogramLabels built in code, not
// parsed, is checked as ParseHistogramLabels checks it.
func TestHistogramLabelsValidate(t *testing.T) {
	tests := []struct {
		labels HistogramLabels
		err    string
	}{
		{HistogramLabels{{Name: "team", Source: FromLabel, Key: "team"}}, ""},
		{HistogramLabels{{Name: "1team", Source: FromLabel, Key: "team"}}, `histogram label name "1team" is not a valid Prometheus label name`},
		{HistogramLabels{{Name: "__team", Source: FromLabel, Key: "team"}}, `histogram label name "__team" is not a valid Prometheus label name`},
		{HistogramLabels{{Name: "runtime_class", Source: FromLabel, Key: "x"}}, `histogram label name "runtime_class" is used twice or clashes with a built-in label`},
		{HistogramLabels{{Name: "a", Source: FromLabel, Key: "x"}, {Name: "a", Source: FromAnnotation, Key: "y"}}, `histogram label name "a" is used twice`},
		{HistogramLabels{{Name: "a", Source: "field", Key: "x"}}, `histogram label "a": source must be "label", "annotation", "node-label" or "owner-kind", got "field"`},
		{HistogramLabels{{Name: "a", Source: FromLabel}}, `histogram label "a": key must not be empty`},
	}
	for _, tt := range tests {
		err := tt.labels.Validate()
		if tt.err == "" {
			assert.NoError(t, err)
		} else {
			assert.ErrorContains(t, err, tt.err)
		}
	}
}
