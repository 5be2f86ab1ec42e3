package exporter

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/podslo/podslo/internal/testenv"
)

// The code before issue 33 reshaped the pod record (field 22, startup,
// held one of three quantities in turn; fields 25 and 26 did not exist).
const (
	beforeRecordTableVersion = "main-before-issue-33"
	beforeRecordTableCommit  = "208429b505f14edc765ad8951a2d72ef6167b8c9"
)

// TestStartupInFlightAcrossRollback hands a state back and forth between
// the code before issue 33 and this release while a pod's start-up SLI
// waits for its last image: each takes over the other's record of a
// start-up whose end was seen and whose pulls were not yet in, finishes it
// once with the end the other recorded (a misread end would make it
// negative, and skipped), and neither counts it again.
func TestStartupInFlightAcrossRollback(t *testing.T) {
	env := testenv.Start(t)
	old := testenv.ReleaseBinary(t, beforeRecordTableVersion, beforeRecordTableCommit)
	bin := testenv.PodsloBinary(t)
	state := t.TempDir()
	c := env.Client
	const ns = "rollback"
	testenv.CreateNamespace(t, c, ns, nil)
	stateless := map[string]string{"runtime_class": "none", "storage_class": "none", "stateful": "false"}
	// The code before issue 33 has the names before 0.2.0 renamed them.
	type names struct{ watch, startup string }
	before := names{"podslo_pod_watch_current", "podslo_pod_startup_sli_duration_seconds"}
	this := names{"podslo_informer_pods_watch_current", "podslo_startup_sli_duration_seconds"}
	applied := func(url string) float64 {
		return counterValue(t, url, "podslo_store_operations_total", map[string]string{"operation": "apply", "result": "success"})
	}

	// endSeen lets the exporter at url record a pod's end (both containers
	// running) and a's pull, and returns the bounds of the start-up SLI
	// that b's pull will end: creation to the update, less a's 250 ms.
	endSeen := func(url string, n names, name string) (pod *corev1.Pod, lo, hi float64) {
		t.Helper()
		eventuallyValue(t, url, n.watch, nil, 1)
		pod = twoContainers(t, c, ns, name)
		imageEvent(t, c, pod, "a", "Pulled", `Successfully pulled image "registry.k8s.io/pause:3.10" in 201ms (250ms including waiting). Image size: 320368 bytes.`)
		// A kubelet starts the containers after a's 250 ms pull, and
		// says when in whole seconds: they start in the second after the
		// pod's creation at the earliest, or the SLI less the pull could
		// come out negative (the exporter skips it as it should).
		time.Sleep(time.Until(pod.CreationTimestamp.Add(time.Second + 10*time.Millisecond)))
		was := applied(url)
		start := time.Now()
		bothRunning(t, c, pod)
		require.EventuallyWithT(t, func(ct *assert.CollectT) { assert.Greater(ct, applied(url), was) }, 30*time.Second, 20*time.Millisecond,
			"the exporter recorded %s's end", name)
		end := time.Now()
		created := pod.CreationTimestamp.Time
		// The end is the watch's receive time, or the containers' start
		// in whole seconds (a second early at most).
		return pod, start.Sub(created).Seconds() - 0.25 - 1, end.Sub(created).Seconds() - 0.25
	}
	lastPull := func(pod *corev1.Pod) {
		t.Helper()
		imageEvent(t, c, pod, "b", "Pulled", `Container image "registry.k8s.io/pause:3.9" already present on machine`)
	}
	startups := func(url string, n names, want uint64) float64 {
		t.Helper()
		var sum float64
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			var count uint64
			count, sum = pullHistogram(ct, url, n.startup, stateless)
			assert.Equal(ct, want, count)
		}, 30*time.Second, 50*time.Millisecond)
		return sum
	}
	stop := func(p *testenv.Process) {
		t.Helper()
		require.NoError(t, p.Cmd.Process.Signal(syscall.SIGTERM))
		<-p.Done
	}

	// The code before issue 33 records first's end; this release finishes it.
	prev := startProcess(t, old, "--kubeconfig", env.Kubeconfig, "--state-dir", state)
	firstPod, firstLo, firstHi := endSeen(prev.URL, before, "first")
	stop(prev)
	next := startProcess(t, bin, "--kubeconfig", env.Kubeconfig, "--state-dir", state)
	lastPull(firstPod)
	first := startups(next.URL, this, 1)
	assert.GreaterOrEqual(t, first, firstLo)
	assert.LessOrEqual(t, first, firstHi)

	// This release records second's end; rolled back, the code before
	// issue 33 finishes it.
	secondPod, secondLo, secondHi := endSeen(next.URL, this, "second")
	stop(next)
	// The code before issue 33 predates the state directory's format
	// marker, and refuses a directory holding it as 0.1.0 does (that is the
	// marker's purpose: store.TestTheFirstWriteMarksTheFormat). It was never
	// released; the records it must read are what this test is about, so
	// it gets them without the marker.
	marker := filepath.Join(state, "PODSLO_STATE_FORMAT")
	_, err := os.Stat(marker)
	require.NoError(t, err, "this release marked the state directory")
	require.NoError(t, os.Remove(marker))
	prev = startProcess(t, old, "--kubeconfig", env.Kubeconfig, "--state-dir", state)
	assert.InDelta(t, first, startups(prev.URL, before, 1), 1e-9, "first, as this release recorded it")
	lastPull(secondPod)
	second := startups(prev.URL, before, 2) - first
	assert.GreaterOrEqual(t, second, secondLo)
	assert.LessOrEqual(t, second, secondHi)
	stop(prev)

	// Rolled forward again: each once.
	again := startProcess(t, bin, "--kubeconfig", env.Kubeconfig, "--state-dir", state)
	assert.InDelta(t, first+second, startups(again.URL, this, 2), 1e-9)
	skipped := counterValue(t, again.URL, "podslo_observations_skipped_total", map[string]string{"sli": "pod_startup", "reason": "negative_duration"})
	assert.Zero(t, skipped, "no end was misread")
}
