package pipeline

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/store"
)

// heldUserErrors are the pods with a FailedMount mark held, not written.
func heldUserErrors(p *Pipeline) []types.UID {
	var out []types.UID
	for uid, e := range p.held.pods {
		if e.events != nil && e.events.userError {
			out = append(out, uid)
		}
	}
	return out
}

// heldPulls are the pods with image events held.
func heldPulls(p *Pipeline) []types.UID {
	var out []types.UID
	for uid, e := range p.held.pods {
		if e.events != nil && e.events.pulls != nil {
			out = append(out, uid)
		}
	}
	return out
}

// The held type alone: what is held, what can be folded without the pod,
// what a write clears, and what the sweep drops.
func TestHeldHoldFoldWrittenExpire(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	h := newHeld()
	notDone := lifecycle.State{Scheduled: 1}
	done := lifecycle.State{Scheduled: 1, Pulls: lifecycle.PullsDone}

	// An event for a pod not seen: held, but its pulls cannot be folded
	// without the pod's containers.
	assert.True(t, h.holdPull("u", t0, pulledEvent("a", 100)))
	in, containers := h.of("u")
	require.NotNil(t, in.Pulls)
	assert.Zero(t, containers)
	in, _ = h.foldable("u", notDone)
	assert.Nil(t, in.Pulls)
	in, _ = h.foldable("u", done)
	assert.NotNil(t, in.Pulls, "once its pulls are recorded, only a failure can count, which needs no containers")
	assert.Empty(t, h.unwritten(), "pulls wait for the pod's update, not for a retry")

	// The pod's update carries them: nothing to write, its containers kept
	// while its pulls are awaited.
	in, _ = h.of("u")
	h.written("u", in, notDone, 2, t0)
	in, containers = h.foldable("u", notDone)
	assert.NotNil(t, in.Pulls)
	assert.Equal(t, 2, containers)
	assert.False(t, h.holdPull("u", t0, pulledEvent("a", 100)), "the same event again: nothing to write")
	assert.True(t, h.holdPull("u", t0, pulledEvent("b", 100)))
	assert.Equal(t, []types.UID{"u"}, h.unwritten())

	// A mark is written by a write that carries it, not by one that does
	// not.
	h.holdUserError("u", t0)
	h.written("u", lifecycle.Inputs{Pulls: in.Pulls}, notDone, 2, t0)
	assert.Equal(t, []types.UID{"u"}, h.unwritten())
	in, _ = h.of("u")
	assert.True(t, in.UserError)
	h.written("u", lifecycle.Inputs{UserError: true}, notDone, 2, t0)
	assert.Empty(t, h.unwritten())
	in, _ = h.of("u")
	assert.False(t, in.UserError)
	assert.NotNil(t, in.Pulls, "the pulls stay until they are done")

	// Done: nothing left of the pod.
	h.written("u", in, done, 2, t0)
	assert.Empty(t, h.pods)

	// A pod awaiting its pulls holds its containers only; a pod without
	// containers, or with its pulls done, holds nothing.
	h.written("v", lifecycle.Inputs{}, notDone, 3, t0)
	assert.Equal(t, heldPod{containers: 3}, h.pods["v"])
	h.written("w", lifecycle.Inputs{}, notDone, 0, t0)
	h.written("x", lifecycle.Inputs{}, done, 3, t0)
	assert.Len(t, h.pods, 1)
	h.written("v", lifecycle.Inputs{}, done, 3, t0)
	assert.Empty(t, h.pods)

	// The sweep drops what waited too long for an unknown pod, and what
	// an unknown pod awaits; a known pod's inputs stay.
	h.holdUserError("unknown", t0)
	h.holdPull("known", t0, pulledEvent("a", 1))
	h.holdUserError("recent", t0.Add(heldTTL))
	h.written("forgotten", lifecycle.Inputs{}, notDone, 1, t0)
	known := func(uid types.UID) bool { return uid == "known" }
	h.expire(t0, known)
	assert.Len(t, h.pods, 3, "the unknown pod's mark waits until its TTL")
	h.expire(t0.Add(time.Second), known)
	assert.ElementsMatch(t, []types.UID{"known", "recent"}, keys(h.pods))
	h.forget("known")
	assert.ElementsMatch(t, []types.UID{"recent"}, keys(h.pods))
}

func keys(m map[types.UID]heldPod) []types.UID {
	var out []types.UID
	for k := range m {
		out = append(out, k)
	}
	return out
}

// What the pipeline holds is bounded: pods whose pulls are recorded, or
// that are gone, hold nothing; the events of pods that never come go after
// heldTTL; repeated events hold nothing more.
func TestHeldIsBounded(t *testing.T) {
	fail := 0
	p, st := pipelineOnMemory(t, &fail)
	live := liveSet{}
	p.Synced(live.get, func() bool { return true })
	const n = 100
	for i := range n {
		uid := types.UID(fmt.Sprintf("done-%d", i))
		live[uid] = struct{}{}
		require.NoError(t, p.Handle(runningPod(uid)))
		require.NoError(t, p.RecordImagePull(uid, pulledEvent("a", 100)))
		require.NoError(t, p.RecordImagePull(uid, pulledEvent("b", 100)))
	}
	assert.Empty(t, p.held.pods, "pulls recorded: nothing held")
	observedNow := func() [2]float64 {
		var n [2]float64
		for i, f := range []string{"pod_startup_sli", "image_pull"} {
			for _, h := range histograms(st, f) {
				n[i] += h[0]
			}
		}
		return n
	}
	observedBefore := observedNow()
	require.Equal(t, [2]float64{n, n}, observedBefore)

	// Pods whose second image never comes: one entry each, however many
	// times the first one's event is listed again.
	for i := range n {
		uid := types.UID(fmt.Sprintf("waiting-%d", i))
		live[uid] = struct{}{}
		require.NoError(t, p.Handle(runningPod(uid)))
		for range 10 {
			require.NoError(t, p.RecordImagePull(uid, pulledEvent("a", 100)))
		}
	}
	assert.Len(t, p.held.pods, n)
	assert.Empty(t, p.held.unwritten())
	// Half of them go: their pulls and start-ups with them, counted. The
	// others are given up lifecycle.PullsWait after their containers were
	// seen running, and not before.
	for i := range n / 2 {
		uid := types.UID(fmt.Sprintf("waiting-%d", i))
		delete(live, uid)
		p.Deleted(uid, "ns/"+string(uid), nil)
	}
	assert.Len(t, p.held.pods, n/2)
	assert.Equal(t, float64(n/2), skipped(st, "image_pull", "pulls_unknown"))
	assert.Equal(t, float64(n/2), skipped(st, "pod_startup", "pulls_unknown"))
	start := p.opts.Now()
	p.opts.Now = func() time.Time { return start.Add(lifecycle.PullsWait) }
	p.CheckTimeouts()
	assert.Len(t, p.held.pods, n/2, "not before lifecycle.PullsWait")
	p.opts.Now = func() time.Time { return start.Add(lifecycle.PullsWait + time.Second) }
	p.CheckTimeouts()
	assert.Empty(t, p.held.pods, "pods given up hold nothing")
	assert.Equal(t, float64(n), skipped(st, "image_pull", "pulls_unknown"))
	assert.Equal(t, float64(n), skipped(st, "pod_startup", "pulls_unknown"))
	// The missing event comes after all, and the pods update again:
	// nothing more is held or counted.
	for i := n / 2; i < n; i++ {
		uid := types.UID(fmt.Sprintf("waiting-%d", i))
		require.NoError(t, p.RecordImagePull(uid, pulledEvent("b", 100)))
		require.NoError(t, p.Handle(runningPod(uid)))
	}
	assert.Empty(t, p.held.pods)
	assert.Equal(t, float64(n), skipped(st, "pod_startup", "pulls_unknown"))
	assert.Equal(t, observedBefore, observedNow(), "only the pods whose pulls came are observed")
	for i := n / 2; i < n; i++ {
		uid := types.UID(fmt.Sprintf("waiting-%d", i))
		delete(live, uid)
		p.Deleted(uid, "ns/"+string(uid), nil)
	}
	assert.Equal(t, float64(n), skipped(st, "pod_startup", "pulls_unknown"), "once per pod")
	p.opts.Now = func() time.Time { return start }

	// Events of pods that never come (deleted long ago) wait heldTTL, and
	// bring no pod back.
	for i := range n {
		uid := types.UID(fmt.Sprintf("ghost-%d", i))
		require.NoError(t, p.RecordImagePull(uid, pulledEvent("a", 100)))
		require.NoError(t, p.MarkUserError(uid))
	}
	assert.Len(t, p.held.pods, n)
	p.Sweep()
	assert.Len(t, p.held.pods, n)
	now := p.opts.Now()
	p.opts.Now = func() time.Time { return now.Add(heldTTL + time.Second) }
	p.Sweep()
	assert.Empty(t, p.held.pods)
	assert.Equal(t, n, st.Len(), "only the live pods have records")
}

// storeWithoutMeta is a store that keeps no live metadata.
type storeWithoutMeta struct{ *store.Store }

func (storeWithoutMeta) Meta(types.UID) *store.PodMeta { return nil }

// The pipeline decides from what it holds, not from what it wrote to the
// store: a pod's pulls complete with the containers its update showed,
// whatever the store keeps of the pod.
func TestPullsCompleteWithoutTheStoresMeta(t *testing.T) {
	st, err := store.Open(store.Options{Dir: store.InMemory})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	p, err := New(storeWithoutMeta{st}, Options{Now: func() time.Time { return time.Unix(1700000100, 0) }})
	require.NoError(t, err)
	require.NoError(t, p.Handle(runningPod("u1")))
	require.NoError(t, p.RecordImagePull("u1", pulledEvent("a", 1500)))
	require.NoError(t, p.RecordImagePull("u1", pulledEvent("b", 500)))
	s, _ := st.Get("u1")
	assert.True(t, s.Pulls.Has(lifecycle.PullsDone))
	// Labelled as a pod never seen live, since the store gave no classes.
	assert.Equal(t, map[string][2]float64{"unknown,unknown,miss,": {1, 2}}, histograms(st, "image_pull"))
	assert.Empty(t, p.held.pods)
}

// A pod known from the state on disk but not seen since the exporter
// started: its events wait for its update, which records them with a mark
// held for it, in one write; the retries in between write nothing.
func TestInputsOfAPodNotSeenYetWaitForItsUpdate(t *testing.T) {
	fail := 0
	p, st := pipelineOnMemory(t, &fail)
	var logs strings.Builder
	p.log = slog.New(slog.NewTextHandler(&logs, nil))
	require.NoError(t, st.Apply(store.Change{UID: "u1", State: lifecycle.State{Scheduled: 1700000000}}))
	require.NoError(t, p.RecordImagePull("u1", lifecycle.PullEvent{Container: "spec.containers{a}", Result: lifecycle.PullFailed}))
	require.NoError(t, p.RecordImagePull("u1", pulledEvent("a", 1500)))
	require.NoError(t, p.RecordImagePull("u1", pulledEvent("b", 500)))
	assert.Zero(t, counter(st, "image_pulls_failed"), "not folded without the pod's containers")
	p.RetryFailed()
	assert.NotContains(t, logs.String(), "Retrying failed pod writes")
	assert.Equal(t, []types.UID{"u1"}, heldPulls(p))

	require.NoError(t, p.Handle(runningPod("u1")))
	assert.Equal(t, 1.0, counter(st, "image_pulls_failed"))
	assert.Equal(t, map[string][2]float64{"none,none,miss,": {1, 2}}, histograms(st, "image_pull"))
	assert.Empty(t, p.held.pods)
}

// A mark and image events that came before their pod are written with the
// pod's first update, in one change.
func TestAllInputsRideTheFirstUpdate(t *testing.T) {
	fail := 0
	p, st := pipelineOnMemory(t, &fail)
	require.NoError(t, p.MarkUserError("u1"))
	require.NoError(t, p.RecordImagePull("u1", pulledEvent("a", 1500)))
	require.NoError(t, p.RecordImagePull("u1", pulledEvent("b", 500)))
	assert.Empty(t, uids(st))
	fail = 1
	require.Error(t, p.Handle(runningPod("u1")))
	assert.Len(t, p.held.pods, 1, "kept for the retry")
	p.RetryFailed()
	s, ok := st.Get("u1")
	require.True(t, ok)
	assert.True(t, s.UserError)
	assert.True(t, s.Pulls.Has(lifecycle.PullsDone))
	assert.Len(t, histograms(st, "image_pull"), 1)
	assert.Empty(t, p.held.pods)
}
