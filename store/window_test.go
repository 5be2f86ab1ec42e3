package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podslo/podslo/lifecycle"
)

// clock is a settable time for the windowed counts.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func openAt(t *testing.T, dir string, c *clock) *Store {
	t.Helper()
	s, err := Open(Options{Dir: dir, Now: c.now, WindowRetention: 3 * 24 * time.Hour})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

type slotView struct {
	Slot           string
	Count, Precise uint64
	Value          float64
	Le5            uint64 // events within 5s, from the classic buckets
}

func windowSlots(s *Store, since time.Time) map[string][]slotView {
	out := map[string][]slotView{}
	s.Windows(since, func(family string, labels []string, sl Slot, c *SlotCounts) {
		v := slotView{Slot: sl.Start.UTC().Format("01-02T15:04") + "+" + sl.Length.String(), Count: c.Count, Precise: c.Precise, Value: c.Value}
		for i, b := range Buckets {
			if b <= 5 && c.Classic != nil {
				v.Le5 += c.Classic[i]
			}
		}
		k := family + "/" + joinLabels(labels)
		out[k] = append(out[k], v)
	})
	return out
}

func observe(t *testing.T, s *Store, n int, family string, seconds float64, precise bool) {
	t.Helper()
	for i := range n {
		uid := types.UID(fmt.Sprintf("%s-%v-%d-%d", family, seconds, time.Now().UnixNano(), i))
		require.NoError(t, s.Apply(Change{UID: uid, State: lifecycle.State{FirstSandboxReady: 1}, Meta: meta(string(uid)),
			Observe: []Sample{{Family: family, Labels: []string{"runc", "none"}, Value: seconds, Precise: precise}}}))
	}
}

// TestWindowsCountOnceAcrossRestartFoldAndDrop follows one series' slots
// through a day and a half: each observation lands in the five minutes it
// was made in, in the same write as the cumulative series, and is read back
// after a restart; after six hours the five-minute slots fold into their
// hour, and after the retention they go, on disk as in memory, while the
// cumulative series keeps every count.
func TestWindowsCountOnceAcrossRestartFoldAndDrop(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t: time.Date(2026, 11, 2, 10, 3, 0, 0, time.UTC)}
	s := openAt(t, dir, c)
	observe(t, s, 3, "creation", 2, true)
	observe(t, s, 1, "creation", 7, false)
	c.t = c.t.Add(4 * time.Minute) // 10:07, the next slot
	observe(t, s, 2, "creation", 0.2, true)
	require.NoError(t, s.Apply(Change{UID: "timeout", State: lifecycle.State{FirstSandboxReady: 2}, Add: []Sample{{Family: "timeouts", Labels: []string{"runc", "none"}, Value: 1}}}))
	c.t = c.t.Add(2 * time.Hour) // 12:07
	observe(t, s, 1, "creation", 1, false)

	want := map[string][]slotView{
		"creation/runc\xffnone": {
			{Slot: "11-02T10:00+5m0s", Count: 4, Precise: 3, Le5: 3},
			{Slot: "11-02T10:05+5m0s", Count: 2, Precise: 2, Le5: 2},
			{Slot: "11-02T12:05+5m0s", Count: 1, Le5: 1},
		},
		"timeouts/runc\xffnone": {{Slot: "11-02T10:05+5m0s", Value: 1}},
	}
	assert.Equal(t, want, windowSlots(s, time.Time{}))
	assert.Equal(t, map[string][]slotView{"creation/runc\xffnone": {{Slot: "11-02T12:05+5m0s", Count: 1, Le5: 1}}},
		windowSlots(s, c.t.Add(-time.Hour)), "a slot that ended before since is left out")
	cumulative := aggregates(s)
	require.Len(t, cumulative, 2, "the window records are not series")
	assert.Equal(t, uint64(7), cumulative["creation/runc\xffnone"].Count)

	require.NoError(t, s.Close())
	s = openAt(t, dir, c)
	assert.Equal(t, want, windowSlots(s, time.Time{}), "after a restart")
	assert.Equal(t, cumulative, aggregates(s))

	// 16:30: the slots of 10:00 and 10:05 ended more than 6h ago.
	c.t = time.Date(2026, 11, 2, 16, 30, 0, 0, time.UTC)
	require.NoError(t, s.CompactWindows(c.t))
	folded := map[string][]slotView{
		"creation/runc\xffnone": {
			{Slot: "11-02T10:00+1h0m0s", Count: 6, Precise: 5, Le5: 5},
			{Slot: "11-02T12:05+5m0s", Count: 1, Le5: 1},
		},
		"timeouts/runc\xffnone": {{Slot: "11-02T10:00+1h0m0s", Value: 1}},
	}
	assert.Equal(t, folded, windowSlots(s, time.Time{}))
	require.NoError(t, s.CompactWindows(c.t))
	assert.Equal(t, folded, windowSlots(s, time.Time{}), "a second run folds nothing twice")
	// Another observation in the hour already folded adds to it.
	c.t = time.Date(2026, 11, 2, 18, 30, 0, 0, time.UTC)
	require.NoError(t, s.CompactWindows(c.t))
	folded["creation/runc\xffnone"] = []slotView{
		{Slot: "11-02T10:00+1h0m0s", Count: 6, Precise: 5, Le5: 5},
		{Slot: "11-02T12:00+1h0m0s", Count: 1, Le5: 1},
	}
	assert.Equal(t, folded, windowSlots(s, time.Time{}))
	require.NoError(t, s.Close())
	s = openAt(t, dir, c)
	assert.Equal(t, folded, windowSlots(s, time.Time{}), "the fold is on disk")

	// Three days after 10:00 ended, the first hour goes; 12:00 stays.
	c.t = time.Date(2026, 11, 5, 11, 30, 0, 0, time.UTC)
	require.NoError(t, s.CompactWindows(c.t))
	assert.Equal(t, map[string][]slotView{"creation/runc\xffnone": {{Slot: "11-02T12:00+1h0m0s", Count: 1, Le5: 1}}}, windowSlots(s, time.Time{}))
	require.NoError(t, s.Close())
	s = openAt(t, dir, c)
	assert.Equal(t, map[string][]slotView{"creation/runc\xffnone": {{Slot: "11-02T12:00+1h0m0s", Count: 1, Le5: 1}}}, windowSlots(s, time.Time{}))
	assert.Equal(t, cumulative, aggregates(s), "the cumulative series keep every count")
}

// TestWindowRecordIsAnAggregateRecord holds the promise to releases that
// know no windows: a window record is an aggregate record of a family they
// do not export, which they load like any other.
func TestWindowRecordIsAnAggregateRecord(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t: time.Date(2026, 11, 2, 10, 3, 0, 0, time.UTC)}
	s := openAt(t, dir, c)
	observe(t, s, 2, "creation", 2, false)
	require.NoError(t, s.Close())
	var windows int
	for _, k := range keys(t, dir) {
		if k[0] != prefixAggregate {
			continue
		}
		family, _, err := splitAggregateKey([]byte(k))
		require.NoError(t, err)
		if family == "creation" {
			continue
		}
		windows++
		assert.Equal(t, "creation@300/"+fmt.Sprint(time.Date(2026, 11, 2, 10, 0, 0, 0, time.UTC).Unix()), family)
	}
	assert.Equal(t, 1, windows)
}

func TestMalformedWindowFamilyStopsLoad(t *testing.T) {
	for _, f := range []string{"creation@", "creation@300", "creation@x/1", "creation@0/1", "creation@300/y"} {
		_, _, _, window, err := parseWindowFamily(f)
		assert.True(t, window, f)
		assert.ErrorIs(t, err, errDecode, f)
	}
	family, _, _, window, err := parseWindowFamily("creation{zone}")
	assert.NoError(t, err)
	assert.False(t, window)
	assert.Equal(t, "creation{zone}", family)
}

// TestWindowFamiliesLeaveOthersOut keeps the windows of one family: the
// other's observations count in its series and nowhere else.
func TestWindowFamiliesLeaveOthersOut(t *testing.T) {
	c := &clock{t: time.Date(2026, 11, 2, 10, 3, 0, 0, time.UTC)}
	s, err := Open(Options{Dir: InMemory, Now: c.now, WindowFamilies: func(f string) bool { return f == "creation" }})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	observe(t, s, 2, "creation", 2, false)
	observe(t, s, 3, "stabilization", 2, false)
	assert.Equal(t, map[string][]slotView{"creation/runc\xffnone": {{Slot: "11-02T10:00+5m0s", Count: 2, Le5: 2}}}, windowSlots(s, time.Time{}))
	assert.Equal(t, uint64(3), aggregates(s)["stabilization/runc\xffnone"].Count)
}
