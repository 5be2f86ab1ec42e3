package slostatus

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podslo/podslo/alerts"
	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/sli"
	"github.com/podslo/podslo/store"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

var (
	creation = sli.MustByStore("sandbox_creation").ID(nil)
	timeouts = sli.MustByStore("sandbox_creation_timeouts").ID(nil)
)

// fill records n observations of v seconds (or, for a counter, n
// increments) in family for a pod of runtime/storage class, at the
// clock's time.
func fill(t *testing.T, st *store.Store, n int, family, runtime, storage string, v float64, precise bool) {
	t.Helper()
	for i := range n {
		uid := types.UID(fmt.Sprintf("%s-%s-%s-%v-%d-%d", family, runtime, storage, v, time.Now().UnixNano(), i))
		c := store.Change{UID: uid, State: lifecycle.State{FirstSandboxReady: 1}}
		smp := store.Sample{Family: family, Labels: []string{runtime, storage}, Value: v, Precise: precise}
		if family == timeouts {
			c.Add = []store.Sample{{Family: family, Labels: []string{runtime, storage}, Value: 1}}
		} else {
			c.Observe = []store.Sample{smp}
		}
		require.NoError(t, st.Apply(c))
	}
}

// openStore opens a store that keeps the windows of the families the
// default SLOs read, as the exporter's does.
func openStore(t *testing.T, c *clock) *store.Store {
	t.Helper()
	spec, err := alerts.Default()
	require.NoError(t, err)
	ev, err := New(spec, nil)
	require.NoError(t, err)
	st, err := store.Open(store.Options{Dir: store.InMemory, Now: c.now, WindowFamilies: ev.Families()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func status(sts []Status, slo, label, class string) *Status {
	for i := range sts {
		if sts[i].Name == slo && sts[i].Label == label && sts[i].ClassName == class {
			return &sts[i]
		}
	}
	return nil
}

// TestFromStoreEvaluatesTheDefaultSLOs counts a cluster's month in the
// store and reads the default SLOs off it: a kata class whose 30 sandboxes
// of the last minutes took 8s (over the 5s threshold) burns its budget and
// fires every alert; runc's sub-second sandboxes meet theirs, and its one
// timeout overspends the 99.5% success SLO's budget without paging (the
// alerts need 40 events in the long window).
func TestFromStoreEvaluatesTheDefaultSLOs(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 3, 0, 0, time.UTC)
	c := &clock{t: now.Add(-10 * 24 * time.Hour)}
	st := openStore(t, c)
	fill(t, st, 40, creation, "kata", "none", 2, false)
	c.t = now.Add(-3 * 24 * time.Hour)
	fill(t, st, 50, creation, "runc", "none", 0.2, true)
	fill(t, st, 1, timeouts, "runc", "none", 0, false)
	c.t = now.Add(-2 * time.Minute)
	fill(t, st, 30, creation, "kata", "none", 8, false)
	c.t = now.Add(-40 * 24 * time.Hour) // beyond every window
	fill(t, st, 7, creation, "kata", "none", 100, false)

	spec, err := alerts.Default()
	require.NoError(t, err)
	ev, err := New(spec, nil)
	require.NoError(t, err)
	rep := ev.FromStore(st, now, Source{Scope: "all pods"})
	sts := Evaluate(&rep)

	kata := status(sts, "sandbox_creation_latency", "runtime_class", "kata")
	require.NotNil(t, kata)
	assert.Equal(t, 70.0, kata.Events)
	assert.Equal(t, 40.0, kata.Good)
	assert.InDelta(t, 100*40.0/70, kata.Attainment, 1e-9)
	assert.InDelta(t, 100*(1-(30.0/70)/0.01), kata.BudgetLeft, 1e-9)
	assert.True(t, kata.Breached)
	assert.Equal(t, []string{"critical 1h/5m", "critical 6h/30m", "warning 1d/2h", "warning 3d/6h"}, kata.Firing)
	assert.InDelta(t, 100, kata.Burn["5m"], 1e-9, "every event of the last 5m was bad: 100 times the 1% allowed")
	assert.Equal(t, Counts{Good: 40, Total: 40}, kata.Class.Windows["30d"].sub(Counts{Total: 30}))
	assert.Equal(t, Counts{Good: 0, Total: 30}, kata.Class.Windows["1h"])
	assert.Equal(t, Counts{Good: 40, Total: 70}, kata.Class.Windows["30d"])
	assert.Equal(t, 30, len(kata.Class.Days))
	assert.Equal(t, Counts{Good: 40, Total: 40}, kata.Class.Days[19], "10 days ago is day 20 of 30")
	assert.Equal(t, Counts{Good: 0, Total: 30}, kata.Class.Days[29])
	assert.True(t, math.IsNaN(kata.BudgetByDay[0]), "no event yet")
	assert.Equal(t, 100.0, kata.BudgetByDay[19])
	assert.InDelta(t, kata.BudgetLeft, kata.BudgetByDay[29], 1e-9)
	lo, hi, ok := Quantile(kata.SLO.Bounds, kata.Class.Distribution, 0.99)
	assert.True(t, ok)
	assert.Equal(t, [2]float64{6, 8}, [2]float64{lo, hi}, "8s is in the bucket (6, 8]")

	// The same pods in the storage_class view: one class, none.
	none := status(sts, "sandbox_creation_latency", "storage_class", "none")
	require.NotNil(t, none)
	assert.Equal(t, 120.0, none.Events)

	runc := status(sts, "runc_sandbox_creation_latency", "runtime_class", "runc")
	require.NotNil(t, runc)
	assert.Equal(t, 50.0, runc.Events)
	assert.Equal(t, 100.0, runc.BudgetLeft)
	assert.Equal(t, uint64(50), runc.Class.Precise)
	assert.Nil(t, status(sts, "runc_sandbox_creation_latency", "runtime_class", "kata"), "the SLO's matchers leave kata out")

	success := status(sts, "sandbox_creation_success", "runtime_class", "runc")
	require.NotNil(t, success)
	assert.Equal(t, 51.0, success.Events)
	assert.Equal(t, 50.0, success.Good)
	assert.InDelta(t, 100*(1-(1.0/51)/0.005), success.BudgetLeft, 1e-9)
	assert.Empty(t, success.Firing, "51 events in 3d, but 1 in the last day: no window pair burns")
	assert.True(t, success.Breached)

	// Worst budget first.
	assert.Equal(t, "kata", sts[0].ClassName)
	assert.True(t, Breached(sts))
}

// TestMergeAddsShards splits one cluster's pods between two stores, as two
// shards would, and merges their reports into the report of one store that
// saw them all.
func TestMergeAddsShards(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 3, 0, 0, time.UTC)
	c := &clock{t: now.Add(-26 * time.Hour)}
	a, b, all := openStore(t, c), openStore(t, c), openStore(t, c)
	for _, st := range []*store.Store{a, all} {
		fill(t, st, 12, creation, "kata", "fast", 3, false)
	}
	for _, st := range []*store.Store{b, all} {
		fill(t, st, 5, creation, "kata", "fast", 30, false)
		fill(t, st, 9, creation, "runc", "none", 0.05, true)
	}
	c.t = now.Add(-time.Minute)
	for _, st := range []*store.Store{b, all} {
		fill(t, st, 2, timeouts, "kata", "fast", 0, false)
	}
	spec, err := alerts.Default()
	require.NoError(t, err)
	ev, err := New(spec, nil)
	require.NoError(t, err)
	merged, err := Merge(ev.FromStore(a, now, Source{Scope: "shard 0 of 2"}), ev.FromStore(b, now, Source{Scope: "shard 1 of 2"}))
	require.NoError(t, err)
	whole := ev.FromStore(all, now, Source{Scope: "all pods"})
	assert.Len(t, merged.Sources, 2)
	merged.Sources, whole.Sources = nil, nil
	assert.Equal(t, whole, merged)

	other := ev.FromStore(a, now, Source{})
	other.SLOs[0].Objective = 90
	_, err = Merge(whole, other)
	assert.ErrorContains(t, err, "disagree")
}

func TestQuantileNamesItsBounds(t *testing.T) {
	bounds := []float64{0.5, 1, 2}
	for _, tc := range []struct {
		dist   []uint64
		q      float64
		lo, hi float64
	}{
		{[]uint64{10, 0, 0, 0}, 0.99, 0, 0.5},
		{[]uint64{98, 1, 0, 1}, 0.99, 0.5, 1},
		{[]uint64{98, 1, 0, 1}, 1, 2, math.Inf(1)},
		{[]uint64{0, 0, 3, 0}, 0.5, 1, 2},
	} {
		lo, hi, ok := Quantile(bounds, tc.dist, tc.q)
		assert.True(t, ok)
		assert.Equal(t, [2]float64{tc.lo, tc.hi}, [2]float64{lo, hi}, "%v q%v", tc.dist, tc.q)
	}
	_, _, ok := Quantile(bounds, []uint64{0, 0, 0, 0}, 0.5)
	assert.False(t, ok)
}

func (c Counts) sub(o Counts) Counts { return Counts{Good: c.Good - o.Good, Total: c.Total - o.Total} }

func TestWriteWorstKeepsTheWorstRows(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 3, 0, 0, time.UTC)
	c := &clock{t: now.Add(-time.Minute)}
	st := openStore(t, c)
	fill(t, st, 10, creation, "kata", "none", 8, false)
	fill(t, st, 10, creation, "runc", "none", 0.2, true)
	spec, err := alerts.Default()
	require.NoError(t, err)
	ev, err := New(spec, nil)
	require.NoError(t, err)
	rep := ev.FromStore(st, now, Source{})
	sts := Evaluate(&rep)
	var b strings.Builder
	require.NoError(t, WriteWorst(&b, sts, 2))
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	require.Len(t, lines, 5, b.String())
	assert.Equal(t, Summary(sts), lines[0])
	assert.Regexp(t, `^SLO +CLASS`, lines[1])
	assert.Contains(t, lines[2], "kata", "the worst first")
	assert.Equal(t, fmt.Sprintf("... and %d more rows", len(sts)-2), lines[4])
}
