package pipeline

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/scope"
	"github.com/podslo/podslo/sli"
	"github.com/podslo/podslo/store"
)

// pipelineOnMemory is a Pipeline over an in-memory store, its Apply failing
// while *fail > 0 (counting down).
func pipelineOnMemory(t *testing.T, fail *int) (*Pipeline, *store.Store) {
	t.Helper()
	st, err := store.Open(store.Options{Dir: store.InMemory})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	p, err := New(failingStore{st, fail}, Options{Scope: scope.Unscoped, Now: func() time.Time { return time.Unix(1700000100, 0) }})
	require.NoError(t, err)
	return p, st
}

// failingStore is a store whose Apply fails while *fail > 0 (counting
// down), as on a full disk.
type failingStore struct {
	*store.Store
	fail *int
}

func (s failingStore) Apply(c store.Change) error {
	if *s.fail > 0 {
		*s.fail--
		return errors.New("no space left on device")
	}
	return s.Store.Apply(c)
}

// startedPodNamed is pod uid named name, scheduled at 1700000000 and its
// sandbox ready `ready` seconds later, as the watch delivers it.
func startedPodNamed(name string, uid types.UID, ready int64) *lifecycle.Pod {
	return &lifecycle.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid},
		NodeName:   "n1",
		Conditions: []lifecycle.Condition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: 1700000000},
			{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: 1700000000 + ready},
		},
		RuntimeClass: "none",
		StorageClass: "none",
	}
}

func startedPod(uid types.UID, ready int64) *lifecycle.Pod {
	return startedPodNamed("web-"+string(uid), uid, ready)
}

// stuckPod is pod uid scheduled at 1700000000 and still without a sandbox.
func stuckPod(uid types.UID) *lifecycle.Pod {
	p := startedPod(uid, 0)
	p.Conditions = p.Conditions[:1]
	return p
}

// liveSet is the watch's view of which pods exist, for Synced.
type liveSet map[types.UID]struct{}

func (l liveSet) get() map[types.UID]struct{} { return l }

func uids(st *store.Store) []types.UID {
	var out []types.UID
	st.UIDs(func(uid types.UID) { out = append(out, uid) })
	return out
}

func creations(st *store.Store) (count uint64, sum float64) {
	st.Aggregates(func(family string, _ []string, a *store.Aggregate) {
		if family == "sandbox_creation" {
			count, sum = count+a.Histogram.Count, sum+a.Histogram.Sum
		}
	})
	return count, sum
}

func skipped(st *store.Store, name, reason string) float64 {
	var v float64
	st.Aggregates(func(family string, labels []string, a *store.Aggregate) {
		if family == sli.FamilySkipped && labels[0] == name && labels[1] == reason {
			v += a.Value
		}
	})
	return v
}

// Without an informer cache, a pod whose write failed is kept and retried
// by RetryFailed until it succeeds, exactly once.

// Without an informer cache, a pod whose write failed is kept and retried
// by RetryFailed until it succeeds, exactly once.
func TestRetryFailedRecordsAPodWhoseWriteFailed(t *testing.T) {
	fail := 2
	p, st := pipelineOnMemory(t, &fail)
	pod := startedPod("u1", 3)

	require.Error(t, p.Handle(pod))
	_, ok := st.Get("u1")
	assert.False(t, ok, "nothing written")
	p.RetryFailed() // fails again
	c, _ := creations(st)
	assert.Zero(t, c)

	p.RetryFailed()
	c, sum := creations(st)
	assert.Equal(t, uint64(1), c)
	assert.Equal(t, 3.0, sum)
	p.RetryFailed()
	p.RetryFailed()
	c, _ = creations(st)
	assert.Equal(t, uint64(1), c, "retried once, not again")
}

// An update that arrives after a failure replaces the retried object and,
// written, ends the retries.

// An update that arrives after a failure replaces the retried object and,
// written, ends the retries.
func TestUpdateAfterAFailedWriteEndsTheRetry(t *testing.T) {
	fail := 1
	p, st := pipelineOnMemory(t, &fail)
	require.Error(t, p.Handle(startedPod("u1", 3)))
	require.NoError(t, p.Handle(startedPod("u1", 3)))
	p.RetryFailed()
	c, _ := creations(st)
	assert.Equal(t, uint64(1), c)
	assert.Empty(t, p.failed)
}

// A relist that no longer has a pod delivers a tombstone holding only its
// key and UID: the pod's state is forgotten and its unmeasured termination
// counted as vanished. A pending failed write is made first.

// A relist that no longer has a pod delivers only its key and UID: the
// pod's state is forgotten and its unmeasured termination counted as
// vanished. A pending failed write is made first.
func TestPodDeletedWhileTheWatchWasDown(t *testing.T) {
	fail := 0
	p, st := pipelineOnMemory(t, &fail)
	p.Pod(startedPod("u1", 2))
	fail = 1
	p.Pod(startedPod("u2", 4))
	require.Len(t, p.failed, 1)

	p.Deleted("u1", "ns/web-u1", nil)
	p.Deleted("u2", "ns/web-u2", nil)
	assert.Empty(t, p.failed)
	for _, uid := range []types.UID{"u1", "u2"} {
		_, ok := st.Get(uid)
		assert.False(t, ok, "state of %s forgotten", uid)
	}
	c, sum := creations(st)
	assert.Equal(t, uint64(2), c, "u2's failed creation was recorded before it was forgotten")
	assert.Equal(t, 6.0, sum)
	assert.Equal(t, 2.0, skipped(st, "termination", "vanished"))
}

// A pod deleted and re-created under the same name while the watch was
// down: the watch hands on the old UID's deletion, then the new pod. The
// old UID is forgotten with its termination counted as vanished, never left
// to linger as a live pod (and to time out later).
func TestSameNameNewUIDForgetsTheOldPod(t *testing.T) {
	fail := 0
	p, st := pipelineOnMemory(t, &fail)
	p.Pod(startedPodNamed("web", "old", 2))
	p.Deleted("old", "ns/web", nil)
	p.Pod(startedPodNamed("web", "new", 3))

	_, ok := st.Get("old")
	assert.False(t, ok, "the old UID is forgotten")
	_, ok = st.Get("new")
	assert.True(t, ok)
	c, sum := creations(st)
	assert.Equal(t, uint64(2), c)
	assert.Equal(t, 5.0, sum)
	assert.Equal(t, 1.0, skipped(st, "termination", "vanished"))
	var perPod []types.UID
	st.Pods(func(uid types.UID, _ *lifecycle.State, _ *store.PodMeta) { perPod = append(perPod, uid) })
	assert.Equal(t, []types.UID{"new"}, perPod, "one per-pod series set, the new pod's")
}

// The periodic sweep forgets a record that has had no pod for two sweeps in
// a row, and never a live pod.
func TestSweepForgetsOrphansOnlyAfterTwoLooks(t *testing.T) {
	fail := 0
	p, st := pipelineOnMemory(t, &fail)
	p.Pod(startedPod("u1", 2))
	// An orphan: a record whose pod the watch no longer knows, as a failed
	// forget or a watch gap leaves behind.
	require.NoError(t, st.Apply(store.Change{UID: "orphan", State: lifecycle.State{Scheduled: 1700000000}}))
	p.live = liveSet{"u1": {}}.get

	assert.Zero(t, p.Sweep(), "first look: only suspected")
	_, ok := st.Get("orphan")
	assert.True(t, ok)
	assert.Equal(t, 1, p.Sweep(), "second look: forgotten")
	_, ok = st.Get("orphan")
	assert.False(t, ok)
	_, ok = st.Get("u1")
	assert.True(t, ok, "the live pod stays")
	assert.Equal(t, 1.0, skipped(st, "termination", "vanished"))
}

// A pod still waiting for its first sandbox that a sweep finds gone, its
// deletion unseen: gone by the sweep that first missed it, before its
// creation timeout it never timed out; after it, it may have, and its
// timeout is skipped as vanished, not lost (lifecycle.Swept).
func TestSweptStuckPodsTimeoutByTheFirstSweepThatMissedThem(t *testing.T) {
	now := time.Unix(1700000000+30, 0)
	st, err := store.Open(store.Options{Dir: store.InMemory})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	p, err := New(st, Options{Scope: scope.Unscoped, Now: func() time.Time { return now },
		Lifecycle: lifecycle.Config{SandboxCreationTimeout: time.Minute}})
	require.NoError(t, err)
	p.Pod(stuckPod("early"))
	p.live = liveSet{}.get
	p.Sweep() // at +30 s: suspected
	now = now.Add(2 * time.Minute)
	p.Pod(stuckPod("late"))
	p.Sweep() // at +150 s: "early" gone by +30 s, forgotten; "late" suspected
	assert.Zero(t, skipped(st, "sandbox_creation", "vanished"), "gone before its timeout")
	now = now.Add(time.Minute)
	p.Sweep() // at +210 s: "late" gone by +150 s, past its timeout
	assert.Equal(t, 1.0, skipped(st, "sandbox_creation", "vanished"))
	assert.Equal(t, 2.0, skipped(st, "termination", "vanished"))
	assert.Zero(t, st.Len())
}

// A live pod whose first write failed at start-up has no record yet, only a
// retry: the start-up sweep must not take a record of it for a pod deleted
// while podslo was down, and the retry observes its sandbox once.
func TestAFailedWriteNeverMakesALivePodLookDeleted(t *testing.T) {
	fail := 0
	p, st := pipelineOnMemory(t, &fail)
	// The pod was known before the restart: its record is on disk.
	require.NoError(t, st.Apply(store.Change{UID: "u1", State: lifecycle.State{Scheduled: 1700000000}}))
	fail = 1
	p.Pod(startedPod("u1", 4))
	require.Len(t, p.failed, 1)

	p.Synced(liveSet{"u1": {}}.get, func() bool { return true })
	assert.True(t, p.Ready())
	_, ok := st.Get("u1")
	assert.True(t, ok, "the live pod's record stays")
	p.RetryFailed()
	c, sum := creations(st)
	assert.Equal(t, uint64(1), c)
	assert.Equal(t, 4.0, sum)
	assert.Zero(t, skipped(st, "termination", "vanished"))
	p.RetryFailed()
	c, _ = creations(st)
	assert.Equal(t, uint64(1), c, "once")
}

// The start-up sweep forgets, at once, the pods deleted while podslo was
// down.
func TestSyncedForgetsPodsDeletedWhileDown(t *testing.T) {
	fail := 0
	p, st := pipelineOnMemory(t, &fail)
	require.NoError(t, st.Apply(store.Change{UID: "gone", State: lifecycle.State{Scheduled: 1700000000, FirstSandboxReady: 1700000002}}))
	p.Pod(startedPod("u1", 2))
	p.Synced(liveSet{"u1": {}}.get, func() bool { return true })
	assert.Equal(t, []types.UID{"u1"}, uids(st))
	assert.Equal(t, 1.0, skipped(st, "termination", "vanished"))
}

// A FailedMount event of a pod that was deleted never brings its record
// back; one that comes before its pod waits for it.
func TestLateUserErrorEventsDoNotResurrectPods(t *testing.T) {
	fail := 0
	p, st := pipelineOnMemory(t, &fail)
	pod := startedPod("gone", 2)
	p.Pod(pod)
	p.Deleted(pod.UID, "ns/web-gone", pod)
	require.NoError(t, p.MarkUserError("gone"))
	assert.Empty(t, uids(st), "no record for the deleted pod")

	// An event ahead of its pod: the pod, when it comes, is a user error.
	require.NoError(t, p.MarkUserError("early"))
	assert.Empty(t, uids(st))
	p.Pod(startedPod("early", 9))
	got, ok := st.Get("early")
	require.True(t, ok)
	assert.True(t, got.UserError)
	assert.True(t, got.Excluded, "excluded from the creation SLI, not observed")
	c, _ := creations(st)
	assert.Equal(t, uint64(1), c, "only the deleted pod's creation")

	// The waiting mark of the deleted pod expires in a sweep.
	p.opts.Now = func() time.Time { return time.Unix(1700000100, 0).Add(heldTTL + time.Second) }
	p.live = liveSet{"early": {}}.get
	p.Sweep()
	assert.Empty(t, heldUserErrors(p))
	assert.Equal(t, []types.UID{"early"}, uids(st))
}

// A deletion whose write fails (a full disk) is retried, and the pod's end
// is counted once when it succeeds.
func TestAFailedDeletionIsRetried(t *testing.T) {
	fail := 0
	p, st := pipelineOnMemory(t, &fail)
	pod := startedPod("u1", 2)
	p.Pod(pod)
	fail = 2
	p.Deleted(pod.UID, "ns/web-u1", pod)
	require.Len(t, p.failed, 1)
	p.live = liveSet{}.get
	assert.Zero(t, p.sweep(true), "a pending deletion is RetryFailed's")
	p.RetryFailed() // fails again
	_, ok := st.Get("u1")
	assert.True(t, ok)
	p.RetryFailed()
	_, ok = st.Get("u1")
	assert.False(t, ok)
	assert.Empty(t, p.failed)
	assert.Equal(t, 1.0, skipped(st, "termination", "vanished"))
	p.RetryFailed()
	p.Sweep()
	p.Sweep()
	assert.Equal(t, 1.0, skipped(st, "termination", "vanished"), "once")
}

func TestHandleRecordsObservationWithDimensions(t *testing.T) {
	st, err := store.Open(store.Options{Dir: store.InMemory})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	now := time.Unix(1700000100, 0)
	p, err := New(st, Options{
		PodLabels:       []string{"app"},
		HistogramLabels: sli.HistogramLabels{{Name: "team", Source: sli.FromLabel, Key: "team"}, {Name: "tier", Source: sli.FromAnnotation, Key: "tier"}},
		Scope:           scope.Unscoped,
		Now:             func() time.Time { return now },
	})
	require.NoError(t, err)
	pod := startedPodNamed("web", "u1", 4)
	pod.Labels = map[string]string{"app": "web", "team": "pay"}
	pod.Annotations = map[string]string{"tier": "gold"}
	pod.RuntimeClass = "kata"
	require.NoError(t, p.Handle(pod))
	require.NoError(t, p.Handle(pod), "a second identical update changes nothing")

	type series struct {
		family string
		labels []string
		count  uint64
		sum    float64
		ex     store.Exemplar
	}
	// 4s falls in the le="4" bucket, index 7.
	var got []series
	st.Aggregates(func(family string, labels []string, a *store.Aggregate) {
		if family == "sandbox_creation{team,tier}" {
			got = append(got, series{family, labels, a.Histogram.Count, a.Histogram.Sum, a.Exemplars[7]})
		}
	})
	assert.Equal(t, []series{{"sandbox_creation{team,tier}", []string{"kata", "none", "pay", "gold"}, 1, 4, store.Exemplar{Namespace: "ns", Pod: "web", Value: 4, Time: now}}}, got)
	var metas []store.PodMeta
	st.Pods(func(_ types.UID, _ *lifecycle.State, m *store.PodMeta) { metas = append(metas, *m) })
	assert.Equal(t, []store.PodMeta{{Namespace: "ns", Name: "web", Node: "n1", RuntimeClass: "kata", StorageClass: "none", PodLabels: []string{"web"}, HistogramLabels: []string{"pay", "gold"}}}, metas)
}

// The chaos run found this: on a full disk, a pod's deletion request and
// its sandbox going away fail to write; then the final delete (grace 0)
// moves deletionTimestamp to the removal. Retried from that object alone,
// the termination looked like a sandbox gone before the request
// (terminated_before_delete). The first request is kept, and the
// termination is measured from it, once.
func TestFailedWritesKeepTheFirstDeletionRequest(t *testing.T) {
	fail := 0
	p, st := pipelineOnMemory(t, &fail)
	pod := startedPod("u1", 2)
	p.Pod(pod)

	deleting := startedPod("u1", 2)
	at := metav1.NewTime(time.Unix(1700000090, 0)) // requested at 60 with grace 30
	grace := int64(30)
	deleting.DeletionTimestamp, deleting.DeletionGracePeriodSeconds = &at, &grace
	fail = 100
	p.Pod(deleting)
	down := startedPod("u1", 2)
	down.DeletionTimestamp, down.DeletionGracePeriodSeconds = &at, &grace
	down.Conditions[1] = lifecycle.Condition{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionFalse, LastTransitionTime: 1700000064}
	p.Pod(down)
	final := startedPod("u1", 2)
	removal := metav1.NewTime(time.Unix(1700000066, 0))
	zero := int64(0)
	final.DeletionTimestamp, final.DeletionGracePeriodSeconds = &removal, &zero
	final.Conditions[1] = down.Conditions[1]
	p.Deleted("u1", "ns/web-u1", final)
	require.Len(t, p.failed, 1)

	fail = 0
	p.RetryFailed()
	assert.Empty(t, p.failed)
	var count uint64
	var sum float64
	st.Aggregates(func(family string, _ []string, a *store.Aggregate) {
		if family == "termination" {
			count, sum = a.Histogram.Count, a.Histogram.Sum
		}
	})
	assert.Equal(t, uint64(1), count)
	assert.Equal(t, 4.0, sum, "from the request at 60 to the sandbox down at 64")
	assert.Zero(t, skipped(st, "termination", "terminated_before_delete"))
	assert.Zero(t, skipped(st, "termination", "vanished"))
}

// TestTimeoutsWaitForACurrentWatch: while the watch is not current (an API
// server outage), a pod past its creation timeout is not counted, since its
// sandbox may have become ready unseen; once current again, the update that
// came meanwhile decides: a sandbox ready in time is a creation, not a
// timeout.
func TestTimeoutsWaitForACurrentWatch(t *testing.T) {
	fail := 0
	p, st := pipelineOnMemory(t, &fail)
	// Scheduled at 1700000000 with no sandbox; now is 100s later, past a
	// 60s timeout.
	p.opts.Lifecycle.SandboxCreationTimeout = 60 * time.Second
	stuck := stuckPod("u1")
	require.NoError(t, p.Handle(stuck))
	current := false
	live := liveSet{"u1": {}}
	p.Synced(live.get, func() bool { return current })
	timeouts := func() float64 { return timeoutsIn(st) }

	p.CheckTimeouts()
	assert.Zero(t, timeouts(), "a timeout counted while the watch was not current")
	// The relist brings the sandbox, ready 30s after scheduling.
	require.NoError(t, p.Handle(startedPod("u1", 30)))
	current = true
	p.CheckTimeouts()
	assert.Zero(t, timeouts(), "the sandbox was ready within the timeout")
	count, sum := creations(st)
	assert.Equal(t, uint64(1), count)
	assert.Equal(t, 30.0, sum)

	// A pod still stuck when the watch is current again times out then.
	stuck2 := stuckPod("u2")
	live["u2"] = struct{}{}
	require.NoError(t, p.Handle(stuck2))
	current = false
	p.CheckTimeouts()
	assert.Zero(t, timeouts())
	current = true
	p.CheckTimeouts()
	assert.Equal(t, 1.0, timeouts())
}

// A FailedMount mark whose write fails (a full disk) is not lost: the
// event is not delivered again, so the mark waits in memory, the timeout
// check counts the stuck pod as the user error it is, not as a timeout,
// and a retry writes the mark.
func TestAFailedUserErrorMarkIsKept(t *testing.T) {
	fail := 0
	p, st := pipelineOnMemory(t, &fail)
	p.opts.Lifecycle.SandboxCreationTimeout = 60 * time.Second
	counter := func(name string) float64 {
		var v float64
		st.Aggregates(func(family string, _ []string, a *store.Aggregate) {
			if family == name {
				v += a.Value
			}
		})
		return v
	}
	stuckPod := func(uid types.UID) *lifecycle.Pod {
		pod := startedPod(uid, 0)
		pod.Conditions = pod.Conditions[:1]
		return pod
	}
	// Scheduled at 1700000000, recorded while the disk had space.
	require.NoError(t, p.Handle(stuckPod("u1")))
	require.NoError(t, p.Handle(stuckPod("u2")))
	p.Synced(liveSet{"u1": {}, "u2": {}}.get, func() bool { return true })

	// u2's mark fails, and the retry writes it.
	fail = 1
	require.Error(t, p.MarkUserError("u2"))
	got, _ := st.Get("u2")
	require.False(t, got.UserError, "the mark is not in the store")
	p.RetryFailed()
	got, _ = st.Get("u2")
	assert.True(t, got.UserError && !got.TimedOut, "%+v", got)
	assert.Empty(t, heldUserErrors(p))

	// u1's mark fails, and the check past the timeout sees it all the
	// same: both pods are excluded, neither is a timeout.
	fail = 1
	require.Error(t, p.MarkUserError("u1"))
	p.CheckTimeouts()
	assert.Zero(t, counter("sandbox_creation_timeouts"))
	assert.Equal(t, 2.0, counter("sandbox_creations_excluded"))
	got, _ = st.Get("u1")
	assert.True(t, got.UserError && got.Excluded && got.TimedOut, "%+v", got)
	assert.Empty(t, heldUserErrors(p))

	// A mark held for a known pod does not expire in a sweep.
	require.NoError(t, p.Handle(stuckPod("u3")))
	fail = 1
	require.Error(t, p.MarkUserError("u3"))
	p.opts.Now = func() time.Time { return time.Unix(1700000100, 0).Add(heldTTL + time.Second) }
	p.live = liveSet{"u1": {}, "u2": {}, "u3": {}}.get
	p.Sweep()
	assert.Contains(t, heldUserErrors(p), types.UID("u3"))
	// Nor is it lost when the pod's next update writes first.
	require.NoError(t, p.Handle(stuckPod("u3")))
	got, _ = st.Get("u3")
	assert.True(t, got.UserError, "%+v", got)
	assert.Empty(t, heldUserErrors(p))
}

// A timeout names no pod in its series, so the log names it: once, when it
// is recorded, not for a write that failed and is retried.
func TestTimeoutsAreLoggedOnceRecorded(t *testing.T) {
	fail := 0
	p, _ := pipelineOnMemory(t, &fail)
	var logs strings.Builder
	p.log = slog.New(slog.NewTextHandler(&logs, nil))
	p.opts.Lifecycle.SandboxCreationTimeout = 60 * time.Second
	stuck := stuckPod("u1")
	require.NoError(t, p.Handle(stuck))
	p.Synced(liveSet{"u1": {}}.get, func() bool { return true })

	fail = 1
	p.CheckTimeouts()
	assert.NotContains(t, logs.String(), "Sandbox creation timed out", "logged before it was recorded")
	p.CheckTimeouts()
	p.CheckTimeouts()
	assert.Equal(t, 1, strings.Count(logs.String(), `msg="Sandbox creation timed out" pod=ns/web-u1 uid=u1`), logs.String())
}

// At debug level every recorded sample is logged with its pod's UID and its
// metric's name (the chaos run finds a family's pod by it), once recorded.
func TestRecordedSamplesAreLoggedAtDebug(t *testing.T) {
	fail := 0
	p, _ := pipelineOnMemory(t, &fail)
	var logs strings.Builder
	p.log = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("component", "pipeline")
	p.opts.Lifecycle.SandboxCreationTimeout = 60 * time.Second
	require.NoError(t, p.Handle(stuckPod("u1")))
	p.Synced(liveSet{"u1": {}}.get, func() bool { return true })
	fail = 1
	p.CheckTimeouts()
	assert.NotContains(t, logs.String(), "msg=Recorded", "logged before it was recorded")
	fail = 0
	p.CheckTimeouts()
	assert.Equal(t, 1, strings.Count(logs.String(), `msg=Recorded component=pipeline uid=u1 family=podslo_sandbox_creation_timeouts_total labels=`), logs.String())

	// Not at info level.
	logs.Reset()
	p.log = slog.New(slog.NewTextHandler(&logs, nil))
	require.NoError(t, p.Handle(stuckPod("u2")))
	p.Synced(liveSet{"u1": {}, "u2": {}}.get, func() bool { return true })
	p.CheckTimeouts()
	assert.Contains(t, logs.String(), "Sandbox creation timed out")
	assert.NotContains(t, logs.String(), "msg=Recorded")
}

func timeoutsIn(st *store.Store) float64 {
	var v float64
	st.Aggregates(func(family string, _ []string, a *store.Aggregate) {
		if family == "sandbox_creation_timeouts" {
			v += a.Value
		}
	})
	return v
}

// A stuck pod deleted before its timeout, its deletion refused by a full
// disk: the check that runs past the deadline must not take the stored
// state, still pending, for the pod's (the chaos run's doubled exclusion).
func TestNoTimeoutFromAStateWhoseNewerObjectFailedToWrite(t *testing.T) {
	fail := 0
	p, st := pipelineOnMemory(t, &fail)
	p.opts.Lifecycle.SandboxCreationTimeout = 60 * time.Second
	stuck := stuckPod("u1")
	require.NoError(t, p.Handle(stuck))
	live := liveSet{"u1": {}}
	p.Synced(live.get, func() bool { return true })

	// Deleted 30 s after scheduling, 70 s before now: the write fails.
	deleting := *stuck
	at := metav1.NewTime(time.Unix(1700000030, 0))
	deleting.DeletionTimestamp = &at
	fail = 1
	p.Pod(&deleting)
	require.Len(t, p.failed, 1)
	p.CheckTimeouts()
	assert.Zero(t, timeoutsIn(st), "judged from the state the deletion did not reach")

	p.RetryFailed()
	require.Empty(t, p.failed)
	p.CheckTimeouts()
	delete(live, "u1")
	p.Deleted("u1", "ns/web-u1", &deleting)
	p.CheckTimeouts()
	assert.Zero(t, timeoutsIn(st))
}

// A record whose pod no longer exists, which the sweep failed to forget (a
// deletion that failed to write before a restart): no timeout is concluded
// for it, and the next sweeps forget it.
func TestNoTimeoutForARecordWithoutAPod(t *testing.T) {
	fail := 0
	p, st := pipelineOnMemory(t, &fail)
	p.opts.Lifecycle.SandboxCreationTimeout = 60 * time.Second
	require.NoError(t, st.Apply(store.Change{UID: "gone", State: lifecycle.State{Scheduled: 1700000000},
		Meta: &store.PodMeta{Namespace: "ns", Name: "gone", RuntimeClass: "none", StorageClass: "none"}}))
	fail = 1
	p.Synced(liveSet{}.get, func() bool { return true })
	_, ok := st.Get("gone")
	require.True(t, ok, "the failed sweep keeps the record")
	p.CheckTimeouts()
	assert.Zero(t, timeoutsIn(st))
	p.Sweep()
	_, ok = st.Get("gone")
	assert.False(t, ok)
	assert.Zero(t, timeoutsIn(st))
	assert.Equal(t, 1.0, skipped(st, "termination", "vanished"))
}

// TestFailedWritesKeepTheFirstReceiveTime: a pod's update whose write
// failed on a full disk is handled before the newer update that comes
// while the disk is still full, so that the transitions it first showed
// keep its receive time: the sandbox timed by the watch at 2.2 s, not at
// the 9 s of the later update, which is outside the condition's second
// and would give whole seconds (issue 35, item 4).
func TestFailedWritesKeepTheFirstReceiveTime(t *testing.T) {
	fail := 0
	p, st := pipelineOnMemory(t, &fail)
	scheduled := stuckPod("u1")
	scheduled.Received = 1700000000_100
	require.NoError(t, p.Handle(scheduled))

	ready := startedPod("u1", 2)
	ready.Received = 1700000002_300
	fail = 2
	require.Error(t, p.Handle(ready))
	later := startedPod("u1", 2)
	later.Received = 1700000009_000
	require.Error(t, p.Handle(later), "the first object's replay fails too")
	_, sum := creations(st)
	assert.Zero(t, sum)
	require.NoError(t, p.Handle(later), "the disk has room again")
	count, sum := creations(st)
	assert.Equal(t, uint64(1), count)
	assert.InDelta(t, 2.2, sum, 1e-9, "timed by the first update's receive time")
	assert.Empty(t, p.failed)
	// RetryFailed replays it the same way.
	fail = 0
	p2, st2 := pipelineOnMemory(t, &fail)
	require.NoError(t, p2.Handle(scheduled))
	fail = 2
	require.Error(t, p2.Handle(ready))
	require.Error(t, p2.Handle(later))
	p2.RetryFailed()
	count, sum = creations(st2)
	assert.Equal(t, uint64(1), count)
	assert.InDelta(t, 2.2, sum, 1e-9)
	assert.Empty(t, p2.failed)
}
