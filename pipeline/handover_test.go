package pipeline

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podslo/podslo/scope"
	"github.com/podslo/podslo/sli"
	"github.com/podslo/podslo/store"
)

// run is one exporter run over a state directory: a pipeline in sc at now.
func run(t *testing.T, dir string, sc scope.Scope, now int64) (*Pipeline, *store.Store) {
	t.Helper()
	st, err := store.Open(store.Options{Dir: dir})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	p, err := New(st, Options{Scope: sc, Now: func() time.Time { return time.Unix(now, 0) }})
	require.NoError(t, err)
	return p, st
}

// allSkips is every skip counted, by sli/reason.
func allSkips(st *store.Store) map[string]float64 {
	out := map[string]float64{}
	st.Aggregates(func(family string, labels []string, a *store.Aggregate) {
		if family == sli.FamilySkipped {
			out[labels[0]+"/"+labels[1]] += a.Value
		}
	})
	return out
}

// Going from one exporter to two shards, and from two shards back to one,
// counts every sandbox creation exactly once across the instances: pods that
// moved away are forgotten without a vanished skip, pods that moved in are
// not observed again, and a pod deleted while its own shard was down still
// counts as vanished.
func TestScopeChangeCountsEveryPodOnce(t *testing.T) {
	const n = 40
	pods := make([]types.UID, n)
	for i := range pods {
		pods[i] = types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i))
	}
	two := [2]scope.Scope{{Shard: 0, TotalShards: 2}, {Shard: 1, TotalShards: 2}}
	owned := func(sc scope.Scope) liveSet {
		l := liveSet{}
		for _, uid := range pods {
			if sc.OwnsUID(uid) {
				l[uid] = struct{}{}
			}
		}
		return l
	}

	// One cluster-wide exporter observes every pod, at t=100.
	dir0 := t.TempDir()
	p, st := run(t, dir0, scope.Unscoped, 1700000100)
	for _, uid := range pods {
		require.NoError(t, p.Handle(startedPod(uid, 3)))
	}
	all := liveSet{}
	for _, uid := range pods {
		all[uid] = struct{}{}
	}
	p.Synced(all.get, func() bool { return true })
	count, _ := creations(st)
	require.EqualValues(t, n, count)
	require.NoError(t, st.Close())

	// Scaled to two shards at t=200, well within the max age of the pods'
	// start-ups: shard 0 keeps the old state, shard 1 is new. One pod of
	// shard 0 was deleted meanwhile.
	live0 := owned(two[0])
	var deleted types.UID
	for uid := range live0 {
		deleted = uid
		break
	}
	delete(live0, deleted)
	p0, st0 := run(t, dir0, two[0], 1700000200)
	for uid := range live0 {
		require.NoError(t, p0.Handle(startedPod(uid, 3)))
	}
	p0.Synced(live0.get, func() bool { return true })
	assert.Equal(t, len(live0), st0.Len(), "shard 0 keeps exactly its own live pods")
	// Its containers never ran, so its start-up leaves too.
	vanished := map[string]float64{"termination/vanished": 1, "pod_startup/vanished": 1}
	assert.Equal(t, vanished, allSkips(st0), "only shard 0's own deleted pod counts as vanished")

	p1, st1 := run(t, t.TempDir(), two[1], 1700000200)
	live1 := owned(two[1])
	for uid := range live1 {
		require.NoError(t, p1.Handle(startedPod(uid, 3)))
	}
	p1.Synced(live1.get, func() bool { return true })
	assert.Equal(t, len(live1), st1.Len())
	c0, _ := creations(st0)
	c1, _ := creations(st1)
	assert.EqualValues(t, n, c0+c1, "the shards together count each creation once")
	assert.Zero(t, c1, "the new shard counts no creation its pods had before it started")
	assert.Empty(t, allSkips(st1), "nor any skip for them")

	// A pod created after the split is counted by its shard alone.
	fresh := types.UID("00000000-0000-4000-8000-999999999999")
	mine := p0
	if two[1].OwnsUID(fresh) {
		mine = p1
	}
	late := startedPod(fresh, 2)
	late.Conditions[0].LastTransitionTime, late.Conditions[1].LastTransitionTime = 1700000200, 1700000202
	require.NoError(t, mine.Handle(late))
	c0, _ = creations(st0)
	c1, _ = creations(st1)
	assert.EqualValues(t, n+1, c0+c1)

	// Back to one exporter on shard 0's state at t=300: shard 1's pods move
	// in and are not counted again.
	require.NoError(t, st0.Close())
	require.NoError(t, st1.Close())
	pOne, stOne := run(t, dir0, scope.Unscoped, 1700000300)
	live := liveSet{}
	for uid := range live0 {
		live[uid] = struct{}{}
	}
	for uid := range live1 {
		live[uid] = struct{}{}
	}
	live[fresh] = struct{}{}
	for uid := range live {
		require.NoError(t, pOne.Handle(startedPod(uid, 3)))
	}
	pOne.Synced(live.get, func() bool { return true })
	cOne, _ := creations(stOne)
	assert.Equal(t, c0, cOne, "the pods that moved in add no creation")
	assert.Equal(t, vanished, allSkips(stOne), "and no skip")
	assert.Equal(t, len(live), stOne.Len())
}

// A scope recorded with the state is compared at the next start: the same
// scope hands nothing over, and a state without one is cluster-wide.
func TestScopeIsRecorded(t *testing.T) {
	dir := t.TempDir()
	p, st := run(t, dir, scope.Unscoped, 1700000100)
	require.NoError(t, p.Handle(startedPod("u1", 3)))
	assert.Nil(t, p.handover, "a new cluster-wide state hands nothing over")
	p.Synced(liveSet{"u1": {}}.get, func() bool { return true })
	raw, ok := st.Setting(scopeSetting)
	require.True(t, ok, "the scope is recorded once synced")
	got, err := scope.Unmarshal(raw)
	require.NoError(t, err)
	assert.Equal(t, scope.Unscoped, got)
	require.NoError(t, st.Close())

	sc := scope.Scope{Namespaces: []string{"ns"}, TotalShards: 1}
	p, st = run(t, dir, sc, 1700000200)
	require.NotNil(t, p.handover)
	assert.Equal(t, &scope.Unscoped, p.handover.prev)
	p.Synced(liveSet{"u1": {}}.get, func() bool { return true })
	raw, _ = st.Setting(scopeSetting)
	got, err = scope.Unmarshal(raw)
	require.NoError(t, err)
	assert.Equal(t, sc, got)
	require.NoError(t, st.Close())

	p, _ = run(t, dir, sc, 1700000300)
	assert.Nil(t, p.handover, "same scope: nothing to hand over")
}
