package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podslo/podslo/lifecycle"
)

const (
	uidA types.UID = "0b6e2a4c-58e4-4a8e-9d32-0d6c2f7c7a01"
	uidB types.UID = "not-a-uuid"
)

func open(t *testing.T, dir string) *Store {
	t.Helper()
	s, err := Open(Options{Dir: dir})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func meta(name string) *PodMeta { return &PodMeta{Namespace: "ns", Name: name} }

type podView struct {
	State lifecycle.State
	Meta  PodMeta
}

func livePods(s *Store) map[types.UID]podView {
	out := map[types.UID]podView{}
	s.Pods(func(uid types.UID, st *lifecycle.State, m *PodMeta) { out[uid] = podView{*st, *m} })
	return out
}

type seriesView struct {
	Value     float64
	Count     uint64
	Sum       float64
	Classic   []uint64
	Schema    int32
	ZeroCount uint64
	Native    map[int32]uint64
}

func aggregates(s *Store) map[string]seriesView {
	out := map[string]seriesView{}
	s.Aggregates(func(family string, labels []string, a *Aggregate) {
		v := seriesView{Value: a.Value}
		if h := a.Histogram; h != nil {
			native := map[int32]uint64{}
			for _, nb := range h.Native {
				native[nb.Index] = nb.Count
			}
			v = seriesView{Count: h.Count, Sum: h.Sum, Classic: h.Classic, Schema: h.Schema, ZeroCount: h.ZeroCount, Native: native}
		}
		out[family+"/"+joinLabels(labels)] = v
	})
	return out
}

func TestApplyPersistsAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	stA := lifecycle.State{FirstSandboxReady: 1000, LastSandboxReady: 1000, SandboxCreationMs: 3000, HasSandboxCreation: true}
	require.NoError(t, s.Apply(Change{
		UID: uidA, State: stA, Meta: meta("a"),
		Observe: []Sample{{Family: "creation", Labels: []string{"runc", "none"}, Value: 3, Exemplar: &Exemplar{Namespace: "ns", Pod: "a", Value: 3}}},
	}))
	stB := lifecycle.State{FirstSandboxReady: 2000, LastSandboxReady: 2600, Recreations: 1, Skipped: lifecycle.SkipSet{}.With(lifecycle.Skip{SLI: lifecycle.SandboxCreation, Reason: lifecycle.InvalidCondition})}
	require.NoError(t, s.Apply(Change{
		UID: uidB, State: stB, Meta: meta("b"),
		Observe: []Sample{{Family: "creation", Labels: []string{"runc", "none"}, Value: 0}, {Family: "creation", Labels: []string{"kata", "fast"}, Value: 4000}},
		Add:     []Sample{{Family: "recreations", Labels: []string{"runc", "none"}, Value: 1}, {Family: "recreations", Labels: []string{"runc", "none"}, Value: 1}},
	}))

	wantClassic := func(bucket int) []uint64 {
		c := make([]uint64, len(Buckets)+1)
		c[bucket]++
		return c
	}
	runcClassic := wantClassic(0)
	runcClassic[slices.Index(Buckets, 3)]++ // 3s is in the le=3 bucket
	want := map[string]seriesView{
		"creation/runc\xffnone":    {Count: 2, Sum: 3, Classic: runcClassic, Schema: 3, ZeroCount: 1, Native: map[int32]uint64{13: 1}},
		"creation/kata\xfffast":    {Count: 1, Sum: 4000, Classic: wantClassic(len(Buckets)), Schema: 3, Native: map[int32]uint64{96: 1}},
		"recreations/runc\xffnone": {Value: 2},
	}
	assert.Equal(t, want, aggregates(s))
	assert.Equal(t, map[types.UID]podView{uidA: {stA, *meta("a")}, uidB: {stB, *meta("b")}}, livePods(s))

	require.NoError(t, s.Close())
	s = open(t, dir)
	assert.Equal(t, want, aggregates(s), "aggregates survive a reopen")
	got, ok := s.Get(uidA)
	assert.True(t, ok)
	assert.Equal(t, stA, got)
	got, ok = s.Get(uidB)
	assert.True(t, ok)
	assert.Equal(t, stB, got)
	assert.Empty(t, livePods(s), "pods loaded from disk are not live until seen")
	s.Aggregates(func(_ string, _ []string, a *Aggregate) {
		for _, e := range a.Exemplars {
			assert.Zero(t, e, "exemplars are not persisted")
		}
	})
}

func TestNativeKeyMatchesClientGolangBoundaries(t *testing.T) {
	// Bucket k at schema 3 is (2^((k-1)/8), 2^(k/8)]: upper bounds are
	// inclusive, so powers of two sit at the top of their bucket.
	tests := []struct {
		v    float64
		want int32
	}{{1, 0}, {2, 8}, {3, 13}, {4, 16}, {0.5, -8}, {1.05, 1}, {3600, 95}, {4000, 96}}
	for _, tt := range tests {
		assert.Equal(t, tt.want, nativeKey(tt.v, 3), "v=%v", tt.v)
	}
	assert.Equal(t, int32(2), nativeKey(3, 0))
	assert.Equal(t, int32(1), nativeKey(2, 0))
	assert.Equal(t, int32(1), nativeKey(3, -1))
}

func TestNativeHistogramStaysWithinMaxBuckets(t *testing.T) {
	h := newHistogram(Buckets)
	// 200 values spread over 1e-6..1e6 need more than 160 buckets at schema 3.
	for i := 0; i < 200; i++ {
		h.observe(Buckets, 1e-6*pow(1.1, i))
	}
	assert.LessOrEqual(t, len(h.Native), maxNativeBuckets)
	assert.Less(t, h.Schema, int32(3))
	var total uint64
	for i, nb := range h.Native {
		total += nb.Count
		if i > 0 {
			assert.Less(t, h.Native[i-1].Index, nb.Index, "sorted and unique")
		}
	}
	assert.Equal(t, uint64(200), total, "merging keeps every observation")
}

func pow(b float64, n int) float64 {
	v := 1.0
	for range n {
		v *= b
	}
	return v
}

func TestNoChangeWritesNothing(t *testing.T) {
	s := open(t, t.TempDir())
	st := lifecycle.State{FirstSandboxReady: 10, LastSandboxReady: 10}
	require.NoError(t, s.Apply(Change{UID: uidA, State: st, Meta: meta("a")}))
	before := s.Stats().Succeeded(OpApply)
	require.NoError(t, s.Apply(Change{UID: uidA, State: st, Meta: meta("renamed")}))
	assert.Equal(t, before, s.Stats().Succeeded(OpApply), "same state, no samples: no write")
	assert.Equal(t, "renamed", livePods(s)[uidA].Meta.Name, "metadata still moves")
}

func TestFailedApplyChangesNothing(t *testing.T) {
	s := open(t, t.TempDir())
	require.NoError(t, s.Apply(Change{UID: uidA, State: lifecycle.State{FirstSandboxReady: 1}, Meta: meta("a"), Add: []Sample{{Family: "f", Value: 1}}}))
	err := s.Apply(Change{UID: uidA, State: lifecycle.State{FirstSandboxReady: 2}, Meta: meta("a"), Observe: []Sample{{Family: "f", Value: 1}}})
	require.Error(t, err, "a counter cannot become a histogram")
	got, _ := s.Get(uidA)
	assert.Equal(t, int64(1), got.FirstSandboxReady)
	assert.Equal(t, map[string]seriesView{"f/": {Value: 1}}, aggregates(s))
	assert.Equal(t, uint64(1), s.Stats().Failed(OpApply))
}

func uids(s *Store) []types.UID {
	var out []types.UID
	s.UIDs(func(uid types.UID) { out = append(out, uid) })
	return out
}

func TestForget(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	for _, uid := range []types.UID{uidA, uidB, "c"} {
		require.NoError(t, s.Apply(Change{UID: uid, State: lifecycle.State{FirstSandboxReady: 1}, Meta: meta(string(uid))}))
	}
	require.NoError(t, s.Apply(Change{UID: "c", Forget: true}))
	require.NoError(t, s.Close())

	s = open(t, dir)
	assert.Equal(t, 2, s.Len())
	require.NoError(t, s.Apply(Change{UID: uidA, State: lifecycle.State{FirstSandboxReady: 1}, Meta: meta("a")}))
	assert.ElementsMatch(t, []types.UID{uidA, uidB}, uids(s), "c was forgotten")

	// Forgetting a pod and counting what its end means is one transaction.
	require.NoError(t, s.Apply(Change{UID: uidB, Forget: true, Add: []Sample{{Family: "skipped", Labels: []string{"termination", "vanished"}, Value: 1}}}))
	assert.ElementsMatch(t, []types.UID{uidA}, uids(s))
	require.NoError(t, s.Close())

	s = open(t, dir)
	_, ok := s.Get(uidB)
	assert.False(t, ok)
	_, ok = s.Get(uidA)
	assert.True(t, ok)
	assert.Equal(t, map[string]seriesView{"skipped/termination\xffvanished": {Value: 1}}, aggregates(s))
}

func TestCloseIsIdempotentAndFinal(t *testing.T) {
	s := open(t, t.TempDir())
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())
	assert.ErrorIs(t, s.Apply(Change{UID: uidA}), ErrClosed)
	assert.ErrorIs(t, s.SetSetting("scope", nil), ErrClosed)
}

func TestSecondOpenIsLocked(t *testing.T) {
	dir := t.TempDir()
	open(t, dir)
	_, err := Open(Options{Dir: dir})
	assert.ErrorIs(t, err, ErrLocked)
	entries, _ := os.ReadDir(filepath.Dir(dir))
	for _, e := range entries {
		assert.NotContains(t, e.Name(), "corrupt", "a locked dir is not corrupt")
	}
}

func TestCorruptDirIsMovedAside(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "state")
	s := open(t, dir)
	require.NoError(t, s.Apply(Change{UID: uidA, State: lifecycle.State{FirstSandboxReady: 1}, Meta: meta("a")}))
	require.NoError(t, s.Close())
	require.NoError(t, os.WriteFile(filepath.Join(dir, "MANIFEST"), []byte("this is not a manifest"), 0o600))

	s = open(t, dir)
	assert.Equal(t, uint64(1), s.Stats().Recoveries.Load())
	assert.Equal(t, 0, s.Len(), "starts empty")
	require.NoError(t, s.Apply(Change{UID: uidA, State: lifecycle.State{FirstSandboxReady: 1}, Meta: meta("a")}), "and works")
	matches, _ := filepath.Glob(dir + ".corrupt-*")
	assert.Len(t, matches, 1, "the evidence is kept")
}

// keys lists the records on disk, read with badger itself, so that a test
// sees what Open left there and not what it loaded.
func keys(t *testing.T, dir string) []string {
	t.Helper()
	db, err := badger.Open(badger.DefaultOptions(dir).WithReadOnly(true).WithLogger(nil))
	require.NoError(t, err)
	defer db.Close()
	var out []string
	require.NoError(t, db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			out = append(out, string(it.Item().KeyCopy(nil)))
		}
		return nil
	}))
	return out
}

func TestCorruptRecordIsIgnoredNotDeleted(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	require.NoError(t, s.Apply(Change{UID: uidA, State: lifecycle.State{FirstSandboxReady: 1}, Meta: meta("a")}))
	flipped := encodeState(lifecycle.State{Scheduled: 1700000000, FirstSandboxReady: 1700000002})
	flipped[3] ^= 1
	require.NoError(t, s.db.Update(func(txn *badger.Txn) error { return txn.Set(podKey(uidB), flipped) }))
	// A format-1 record cut short: format 1 has no checksum, and 0.1.0
	// wrote only records that decode.
	require.NoError(t, s.db.Update(func(txn *badger.Txn) error { return txn.Set(podKey("c"), []byte{podRecordV1, 1, 2}) }))
	require.NoError(t, s.Close())
	before := keys(t, dir)

	for range 2 {
		s = open(t, dir)
		assert.Equal(t, 1, s.Len())
		assert.Equal(t, uint64(2), s.Stats().Failed(OpLoad), "both corrupt records are counted, at every start")
		require.NoError(t, s.Close())
		assert.Equal(t, before, keys(t, dir), "nothing was deleted")
	}
}

func TestNewerFormatStopsOpenAndChangesNothing(t *testing.T) {
	for name, rec := range map[string]struct{ key, val []byte }{
		"pod record of format 99":  {podKey(uidB), []byte{99, 1, 2}},
		"record type of a release": {[]byte("zzz"), []byte{1}},
		"aggregate of a new kind":  {aggregateKey("f", ""), sealRecord(protowire.AppendVarint(protowire.AppendTag([]byte{aggregateRecordV2}, aggKind, protowire.VarintType), 9))},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir)
			require.NoError(t, s.Apply(Change{UID: uidA, State: lifecycle.State{FirstSandboxReady: 1}, Meta: meta("a")}))
			require.NoError(t, s.db.Update(func(txn *badger.Txn) error { return txn.Set(rec.key, rec.val) }))
			require.NoError(t, s.Close())
			before := keys(t, dir)

			_, err := Open(Options{Dir: dir})
			require.ErrorIs(t, err, ErrNewerFormat)
			assert.Contains(t, err.Error(), fmt.Sprintf("%q", rec.key), "the error names the record")
			assert.Contains(t, err.Error(), dir)
			assert.Equal(t, before, keys(t, dir), "nothing was deleted")
			matches, _ := filepath.Glob(dir + ".corrupt-*")
			assert.Empty(t, matches, "nothing was moved aside")
		})
	}
}

// TestBucketLayoutChange is an upgrade that adds classic buckets: no
// stored observation is lost or counted twice, every bound the layouts
// share keeps its cumulative count (so its series goes on without a reset),
// and the created time stays.
func TestBucketLayoutChange(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, Buckets: v1Bounds})
	require.NoError(t, err)
	values := []float64{0.07, 0.3, 0.5, 0.7, 3, 5000}
	for _, v := range values {
		require.NoError(t, s.Apply(Change{UID: uidA, State: lifecycle.State{Scheduled: int64(v * 1000)}, Observe: []Sample{{Family: "h", Value: v}}}))
	}
	var created int64
	s.Aggregates(func(_ string, _ []string, agg *Aggregate) { created = agg.Created })
	require.NoError(t, s.Close())
	layouts := func() (n int) {
		for _, k := range keys(t, dir) {
			if k[0] == prefixLayout {
				n++
			}
		}
		return n
	}
	assert.Equal(t, 1, layouts(), "the bounds are written once, with the first histogram")

	finer := append([]float64{0.05, 0.1, 0.25}, v1Bounds...)
	s, err = Open(Options{Dir: dir, Buckets: finer})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	var h *Histogram
	s.Aggregates(func(_ string, _ []string, agg *Aggregate) { h, created = agg.Histogram, agg.Created-created })
	require.NotNil(t, h)
	assert.Zero(t, created, "the series is not reset")
	assert.Equal(t, uint64(len(values)), h.Count)
	assert.InDelta(t, 5004.57, h.Sum, 1e-9)
	// 0.07 and 0.3 were in (0, 0.5]: they stay at 0.5, and the new bounds
	// below it start empty.
	assert.Equal(t, []uint64{0, 0, 0, 3, 1, 0, 1, 0}, h.Classic[:8])
	assert.Equal(t, uint64(1), h.Classic[len(h.Classic)-1])

	// A new observation goes into the new layout, and the record is
	// written in it.
	require.NoError(t, s.Apply(Change{UID: uidA, State: lifecycle.State{Scheduled: 1}, Observe: []Sample{{Family: "h", Value: 0.07}}}))
	require.NoError(t, s.Close())
	assert.Equal(t, 2, layouts(), "the new bounds, beside the old ones a rollback reads")
	s, err = Open(Options{Dir: dir, Buckets: finer})
	require.NoError(t, err)
	s.Aggregates(func(_ string, _ []string, agg *Aggregate) { h = agg.Histogram })
	assert.Equal(t, []uint64{0, 1, 0, 3, 1, 0, 1, 0}, h.Classic[:8])
	assert.Equal(t, uint64(len(values)+1), h.Count)
}

func TestInMemory(t *testing.T) {
	s := open(t, InMemory)
	require.NoError(t, s.Apply(Change{UID: uidA, State: lifecycle.State{FirstSandboxReady: 1}, Meta: meta("a"), Observe: []Sample{{Family: "f", Value: 2}}}))
	assert.Equal(t, 1, s.Len())
}

func TestStartStopsWithContext(t *testing.T) {
	s, err := Open(Options{Dir: t.TempDir(), GCInterval: time.Millisecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Start(ctx) }()
	require.Eventually(t, func() bool { return s.Stats().Succeeded(OpGC) > 0 }, 5*time.Second, time.Millisecond)
	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("Start did not return after cancel")
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		opts Options
		err  string
	}{
		{Options{}, "state dir must be set"},
		{Options{Dir: "x", Buckets: []float64{1, 1}}, "buckets must increase"},
		{Options{Dir: "x", GCInterval: -1}, "gc interval must not be negative"},
		{Options{Dir: "x"}, ""},
	}
	for _, tt := range tests {
		err := tt.opts.Validate()
		if tt.err == "" {
			assert.NoError(t, err)
		} else {
			assert.ErrorContains(t, err, tt.err)
		}
	}
}

// A setting survives a restart, and is neither a pod nor an aggregate.
func TestSettingPersists(t *testing.T) {
	dir := t.TempDir()
	st, err := Open(Options{Dir: dir})
	require.NoError(t, err)
	_, ok := st.Setting("scope")
	assert.False(t, ok)
	require.NoError(t, st.SetSetting("scope", []byte(`{"shard":1}`)))
	require.NoError(t, st.Close())
	assert.ErrorIs(t, st.SetSetting("scope", nil), ErrClosed)

	st, err = Open(Options{Dir: dir})
	require.NoError(t, err)
	defer st.Close()
	v, ok := st.Setting("scope")
	assert.True(t, ok)
	assert.Equal(t, `{"shard":1}`, string(v))
	assert.Zero(t, st.Len())
	st.Aggregates(func(family string, _ []string, _ *Aggregate) { t.Errorf("unexpected series %s", family) })
}
