package exporter

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podslo/podslo/internal/testenv"
)

// value reads one sample of family (any labels) from the exporter, or
// reports why it cannot.
func value(url, family string) (float64, error) {
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return 0, err
	}
	f := fams[family]
	if f == nil || len(f.GetMetric()) == 0 {
		return 0, fmt.Errorf("no %s", family)
	}
	m := f.GetMetric()[0]
	switch {
	case m.Gauge != nil:
		return m.GetGauge().GetValue(), nil
	case m.Counter != nil:
		return m.GetCounter().GetValue(), nil
	}
	return 0, fmt.Errorf("%s is neither a gauge nor a counter", family)
}

func statusOf(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// TestFullDisk runs the real binary with its state on a real filesystem that
// fills up. badger memory-maps its files, and a write into a mapping the
// filesystem cannot back is a SIGBUS: before the free-space check, the
// exporter died here at its first write, and again at every restart. Now it
// keeps serving, says so in podslo_store_writable, and once space returns
// records every observation made meanwhile exactly once.
func TestFullDisk(t *testing.T) {
	env := testenv.Start(t)
	bin := testenv.PodsloBinary(t)
	mnt := testenv.MountTmpfs(t, 128<<20)
	state := filepath.Join(mnt, "state")
	c := env.Client
	const ns = "fulldisk"
	testenv.CreateNamespace(t, c, ns, nil)
	// The stuck pod u below times out 20 s after it is scheduled; the
	// others are ready within 5 s.
	args := []string{"--kubeconfig", env.Kubeconfig, "--state-dir", state, "--state-min-free", "32Mi", "--sandbox-creation-timeout", "20s"}

	first := startProcess(t, bin, args...)
	base := time.Now().Add(-time.Minute).Truncate(time.Second)
	// One pod observed before the disk fills: it must not count again.
	z := testenv.CreatePod(t, c, ns, podSpec{name: "z", team: "a"}.pod())
	kubelet(t, c, z, condAt(corev1.PodScheduled, corev1.ConditionTrue, base), condAt(corev1.PodReadyToStartContainers, corev1.ConditionTrue, base.Add(5*time.Second)))
	eventuallyValue(t, first.URL, "podslo_pod_sandbox_creation_seconds", map[string]string{"pod": "z"}, 5)
	// A pod stuck for its own missing ConfigMap, recorded before the disk
	// fills; its FailedMount event comes while it is full.
	u := testenv.CreatePod(t, c, ns, podSpec{name: "u", team: "a"}.pod())
	kubelet(t, c, u, condAt(corev1.PodScheduled, corev1.ConditionTrue, time.Now()))
	// Another stuck pod, deleted while the disk is full, well before its
	// timeout: its stored state stays pending while the deletion cannot be
	// written, and outlives the pod across the restart below; its timeout
	// must never count. (That the check skips a pod whose newer object
	// waits for a write is tested in pipeline, where the order of the check
	// and the retry can be fixed.)
	d := testenv.CreatePod(t, c, ns, podSpec{name: "d", team: "a"}.pod())
	kubelet(t, c, d, condAt(corev1.PodScheduled, corev1.ConditionTrue, time.Now()))
	eventuallyValue(t, first.URL, "podslo_sandbox_creation_pending_pods", map[string]string{"user_error": "false"}, 2)
	free := testenv.Fill(t, mnt, 0)
	// A write within 100 ms of a free-space check that passed goes ahead
	// unchecked (store.spaceRecheck: podslo's own writes cannot fill the
	// --state-min-free reserve that fast). The filler took the reserve at
	// once, so the writes below must come after that window.
	time.Sleep(300 * time.Millisecond)
	for i, name := range []string{"a", "b", "c"} {
		p := testenv.CreatePod(t, c, ns, podSpec{name: name, team: "a"}.pod())
		kubelet(t, c, p, condAt(corev1.PodScheduled, corev1.ConditionTrue, base), condAt(corev1.PodReadyToStartContainers, corev1.ConditionTrue, base.Add(time.Duration(i+1)*time.Second)))
	}
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		v, err := value(first.URL, "podslo_store_writable")
		assert.NoError(ct, err)
		assert.Zero(ct, v, "not writable")
	}, 30*time.Second, 100*time.Millisecond)
	zero := int64(0)
	require.NoError(t, c.CoreV1().Pods(ns).Delete(context.Background(), d.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}))
	// The event is not delivered again: its mark must survive the refused
	// write, or u's timeout would count as the platform's.
	failedMount(t, c, u, `MountVolume.SetUp failed for volume "config" : configmap "app" not found`)
	// Still alive and serving, with the refused writes counted.
	assert.Equal(t, http.StatusOK, statusOf(t, first.URL+"/healthz"))
	assert.Equal(t, http.StatusOK, statusOf(t, first.URL+"/readyz"))
	body := scrapeText(t, first.URL, "text/plain")
	assert.Contains(t, body, `podslo_sandbox_creation_duration_seconds_count{runtime_class="none",storage_class="none"} 1`+"\n", "only z recorded yet")
	assert.Regexp(t, `podslo_store_operations_total\{operation="apply",result="error"\} [1-9]`, body)

	// A restart on the disk that is still full starts and serves.
	first.Kill(t)
	second := startProcess(t, bin, args...)
	v, err := value(second.URL, "podslo_store_writable")
	require.NoError(t, err)
	assert.Zero(t, v)

	free()
	const name = "podslo_sandbox_creation_duration_seconds"
	want := "# HELP " + name + " Time from PodScheduled to the first PodReadyToStartContainers=True of each pod (KEP-3085), observed once per pod UID.\n# TYPE " + name + " histogram\n" +
		histogramText(name, `runtime_class="none",storage_class="none"`, 1, 2, 3, 5)
	// Failed pods are retried every 30 s.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.NoError(ct, scrapeAndCompare(ct, second.URL, want, name))
	}, 90*time.Second, 200*time.Millisecond, "every observation once space returned")
	v, err = value(second.URL, "podslo_store_writable")
	require.NoError(t, err)
	assert.Equal(t, 1.0, v)
	// u is excluded as the user error it is, never a timeout, and d, gone
	// before its timeout, is neither.
	const excluded, timeouts = "podslo_sandbox_creations_excluded_total", "podslo_sandbox_creation_timeouts_total"
	wantExcluded := "# HELP " + excluded + " Sandbox creations and timeouts left out of the SLI, by reason (user_error: a FailedMount event for a missing Secret or ConfigMap).\n# TYPE " + excluded + " counter\n" +
		excluded + `{reason="user_error",runtime_class="none",storage_class="none"} 1` + "\n"
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.NoError(ct, scrapeAndCompare(ct, second.URL, wantExcluded, excluded, timeouts))
	}, 60*time.Second, 200*time.Millisecond, "u past its timeout, excluded")

	// Once, also after another restart.
	second.Kill(t)
	third := startProcess(t, bin, args...)
	require.NoError(t, scrapeAndCompare(t, third.URL, want, name))
	require.NoError(t, scrapeAndCompare(t, third.URL, wantExcluded, excluded, timeouts))
}
