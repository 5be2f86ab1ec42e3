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
	assert.Equal(t, "add", k.set("ns/a", "u1"))
	assert.Equal(t, "update", k.set("ns/a", "u1"))
	assert.Equal(t, "update", k.set("ns/a", "u2"), "same name, new pod")
	got, ok, err := k.GetByKey("ns/a")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, &podRef{Namespace: "ns", Name: "a", UID: "u2"}, got)
	k.remove("ns/a")
	_, ok, _ = k.GetByKey("ns/a")
	assert.False(t, ok)
	assert.Zero(t, k.len())
}
