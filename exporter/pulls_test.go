package exporter

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/podslo/podslo/internal/testenv"
)

// imageEvent creates an Event the kubelet records about a container's
// image (reason Pulled or Failed), as the kubelet writes it.
func imageEvent(t *testing.T, c kubernetes.Interface, pod *corev1.Pod, container, reason, message string) {
	t.Helper()
	now := metav1.Now()
	typ := corev1.EventTypeNormal
	if reason == "Failed" {
		typ = corev1.EventTypeWarning
	}
	ev := &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", pod.Name, now.UnixNano()), Namespace: pod.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
			FieldPath: "spec.containers{" + container + "}"},
		Reason: reason, Message: message, Type: typ,
		Source:         corev1.EventSource{Component: "kubelet", Host: "node-a"},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
	_, err := c.CoreV1().Events(pod.Namespace).Create(context.Background(), ev, metav1.CreateOptions{})
	require.NoError(t, err)
}

// twoContainers creates a pod with containers a and b on node-a, scheduled
// and its sandbox ready.
func twoContainers(t *testing.T, c kubernetes.Interface, ns, name string) *corev1.Pod {
	t.Helper()
	p, err := c.CoreV1().Pods(ns).Create(context.Background(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{
			{Name: "a", Image: "registry.k8s.io/pause:3.10"}, {Name: "b", Image: "registry.k8s.io/pause:3.9"},
		}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	ct := p.CreationTimestamp.Time
	kubelet(t, c, p, condAt(corev1.PodScheduled, corev1.ConditionTrue, ct), condAt(corev1.PodReadyToStartContainers, corev1.ConditionTrue, ct))
	return p
}

// bothRunning patches what the kubelet reports once both containers run.
func bothRunning(t *testing.T, c kubernetes.Interface, pod *corev1.Pod) {
	t.Helper()
	at := metav1.Now()
	var statuses []corev1.ContainerStatus
	for _, name := range []string{"a", "b"} {
		statuses = append(statuses, corev1.ContainerStatus{Name: name, Image: "registry.k8s.io/pause:3.10", Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at}}})
	}
	patchStatus(t, c, pod, map[string]any{"status": map[string]any{"containerStatuses": statuses}})
}

func pullHistogram(t require.TestingT, url, family string, labels map[string]string) (count uint64, sum float64) {
	fams := scrapeFamilies(t, url)
	for _, m := range fams[family].GetMetric() {
		if hasLabels(m, labels) {
			count += m.GetHistogram().GetSampleCount()
			sum += m.GetHistogram().GetSampleSum()
		}
	}
	return count, sum
}

// TestImagePullsAcrossSIGKILL kills the exporter between a pod's two
// Pulled events, and again once its pulls and start-up are recorded: the
// pulls are observed once, from both events, the start-up once with the
// pulls taken off, and a pod with failed pulls counts once.
func TestImagePullsAcrossSIGKILL(t *testing.T) {
	env := testenv.Start(t)
	bin := testenv.PodsloBinary(t)
	state := t.TempDir()
	c := env.Client
	const ns = "pulls"
	testenv.CreateNamespace(t, c, ns, nil)

	first := startProcess(t, bin, "--kubeconfig", env.Kubeconfig, "--state-dir", state)
	web := twoContainers(t, c, ns, "web")
	bad := twoContainers(t, c, ns, "bad")
	imageEvent(t, c, web, "a", "Pulled", `Successfully pulled image "registry.k8s.io/pause:3.10" in 201ms (250ms including waiting). Image size: 320368 bytes.`)
	imageEvent(t, c, bad, "a", "Failed", `Failed to pull image "registry.k8s.io/nope:1": not found`)
	// Both events handed to the pipeline, which holds them in memory.
	eventuallyValue(t, first.URL, "podslo_informer_events_total", map[string]string{"resource": "events", "event": "add"}, 2)
	count, _ := pullHistogram(t, first.URL, "podslo_image_pull_duration_seconds", nil)
	require.Zero(t, count, "one of web's two images is not in yet")
	eventuallyValue(t, first.URL, "podslo_image_pulls_failed_total", map[string]string{"runtime_class": "none"}, 1)
	first.Kill(t)

	// While podslo is down: b's image is found present, bad fails again.
	imageEvent(t, c, web, "b", "Pulled", `Container image "registry.k8s.io/pause:3.9" already present on machine`)
	imageEvent(t, c, bad, "a", "Failed", `Error: ErrImagePull`)

	second := startProcess(t, bin, "--kubeconfig", env.Kubeconfig, "--state-dir", state)
	pull := map[string]string{"runtime_class": "none", "storage_class": "none", "cache": "miss"}
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		count, sum := pullHistogram(ct, second.URL, "podslo_image_pull_duration_seconds", pull)
		assert.Equal(ct, uint64(1), count)
		assert.InDelta(ct, 0.25, sum, 1e-9, "a's 250 ms plus b's 0")
	}, 30*time.Second, 50*time.Millisecond)
	eventuallyValue(t, second.URL, "podslo_pod_image_pull_seconds", map[string]string{"pod": "web"}, 0.25)
	require.Equal(t, float64(1), counterValue(t, second.URL, "podslo_image_pulls_failed_total", map[string]string{"runtime_class": "none", "storage_class": "none"}))

	// web's containers run: the start-up SLI ends, minus the pulls, timed
	// by the watch once it is current.
	eventuallyValue(t, second.URL, "podslo_informer_pods_watch_current", nil, 1)
	before := time.Now()
	bothRunning(t, c, web)
	stateless := map[string]string{"runtime_class": "none", "storage_class": "none", "stateful": "false"}
	var sli float64
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		var count uint64
		count, sli = pullHistogram(ct, second.URL, "podslo_startup_sli_duration_seconds", stateless)
		assert.Equal(ct, uint64(1), count)
	}, 30*time.Second, 50*time.Millisecond)
	after := time.Now()
	created := web.CreationTimestamp.Time
	assert.GreaterOrEqual(t, sli, before.Sub(created).Seconds()-0.25-0.001, "from creation to the update, less the pulls")
	assert.LessOrEqual(t, sli, after.Sub(created).Seconds()-0.25)
	eventuallyValue(t, second.URL, "podslo_pod_startup_sli_seconds", map[string]string{"pod": "web"}, float64(int64(sli*1000+0.5))/1000)
	second.Kill(t)

	third := startProcess(t, bin, "--kubeconfig", env.Kubeconfig, "--state-dir", state)
	count, sum := pullHistogram(t, third.URL, "podslo_image_pull_duration_seconds", pull)
	assert.Equal(t, uint64(1), count, "not again after another kill")
	assert.InDelta(t, 0.25, sum, 1e-9)
	count, sum = pullHistogram(t, third.URL, "podslo_startup_sli_duration_seconds", stateless)
	assert.Equal(t, uint64(1), count)
	assert.InDelta(t, sli, sum, 1e-9)
	assert.Equal(t, float64(1), counterValue(t, third.URL, "podslo_image_pulls_failed_total", map[string]string{"runtime_class": "none", "storage_class": "none"}))
	skipped := counterValue(t, third.URL, "podslo_observations_skipped_total", map[string]string{"sli": "pod_startup", "reason": "image_pull_failed"})
	assert.Zero(t, skipped, "bad's containers never ran")
}
