package pipeline

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/store"
)

// runningPod is startedPod with two containers running since 1700000009,
// created at 1700000000 and seen by the watch at .400 after that second.
func runningPod(uid types.UID) *lifecycle.Pod {
	p := startedPod(uid, 1)
	p.CreationTimestamp = metav1.Unix(1700000000, 0)
	p.Containers, p.ContainersRunning, p.ContainersStarted = 2, 2, 1700000009
	p.Received = 1700000009400
	return p
}

func pulledEvent(container string, ms uint32) lifecycle.PullEvent {
	return lifecycle.PullEvent{Container: "spec.containers{" + container + "}", Result: lifecycle.PullDone, Ms: ms}
}

// histograms sums the count and sum of a store family's histograms, by
// their label values joined with ",".
func histograms(st *store.Store, family string) map[string][2]float64 {
	out := map[string][2]float64{}
	st.Aggregates(func(f string, labels []string, a *store.Aggregate) {
		if f == family && a.Histogram != nil {
			k := ""
			for _, l := range labels {
				k += l + ","
			}
			v := out[k]
			out[k] = [2]float64{v[0] + float64(a.Histogram.Count), v[1] + a.Histogram.Sum}
		}
	})
	return out
}

func counter(st *store.Store, family string) float64 {
	var n float64
	st.Aggregates(func(f string, _ []string, a *store.Aggregate) {
		if f == family {
			n += a.Value
		}
	})
	return n
}

func TestImagePullsReachTheStoreInEitherOrder(t *testing.T) {
	for _, eventsFirst := range []bool{true, false} {
		t.Run(map[bool]string{true: "events before the pod", false: "pod before the events"}[eventsFirst], func(t *testing.T) {
			fail := 0
			p, st := pipelineOnMemory(t, &fail)
			const uid = "u1"
			events := func() {
				require.NoError(t, p.RecordImagePull(uid, pulledEvent("a", 1500)))
				require.NoError(t, p.RecordImagePull(uid, lifecycle.PullEvent{Container: "spec.containers{b}", Result: lifecycle.PullCached}))
			}
			if eventsFirst {
				events()
				assert.Empty(t, uids(st), "an event does not bring an unknown pod into the store")
			}
			require.NoError(t, p.Handle(runningPod(uid)))
			if !eventsFirst {
				events()
			}
			// The same events and update again (a relist): nothing new.
			events()
			require.NoError(t, p.Handle(runningPod(uid)))

			assert.Equal(t, map[string][2]float64{"none,none,miss,": {1, 1.5}}, histograms(st, "image_pull"))
			got := histograms(st, "pod_startup_sli")
			require.Len(t, got, 1)
			assert.Equal(t, float64(1), got["none,none,false,"][0])
			assert.InDelta(t, 9.4-1.5, got["none,none,false,"][1], 1e-9)
			assert.Empty(t, heldPulls(p), "nothing held once the pulls are recorded")
		})
	}
}

func TestAFailedPullCountsOncePerPod(t *testing.T) {
	fail := 0
	p, st := pipelineOnMemory(t, &fail)
	const uid = "u1"
	require.NoError(t, p.Handle(runningPod(uid)))
	for range 3 {
		require.NoError(t, p.RecordImagePull(uid, lifecycle.PullEvent{Container: "spec.containers{a}", Result: lifecycle.PullFailed}))
	}
	assert.Equal(t, float64(1), counter(st, "image_pulls_failed"))
	require.NoError(t, p.RecordImagePull(uid, pulledEvent("a", 100)))
	require.NoError(t, p.RecordImagePull(uid, pulledEvent("b", 100)))
	assert.Empty(t, histograms(st, "pod_startup_sli"), "a pod with a failed pull is left out of the start-up SLI")
	assert.Len(t, histograms(st, "image_pull"), 1)
	s, _ := st.Get(uid)
	assert.True(t, s.Pulls.Has(lifecycle.StartupDone))
}

// A list (a restart, a relist) hands a pod's events over in name order: a
// failed pull that comes after every image's Pulled event, before the
// containers run, still counts, once, and keeps the pod out of the
// start-up SLI.
func TestAFailedPullListedAfterTheImagesCounts(t *testing.T) {
	fail := 0
	p, st := pipelineOnMemory(t, &fail)
	const uid = "u1"
	waiting := startedPod(uid, 1)
	waiting.CreationTimestamp = metav1.Unix(1700000000, 0)
	waiting.Containers = 2
	require.NoError(t, p.Handle(waiting))
	require.NoError(t, p.RecordImagePull(uid, pulledEvent("a", 100)))
	require.NoError(t, p.RecordImagePull(uid, pulledEvent("b", 100)))
	s, _ := st.Get(uid)
	require.True(t, s.Pulls.Has(lifecycle.PullsDone))
	for range 2 {
		require.NoError(t, p.RecordImagePull(uid, lifecycle.PullEvent{Container: "spec.containers{a}", Result: lifecycle.PullFailed}))
	}
	assert.Equal(t, float64(1), counter(st, "image_pulls_failed"))
	require.NoError(t, p.Handle(runningPod(uid)))
	assert.Empty(t, histograms(st, "pod_startup_sli"), "a pod with a failed pull is left out of the start-up SLI")
	assert.Equal(t, map[string][2]float64{"none,none,miss,": {1, 0.2}}, histograms(st, "image_pull"))
	assert.Empty(t, heldPulls(p), "nothing held once the pulls are recorded")

	// A restarted container's failed pull, after the start-up: not counted.
	const other = "u2"
	require.NoError(t, p.Handle(runningPod(other)))
	require.NoError(t, p.RecordImagePull(other, pulledEvent("a", 100)))
	require.NoError(t, p.RecordImagePull(other, pulledEvent("b", 100)))
	require.NoError(t, p.RecordImagePull(other, lifecycle.PullEvent{Container: "spec.containers{a}", Result: lifecycle.PullFailed}))
	assert.Equal(t, float64(1), counter(st, "image_pulls_failed"))
	assert.Len(t, histograms(st, "pod_startup_sli"), 1)
	assert.Empty(t, heldPulls(p))
}

// A pull event whose write fails (a full disk) is not delivered again:
// RetryFailed writes it.
func TestAFailedPullWriteIsRetried(t *testing.T) {
	fail := 0
	p, st := pipelineOnMemory(t, &fail)
	const uid = "u1"
	require.NoError(t, p.Handle(runningPod(uid)))
	require.NoError(t, p.RecordImagePull(uid, pulledEvent("a", 1000)))
	fail = 1
	require.Error(t, p.RecordImagePull(uid, pulledEvent("b", 1000)))
	assert.Empty(t, histograms(st, "image_pull"))
	p.RetryFailed()
	assert.Equal(t, map[string][2]float64{"none,none,miss,": {1, 2}}, histograms(st, "image_pull"))
	assert.Len(t, histograms(st, "pod_startup_sli"), 1)
}

// Events for a pod that never comes are dropped after the user-error wait.
func TestPullsOfAnUnknownPodExpire(t *testing.T) {
	fail := 0
	p, _ := pipelineOnMemory(t, &fail)
	require.NoError(t, p.RecordImagePull("ghost", pulledEvent("a", 1000)))
	p.Synced(liveSet{}.get, func() bool { return true })
	p.Sweep()
	assert.Len(t, heldPulls(p), 1, "still waiting")
	now := p.opts.Now()
	p.opts.Now = func() time.Time { return now.Add(heldTTL + time.Second) }
	p.Sweep()
	assert.Empty(t, heldPulls(p))
}
