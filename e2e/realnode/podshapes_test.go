package realnode_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// withInit adds an init container that runs the sleeper with args. It
// copies the pod's first container: give it before any option that
// changes that one.
func withInit(name string, args ...string) podOption {
	return func(p *corev1.Pod) {
		c := p.Spec.Containers[0]
		c.Name, c.Args = name, args
		p.Spec.InitContainers = append(p.Spec.InitContainers, c)
	}
}

// withSidecar adds a native sidecar: an init container with restartPolicy
// Always, which runs beside the containers.
func withSidecar(name string) podOption {
	always := corev1.ContainerRestartPolicyAlways
	return func(p *corev1.Pod) {
		c := p.Spec.Containers[0]
		c.Name, c.Args, c.RestartPolicy = name, nil, &always
		p.Spec.InitContainers = append(p.Spec.InitContainers, c)
	}
}

// withGate holds the pod's scheduling until the gate is removed.
func withGate(name string) podOption {
	return func(p *corev1.Pod) {
		p.Spec.SchedulingGates = append(p.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: name})
	}
}

// withArgs runs the sleeper with args in the pod's first container.
func withArgs(args ...string) podOption {
	return func(p *corev1.Pod) { p.Spec.Containers[0].Args = args }
}

// withFailingReadiness gives the first container an exec readiness probe,
// every second, that fails from from until to.
func withFailingReadiness(from, to time.Time) podOption {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
			ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/pause", "fail-between",
				fmt.Sprint(from.UnixMilli()), fmt.Sprint(to.UnixMilli())}}},
			PeriodSeconds: 1, FailureThreshold: 1, SuccessThreshold: 1, TimeoutSeconds: 1,
		}
	}
}

// TestPodShapesOnARealNode runs, on the real node, the pod shapes the
// start-up SLI must get right beside the one-container pod: init
// containers with a native sidecar, a pod held by a scheduling gate, a
// hostPath volume (stateful, as the kubelet tells it), a container that
// restarts over and over, and a readiness probe that fails and recovers.
// podslo's start-up SLI is compared, pod by pod, with the kubelet's log
// of its own; then an exporter with a fresh state sees the same pods
// after the fact (issue 35).
func TestPodShapesOnARealNode(t *testing.T) {
	s := startSuite(t)
	ctx := context.Background()
	c := s.node.Client
	url := s.startExporter(t.TempDir())
	startsBefore, _ := kubeletHistogramSum(t, s.node, "kubelet_pod_start_sli_duration_seconds", "", "")

	const gateHold = 3 * time.Second
	dirOrCreate := corev1.HostPathDirectoryOrCreate
	began := time.Now()
	pods := map[string]*corev1.Pod{
		"init-sidecar": s.createPod("init-sidecar", withInit("setup", "sleep", "2s"), withSidecar("proxy")),
		"gated":        s.createPod("gated", withGate("podslo.test/hold")),
		"hostpath": s.createPod("hostpath", withVolume(corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
			HostPath: &corev1.HostPathVolumeSource{Path: filepath.Join(s.node.Dir(), "hostpath"), Type: &dirOrCreate}}})),
		// Exits after 8 s, and restartPolicy Always starts it again after
		// the kubelet's back-off (10 s, then 20 s...). Running long enough
		// for the kubelet's tracker to see it running (below).
		"crashloop": s.createPod("crashloop", withArgs("sleep", "8s")),
		// Ready within a second or two, not Ready from 8 s to 12 s.
		"flap": s.createPod("flap", withFailingReadiness(began.Add(8*time.Second), began.Add(12*time.Second))),
	}
	// The gate is lifted gateHold after the pod's creation.
	time.Sleep(time.Until(pods["gated"].CreationTimestamp.Add(gateHold + time.Second)))
	_, err := c.CoreV1().Pods(ns).Patch(ctx, "gated", types.JSONPatchType, []byte(`[{"op":"remove","path":"/spec/schedulingGates"}]`), metav1.PatchOptions{})
	require.NoError(t, err)
	var uids []types.UID
	for _, p := range pods {
		uids = append(uids, p.UID)
	}
	s.waitRunning(uids...)
	// The kubelet's tracker may miss a pod's start-up (TestPullsUnknownOnARealNode):
	// a label change is a later watch event that shows it.
	for name := range pods {
		_, err := c.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, []byte(`{"metadata":{"labels":{"podslo.test/poke":"1"}}}`), metav1.PatchOptions{})
		require.NoError(t, err)
	}
	var kubelet map[string]kubeletStartup
	require.Eventually(t, func() bool {
		kubelet = kubeletStartups(t, s)
		for name := range pods {
			if _, ok := kubelet[name]; !ok {
				return false
			}
		}
		return true
	}, time.Minute, 100*time.Millisecond, "the kubelet logs a start-up for every pod")

	skipped := func(fams map[string]float64, sli, reason string) float64 { return fams[sli+","+reason] }
	stateless := []string{"init-sidecar", "crashloop", "flap"}
	var startups map[string]float64
	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		fams := scrape(ct, url)
		startups = perPod(fams["podslo_pod_startup_sli_seconds"])
		for _, name := range append(stateless, "hostpath") {
			assert.Contains(ct, startups, name)
		}
		assert.NotContains(ct, startups, "gated", "a pod that waited to be scheduled leaves the SLI")
		count, _ := histogramBy(fams["podslo_pod_startup_sli_duration_seconds"], "stateful")
		assert.Equal(ct, map[string]uint64{"false": uint64(len(stateless)), "true": 1}, count)
		assert.Equal(ct, 1.0, skipped(counterBy(fams["podslo_observations_skipped_total"], "sli", "reason"), "pod_startup", "not_schedulable"))
	}, time.Minute, 100*time.Millisecond, "podslo's start-ups")

	// Pod by pod, beside the kubelet (as in TestImagePullsOnARealNode).
	kubeletCounts := 0
	for name, k := range kubelet {
		atStatus := k.observed.Sub(k.created).Seconds() - k.pulls.Seconds() - k.initRuntime.Seconds()
		t.Logf("%s: podslo %.3f s; the kubelet's SLI %.3f s (stateful %v, init run %v), at its status manager %.3f s",
			name, startups[name], k.sli, k.stateful, k.initRuntime, atStatus)
		if !k.stateful {
			kubeletCounts++
		}
		switch name {
		case "gated":
			// The kubelet sees the pod only once bound, PodScheduled True:
			// it cannot tell that it waited, and counts the wait.
			assert.GreaterOrEqual(t, k.sli, gateHold.Seconds(), "the kubelet's SLI holds the gate's wait")
		case "init-sidecar":
			// podslo takes off the init phase (first sandbox readiness to
			// Initialized, whole seconds), which holds the sidecar's start
			// too; the kubelet takes off the init containers' run time
			// but the sidecars'. docs/metrics.md gives the difference.
			// Measured: podslo 1.0 s to 2.0 s lower (docs/metrics.md).
			// The init phase's whole seconds can also make it up to 1 s
			// higher.
			if k.hasInit {
				assert.GreaterOrEqual(t, startups[name], atStatus-3, "%s: podslo's init phase against the kubelet's init run time", name)
				assert.LessOrEqual(t, startups[name], atStatus+1, "%s: podslo's init phase against the kubelet's init run time", name)
			}
		default:
			assert.InDelta(t, atStatus, startups[name], msTolerance, "%s: podslo's end is the kubelet's status write, seen through the API", name)
		}
	}
	assert.True(t, kubelet["hostpath"].stateful || !kubelet["init-sidecar"].hasInit, "a 1.36 kubelet calls the hostPath pod stateful")
	starts, _ := kubeletHistogramSum(t, s.node, "kubelet_pod_start_sli_duration_seconds", "", "")
	assert.Equal(t, uint64(kubeletCounts), starts-startsBefore, "the kubelet's SLI counts the pods its log calls stateless")

	// The scheduling phase, exactly: creation to PodScheduled, whole
	// seconds, the gate's wait included.
	var wantScheduling float64
	for _, p := range pods {
		tr := s.tr.get(p.UID)
		wantScheduling += tr.scheduled.Sub(tr.created).Seconds()
	}
	assert.GreaterOrEqual(t, wantScheduling, gateHold.Seconds())
	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		count, sum := histogramBy(scrape(ct, url)["podslo_pod_startup_phase_duration_seconds"], "phase")
		assert.Equal(ct, uint64(len(pods)), count["scheduling"])
		assert.Equal(ct, wantScheduling, sum["scheduling"])
	}, 30*time.Second, 100*time.Millisecond, "the scheduling phase")

	// Until the crash loop has restarted, and the flapping probe failed and
	// passed again.
	flapReady := func() (first, last time.Time) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, "flap", metav1.GetOptions{})
		require.NoError(t, err)
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				last = cond.LastTransitionTime.Time
			}
		}
		return s.tr.get(pods["flap"].UID).ready, last
	}
	require.Eventually(t, func() bool {
		first, last := flapReady()
		return s.tr.get(pods["crashloop"].UID).restarts > 0 && last.After(first)
	}, 2*time.Minute, 100*time.Millisecond, "the crash loop never restarted, or the probe never failed and recovered")
	flap := s.tr.get(pods["flap"].UID)
	firstReady, lastReady := flapReady()
	// The first Ready, as the test's watch timed it: podslo's watch timed
	// it too, and the per-pod series has its milliseconds.
	readyMs, ok := flap.between(seenStarted, seenReady)
	require.True(t, ok)
	require.Less(t, readyMs, float64(lastReady.Sub(flap.started).Seconds()))
	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		got := perPod(scrape(ct, url)["podslo_pod_readiness_seconds"])
		assert.InDelta(ct, readyMs, got["flap"], msTolerance, "the first Ready, not the flap's")
	}, 30*time.Second, 100*time.Millisecond, "the flapping pod's readiness")
	t.Logf("flap: first Ready %s, the flap's Ready %s; podslo's readiness %.3f s", firstReady.Format(time.TimeOnly), lastReady.Format(time.TimeOnly), readyMs)

	// A fresh state sees the pods after the fact.
	fresh := s.startExporter(t.TempDir())
	restarted := "restarted_before_seen"
	if kubeletMinor(t) < 36 {
		// A kubelet before 1.36 writes the first sandbox readiness after
		// the containers' start: a restart then also looks like a lost
		// sandbox (recreated_before_seen), which skips the same SLIs.
		restarted = ""
	}
	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		fams := scrape(ct, fresh)
		got := perPod(fams["podslo_pod_startup_sli_seconds"])
		skips := counterBy(fams["podslo_observations_skipped_total"], "sli", "reason")
		// The crash loop's start-up, first Ready and the phases that end
		// with it may be the restart's: skipped.
		assert.NotContains(ct, got, "crashloop")
		assert.NotContains(ct, perPod(fams["podslo_pod_readiness_seconds"]), "crashloop")
		for _, sli := range []string{"pod_startup", "readiness", "startup_phase"} {
			if restarted != "" {
				assert.Equal(ct, 1.0, skipped(skips, sli, restarted), "%s skipped as %s", sli, restarted)
			} else {
				assert.Equal(ct, 1.0, skipped(skips, sli, "restarted_before_seen")+skipped(skips, sli, "recreated_before_seen"), sli)
			}
		}
		// The gated pod, first seen bound, cannot tell that it waited:
		// measured, the wait included (docs/metrics.md).
		assert.GreaterOrEqual(ct, got["gated"], gateHold.Seconds())
		// From a list, in whole seconds from the newest container's
		// startedAt (truncated): no later than the watch's end, which is
		// the status write that showed it, and less than a second and
		// that write's delay earlier (1.2 s on 1.35.4).
		for _, name := range []string{"hostpath", "init-sidecar", "flap"} {
			if assert.Contains(ct, got, name) {
				assert.LessOrEqual(ct, got[name], startups[name], name)
				assert.Less(ct, startups[name]-got[name], 2.0, name)
				assert.Equal(ct, got[name], math.Trunc(got[name]), "%s in whole seconds", name)
			}
		}
		// A readiness flap leaves no trace in the status: the fresh state
		// measures the flap's Ready (docs/metrics.md).
		assert.Equal(ct, lastReady.Sub(flap.started).Seconds(), perPod(fams["podslo_pod_readiness_seconds"])["flap"])
	}, time.Minute, 100*time.Millisecond, "what a fresh state sees of the pods")
}
