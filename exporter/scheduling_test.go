package exporter

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podslo/podslo/internal/testenv"
)

// TestStartupLeavesOutPodsThatWaitedToBeScheduled creates two pods, one
// held by a scheduling gate (for which the API server itself writes
// PodScheduled=False, reason SchedulingGated) and then released and bound,
// the other bound at once, and starts both the same way: the gated one
// leaves the start-up SLI with not_schedulable, the other is measured,
// and the gated one's wait is its scheduling phase.
func TestStartupLeavesOutPodsThatWaitedToBeScheduled(t *testing.T) {
	env := testenv.Start(t)
	c := env.Client
	ctx := context.Background()
	const ns = "gated"
	testenv.CreateNamespace(t, c, ns, nil)
	url := startExporter(t, Options{Kubeconfig: env.Kubeconfig, StateDir: t.TempDir()})
	eventuallyValue(t, url, "podslo_informer_pods_watch_current", nil, 1)

	newPod := func(name string, gated bool) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "a", Image: "registry.k8s.io/pause:3.10"}}},
		}
		if gated {
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/quota"}}
		}
		p, err := c.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
		return p
	}
	gated, prompt := newPod("gated", true), newPod("prompt", false)
	var waiting *corev1.PodCondition
	for i := range gated.Status.Conditions {
		if gated.Status.Conditions[i].Type == corev1.PodScheduled {
			waiting = &gated.Status.Conditions[i]
		}
	}
	require.NotNil(t, waiting, "the API server marks a gated pod")
	require.Equal(t, corev1.ConditionFalse, waiting.Status)
	require.Equal(t, corev1.PodReasonSchedulingGated, waiting.Reason)
	// Let the exporter see it waiting, as it would for minutes.
	time.Sleep(2 * time.Second)
	gated.Spec.SchedulingGates = nil
	gated, err := c.CoreV1().Pods(ns).Update(ctx, gated, metav1.UpdateOptions{})
	require.NoError(t, err)

	start := func(pod *corev1.Pod) {
		t.Helper()
		require.NoError(t, c.CoreV1().Pods(ns).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: ns},
			Target:     corev1.ObjectReference{Kind: "Node", Name: "node-a"},
		}, metav1.CreateOptions{}))
		now := time.Now()
		kubelet(t, c, pod, condAt(corev1.PodScheduled, corev1.ConditionTrue, now), condAt(corev1.PodReadyToStartContainers, corev1.ConditionTrue, now))
		imageEvent(t, c, pod, "a", "Pulled", `Container image "registry.k8s.io/pause:3.10" already present on machine`)
		patchStatus(t, c, pod, map[string]any{"status": map[string]any{"containerStatuses": []corev1.ContainerStatus{{
			Name: "a", Image: "registry.k8s.io/pause:3.10", Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}},
		}}}})
	}
	start(gated)
	start(prompt)

	stateless := map[string]string{"runtime_class": "none", "storage_class": "none", "stateful": "false"}
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		count, _ := pullHistogram(ct, url, "podslo_startup_sli_duration_seconds", stateless)
		assert.EqualValues(ct, 1, count, "the pod bound at once")
		assert.EqualValues(ct, 1, counterValue(ct, url, "podslo_observations_skipped_total", map[string]string{"sli": "pod_startup", "reason": "not_schedulable"}))
	}, 30*time.Second, 50*time.Millisecond)
	// The wait is not lost: it is the gated pod's scheduling phase, 2 s
	// at least.
	assert.GreaterOrEqual(t, phaseSum(t, url, "scheduling"), 2.0)
}

// phaseSum is the sum of the start-up phase histogram for phase.
func phaseSum(t *testing.T, url, phase string) float64 {
	t.Helper()
	_, sum := pullHistogram(t, url, "podslo_startup_phase_duration_seconds", map[string]string{"phase": phase})
	return sum
}
