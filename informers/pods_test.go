package informers

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/store"
)

// watcherOnMemory is a Watcher over an in-memory store, its Apply failing
// while *fail > 0 (counting down).
func watcherOnMemory(t *testing.T, fail *int) (*Watcher, *store.Store) {
	t.Helper()
	st, err := store.Open(store.Options{Dir: store.InMemory})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	w, err := New(fake.NewClientset(), st, Options{Now: func() time.Time { return time.Unix(1700000100, 0) }})
	require.NoError(t, err)
	w.classes = *resolver(t)
	w.apply = func(c store.Change) error {
		if *fail > 0 {
			*fail--
			return errors.New("no space left on device")
		}
		return st.Apply(c)
	}
	return w, st
}

// startedPod is pod uid, scheduled at 1700000000 and its sandbox ready
// `ready` seconds later.
func startedPod(t *testing.T, w *Watcher, uid types.UID, ready int64) *lifecycle.Pod {
	t.Helper()
	p, err := w.trim.transform(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-" + string(uid), UID: uid},
		Spec:       corev1.PodSpec{NodeName: "n1"},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(time.Unix(1700000000, 0))},
			{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(time.Unix(1700000000+ready, 0))},
		}},
	})
	require.NoError(t, err)
	return p.(*lifecycle.Pod)
}

func creations(st *store.Store) (count uint64, sum float64) {
	st.Aggregates(func(family string, _ []string, a *store.Aggregate) {
		if family == lifecycle.FamilySandboxCreation {
			count, sum = count+a.Histogram.Count, sum+a.Histogram.Sum
		}
	})
	return count, sum
}

func skipped(st *store.Store, sli, reason string) float64 {
	var v float64
	st.Aggregates(func(family string, labels []string, a *store.Aggregate) {
		if family == lifecycle.FamilySkipped && labels[0] == sli && labels[1] == reason {
			v += a.Value
		}
	})
	return v
}

// Without an informer cache, a pod whose write failed is kept and retried
// by RetryFailed until it succeeds, exactly once.
func TestRetryFailedRecordsAPodWhoseWriteFailed(t *testing.T) {
	fail := 2
	w, st := watcherOnMemory(t, &fail)
	pod := startedPod(t, w, "u1", 3)

	require.Error(t, w.Handle(pod))
	_, ok := st.Get("u1")
	assert.False(t, ok, "nothing written")
	w.RetryFailed() // fails again
	c, _ := creations(st)
	assert.Zero(t, c)

	w.RetryFailed()
	c, sum := creations(st)
	assert.Equal(t, uint64(1), c)
	assert.Equal(t, 3.0, sum)
	w.RetryFailed()
	w.RetryFailed()
	c, _ = creations(st)
	assert.Equal(t, uint64(1), c, "retried once, not again")
}

// An update that arrives after a failure replaces the retried object and,
// written, ends the retries.
func TestUpdateAfterAFailedWriteEndsTheRetry(t *testing.T) {
	fail := 1
	w, st := watcherOnMemory(t, &fail)
	require.Error(t, w.Handle(startedPod(t, w, "u1", 3)))
	require.NoError(t, w.Handle(startedPod(t, w, "u1", 3)))
	w.RetryFailed()
	c, _ := creations(st)
	assert.Equal(t, uint64(1), c)
	assert.Empty(t, w.failed)
}

// A relist that no longer has a pod delivers a tombstone holding only its
// key and UID: the pod's state is forgotten and its unmeasured termination
// counted as vanished. A pending failed write is made first.
func TestPodDeletedWhileTheWatchWasDown(t *testing.T) {
	fail := 0
	w, st := watcherOnMemory(t, &fail)
	keys := newPodKeys()
	pod := startedPod(t, w, "u1", 2)
	w.processPodDelta(keys, cache.Delta{Type: cache.Added, Object: pod})
	fail = 1
	w.processPodDelta(keys, cache.Delta{Type: cache.Added, Object: startedPod(t, w, "u2", 4)})
	require.Len(t, w.failed, 1)
	assert.ElementsMatch(t, []string{"ns/web-u1", "ns/web-u2"}, keys.ListKeys())

	for _, key := range []string{"ns/web-u1", "ns/web-u2"} {
		ref, ok, err := keys.GetByKey(key)
		require.NoError(t, err)
		require.True(t, ok)
		w.processPodDelta(keys, cache.Delta{Type: cache.Deleted, Object: cache.DeletedFinalStateUnknown{Key: key, Obj: ref}})
	}
	assert.Empty(t, keys.ListKeys())
	assert.Empty(t, w.failed)
	for _, uid := range []types.UID{"u1", "u2"} {
		_, ok := st.Get(uid)
		assert.False(t, ok, "state of %s forgotten", uid)
	}
	c, sum := creations(st)
	assert.Equal(t, uint64(2), c, "u2's failed creation was recorded before it was forgotten")
	assert.Equal(t, 6.0, sum)
	assert.Equal(t, 2.0, skipped(st, "termination", "vanished"))
}

func TestPodKeys(t *testing.T) {
	k := newPodKeys()
	set := func(key string, uid types.UID) []any { e, was := k.set(key, uid); return []any{e, was} }
	assert.Equal(t, []any{"add", types.UID("")}, set("ns/a", "u1"))
	assert.Equal(t, []any{"update", types.UID("u1")}, set("ns/a", "u1"))
	assert.Equal(t, []any{"update", types.UID("u1")}, set("ns/a", "u2"), "same name, new pod")
	assert.Equal(t, map[types.UID]struct{}{"u2": {}}, k.live())
	got, ok, err := k.GetByKey("ns/a")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, &podRef{Namespace: "ns", Name: "a", UID: "u2"}, got)
	k.remove("ns/a")
	_, ok, _ = k.GetByKey("ns/a")
	assert.False(t, ok)
	assert.Zero(t, k.len())
}

// startedPodNamed is startedPod under another name.
func startedPodNamed(t *testing.T, w *Watcher, name string, uid types.UID, ready int64) *lifecycle.Pod {
	t.Helper()
	p := startedPod(t, w, uid, ready)
	p.Name = name
	return p
}

func live(w *Watcher, keys *podKeys) {
	w.mu.Lock()
	w.keys = keys
	w.mu.Unlock()
}

// A pod deleted and re-created under the same name while the watch was
// down comes back in the relist as Replaced with a new UID: the old UID is
// the deleted pod, forgotten and its termination counted as vanished, never
// left to linger as a live pod (and to time out later).
func TestSameNameNewUIDInARelistForgetsTheOldPod(t *testing.T) {
	fail := 0
	w, st := watcherOnMemory(t, &fail)
	keys := newPodKeys()
	live(w, keys)
	var events []string
	w.opts.OnEvent = func(_, e string) { events = append(events, e) }
	w.processPodDelta(keys, cache.Delta{Type: cache.Added, Object: startedPodNamed(t, w, "web", "old", 2)})
	w.processPodDelta(keys, cache.Delta{Type: cache.Replaced, Object: startedPodNamed(t, w, "web", "new", 3)})

	_, ok := st.Get("old")
	assert.False(t, ok, "the old UID is forgotten")
	_, ok = st.Get("new")
	assert.True(t, ok)
	assert.Equal(t, []string{"add", "delete", "add"}, events)
	c, sum := creations(st)
	assert.Equal(t, uint64(2), c)
	assert.Equal(t, 5.0, sum)
	assert.Equal(t, 1.0, skipped(st, "termination", "vanished"))
	var perPod []types.UID
	st.Pods(func(uid types.UID, _ *lifecycle.State, _ *store.PodMeta) { perPod = append(perPod, uid) })
	assert.Equal(t, []types.UID{"new"}, perPod, "one per-pod series set, the new pod's")
}

// The periodic sweep forgets a record that has had no pod for two sweeps in
// a row, and never a live pod, even one whose writes fail.
func TestSweepForgetsOrphansOnlyAfterTwoLooks(t *testing.T) {
	fail := 0
	w, st := watcherOnMemory(t, &fail)
	keys := newPodKeys()
	live(w, keys)
	w.processPodDelta(keys, cache.Delta{Type: cache.Added, Object: startedPod(t, w, "u1", 2)})
	// An orphan: a record whose pod the watch no longer knows, as a failed
	// forget or a watch gap leaves behind.
	require.NoError(t, st.Apply(store.Change{UID: "orphan", State: lifecycle.State{Scheduled: 1700000000}}))

	assert.Zero(t, w.Sweep(), "first look: only suspected")
	_, ok := st.Get("orphan")
	assert.True(t, ok)
	assert.Equal(t, 1, w.Sweep(), "second look: forgotten")
	_, ok = st.Get("orphan")
	assert.False(t, ok)
	_, ok = st.Get("u1")
	assert.True(t, ok, "the live pod stays")
	assert.Equal(t, 1.0, skipped(st, "termination", "vanished"))
}

// A live pod whose first write failed at start-up has no record yet, only a
// retry: the start-up sweep must not take a record of it for a pod deleted
// while podslo was down, and the retry observes its sandbox once.
func TestAFailedWriteNeverMakesALivePodLookDeleted(t *testing.T) {
	fail := 0
	w, st := watcherOnMemory(t, &fail)
	keys := newPodKeys()
	live(w, keys)
	// The pod was known before the restart: its record is on disk.
	require.NoError(t, st.Apply(store.Change{UID: "u1", State: lifecycle.State{Scheduled: 1700000000}}))
	fail = 1
	w.processPodDelta(keys, cache.Delta{Type: cache.Replaced, Object: startedPod(t, w, "u1", 4)})
	require.Len(t, w.failed, 1)

	assert.Zero(t, w.sweep(true), "start-up sweep")
	_, ok := st.Get("u1")
	assert.True(t, ok, "the live pod's record stays")
	w.RetryFailed()
	c, sum := creations(st)
	assert.Equal(t, uint64(1), c)
	assert.Equal(t, 4.0, sum)
	assert.Zero(t, skipped(st, "termination", "vanished"))
	w.RetryFailed()
	c, _ = creations(st)
	assert.Equal(t, uint64(1), c, "once")
}

// A FailedMount event of a pod that was deleted never brings its record
// back; one that comes before its pod waits for it.
func TestLateUserErrorEventsDoNotResurrectPods(t *testing.T) {
	fail := 0
	w, st := watcherOnMemory(t, &fail)
	keys := newPodKeys()
	live(w, keys)
	pod := startedPod(t, w, "gone", 2)
	w.processPodDelta(keys, cache.Delta{Type: cache.Added, Object: pod})
	w.processPodDelta(keys, cache.Delta{Type: cache.Deleted, Object: pod})
	require.NoError(t, w.MarkUserError("gone"))
	assert.Empty(t, uids(st), "no record for the deleted pod")

	// An event ahead of its pod: the pod, when it comes, is a user error.
	require.NoError(t, w.MarkUserError("early"))
	assert.Empty(t, uids(st))
	w.processPodDelta(keys, cache.Delta{Type: cache.Added, Object: startedPod(t, w, "early", 9)})
	got, ok := st.Get("early")
	require.True(t, ok)
	assert.True(t, got.UserError)
	assert.True(t, got.Excluded, "excluded from the creation SLI, not observed")
	c, _ := creations(st)
	assert.Equal(t, uint64(1), c, "only the deleted pod's creation")

	// The waiting mark of the deleted pod expires in a sweep.
	w.opts.Now = func() time.Time { return time.Unix(1700000100, 0).Add(pendingUserErrorTTL + time.Second) }
	w.Sweep()
	assert.Empty(t, w.pendingUserErrors)
	assert.Equal(t, []types.UID{"early"}, uids(st))
}

// A deletion whose write fails (a full disk) is retried, and the pod's end
// is counted once when it succeeds.
func TestAFailedDeletionIsRetried(t *testing.T) {
	fail := 0
	w, st := watcherOnMemory(t, &fail)
	keys := newPodKeys()
	live(w, keys)
	pod := startedPod(t, w, "u1", 2)
	w.processPodDelta(keys, cache.Delta{Type: cache.Added, Object: pod})
	fail = 2
	w.processPodDelta(keys, cache.Delta{Type: cache.Deleted, Object: pod})
	require.Len(t, w.failed, 1)
	assert.Zero(t, w.sweep(true), "a pending deletion is RetryFailed's")
	w.RetryFailed() // fails again
	_, ok := st.Get("u1")
	assert.True(t, ok)
	w.RetryFailed()
	_, ok = st.Get("u1")
	assert.False(t, ok)
	assert.Empty(t, w.failed)
	assert.Equal(t, 1.0, skipped(st, "termination", "vanished"))
	w.RetryFailed()
	w.Sweep()
	w.Sweep()
	assert.Equal(t, 1.0, skipped(st, "termination", "vanished"), "once")
}

func uids(st *store.Store) []types.UID {
	var out []types.UID
	st.UIDs(func(uid types.UID) { out = append(out, uid) })
	return out
}
