package collectors

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/sli"
	"github.com/podslo/podslo/store"
)

// seriesValues is a scraped family's series, as "name=value,..." (labels
// sorted) → value.
func seriesValues(f *dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	if f == nil {
		return out
	}
	for _, m := range f.GetMetric() {
		slices.SortFunc(m.Label, func(a, b *dto.LabelPair) int {
			switch {
			case a.GetName() < b.GetName():
				return -1
			case a.GetName() > b.GetName():
				return 1
			}
			return 0
		})
		out[labelKey(m)] = m.GetCounter().GetValue()
	}
	return out
}

// TestCountersStartAtZero scrapes the real handler: every counter has a
// series at 0 for every class podslo knows before its first increment, so
// that increase() over the first scrape after it sees the increment
// (issue 26, defect 3).
func TestCountersStartAtZero(t *testing.T) {
	s := newStore(t)
	// A pending pod of a runtime and a storage class: its timeout, say,
	// may come at any scrape.
	require.NoError(t, s.Apply(store.Change{
		UID: "waiting", Meta: &store.PodMeta{Namespace: "ns", Name: "waiting", Node: "n1", RuntimeClass: "kata", StorageClass: "fast", HistogramLabels: []string{"a"}},
		State: lifecycle.State{Scheduled: 1000},
	}))
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewSLIs(s, labels, discard, WithStorageClasses(func() []string { return []string{"gold"} })), NewSkipped(s, labels, discard))
	h := Handler(reg, nil, nil, discard)

	// The classes podslo knows: "none", the pod's, and the cluster's
	// StorageClass gold; the histogram label values of the pods in state.
	var want []map[string]string
	for _, rc := range []string{"kata", "none"} {
		for _, sc := range []string{"fast", "gold", "none"} {
			want = append(want, map[string]string{"runtime_class": rc, "storage_class": sc, "team": "a"})
		}
	}
	counters := 0
	fams := parseText(t, scrapeBody(t, h, false))
	for _, a := range sli.Aggregates() {
		if a.Type != sli.Counter {
			continue
		}
		counters++
		got := seriesValues(fams[a.Name])
		wantHere := map[string]float64{}
		for _, w := range want {
			if a.Label == "" {
				wantHere[key(w)] = 0
				continue
			}
			for _, v := range a.LabelDomain {
				l := maps.Clone(w)
				l[a.Label] = v
				wantHere[key(l)] = 0
			}
		}
		assert.Equal(t, wantHere, got, a.Name)
	}
	assert.Equal(t, 6, counters, "the counters of sli.Table")
	skips := seriesValues(fams["podslo_observations_skipped_total"])
	assert.Len(t, skips, len(lifecycle.Skips()))
	for _, sk := range lifecycle.Skips() {
		v, ok := skips[fmt.Sprintf("reason=%s,sli=%s,", sk.Reason, sk.SLI)]
		assert.True(t, ok && v == 0, "skip %s/%s at 0", sk.SLI, sk.Reason)
	}

	// The first timeout and skip: their series go from 0 to 1, no other
	// series appears or changes.
	timeouts := sli.MustByStore("sandbox_creation_timeouts")
	require.NoError(t, s.Apply(store.Change{
		UID: "waiting", Meta: &store.PodMeta{Namespace: "ns", Name: "waiting", Node: "n1", RuntimeClass: "kata", StorageClass: "fast", HistogramLabels: []string{"a"}},
		State: lifecycle.State{Scheduled: 1000, TimedOut: true},
		Add: []store.Sample{
			{Family: timeouts.ID(labels.Histogram), Labels: []string{"kata", "fast", "a"}, Value: 1},
			{Family: sli.FamilySkipped, Labels: []string{"readiness", "too_old"}, Value: 1},
		},
	}))
	fams = parseText(t, scrapeBody(t, h, false))
	got := seriesValues(fams[timeouts.Name])
	assert.Len(t, got, len(want))
	for _, w := range want {
		wantV := 0.0
		if w["runtime_class"] == "kata" && w["storage_class"] == "fast" {
			wantV = 1
		}
		v, ok := got[key(w)]
		assert.True(t, ok, key(w))
		assert.Equal(t, wantV, v, key(w))
	}
	skips = seriesValues(fams["podslo_observations_skipped_total"])
	assert.Len(t, skips, len(lifecycle.Skips()))
	assert.Equal(t, 1.0, skips["reason=too_old,sli=readiness,"])
	assert.Equal(t, 0.0, skips["reason=too_old,sli=termination,"])
}

// key is labelKey's form of a label set: "name=value," by name.
func key(l map[string]string) string {
	names := make([]string, 0, len(l))
	for n := range l {
		names = append(names, n)
	}
	slices.Sort(names)
	out := ""
	for _, n := range names {
		out += n + "=" + l[n] + ","
	}
	return out
}

// zeroLines is the exposition of name at 0 for every runtime × storage
// class but skip ("runtime/storage"), each with the extra label.
func zeroLines(name, extra string, runtimes, storages []string, skip string) string {
	var b strings.Builder
	for _, rc := range runtimes {
		for _, sc := range storages {
			if rc+"/"+sc == skip {
				continue
			}
			l := map[string]string{"runtime_class": rc, "storage_class": sc}
			if n, v, ok := strings.Cut(extra, "="); ok {
				l[n] = strings.Trim(v, `"`)
			}
			var pairs []string
			for _, n := range slices.Sorted(maps.Keys(l)) {
				pairs = append(pairs, fmt.Sprintf("%s=%q", n, l[n]))
			}
			fmt.Fprintf(&b, "%s{%s} 0\n", name, strings.Join(pairs, ","))
		}
	}
	return b.String()
}

// header is the HELP and TYPE lines of an SLI's counter.
func header(name string) string {
	for _, a := range sli.Aggregates() {
		if a.Name == name {
			return fmt.Sprintf("# HELP %s %s\n# TYPE %s counter\n", name, a.Help, name)
		}
	}
	panic("no SLI counter " + name)
}
