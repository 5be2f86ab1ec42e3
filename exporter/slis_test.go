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

// started patches what the kubelet reports once containers run: their
// start times, and Ready.
func started(t *testing.T, c kubernetes.Interface, pod *corev1.Pod, at, readyAt time.Time) {
	t.Helper()
	status := map[string]any{"status": map[string]any{
		"containerStatuses": []corev1.ContainerStatus{{Name: "app", Image: "registry.k8s.io/pause:3.10", Ready: true,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(at)}}}},
		"conditions": []corev1.PodCondition{condAt(corev1.PodReady, corev1.ConditionTrue, readyAt)},
	}}
	patchStatus(t, c, pod, status)
}

// deleteWithGrace deletes pod through the API, as kubectl or a controller
// would, and returns the request time the API server recorded.
func deleteWithGrace(t *testing.T, c kubernetes.Interface, pod *corev1.Pod, grace int64) time.Time {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, c.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace}))
	got, err := c.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, got.DeletionTimestamp)
	return got.DeletionTimestamp.Add(-time.Duration(*got.DeletionGracePeriodSeconds) * time.Second)
}

// failedMount creates the Event the kubelet records for a volume it
// cannot mount.
func failedMount(t *testing.T, c kubernetes.Interface, pod *corev1.Pod, message string) {
	t.Helper()
	now := metav1.Now()
	ev := &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", pod.Name, now.UnixNano()), Namespace: pod.Namespace},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Reason:         "FailedMount", Message: message, Type: corev1.EventTypeWarning,
		Source:         corev1.EventSource{Component: "kubelet", Host: "node-a"},
		FirstTimestamp: now, LastTimestamp: now, Count: 1,
	}
	_, err := c.CoreV1().Events(pod.Namespace).Create(context.Background(), ev, metav1.CreateOptions{})
	require.NoError(t, err)
}

// TestTerminationReadinessAndFailuresOnRealAPIServer drives pods through
// graceful, slow, repeated and forced deletions, readiness probes, a stuck
// sandbox and a missing ConfigMap, with real deletes and real Events, and
// compares the scraped histograms and counters exactly.
func TestTerminationReadinessAndFailuresOnRealAPIServer(t *testing.T) {
	env := testenv.Start(t)
	c := env.Client
	ctx := context.Background()
	const ns = "slis"
	testenv.CreateNamespace(t, c, ns, nil)
	logs := newLogLines(t)
	url := startExporter(t, Options{Kubeconfig: env.Kubeconfig, StateDir: t.TempDir(), SandboxCreationTimeout: 2 * time.Second,
		Logger: logs.logger()}, WithTimeoutCheckInterval(100*time.Millisecond))

	// running creates a pod whose sandbox became ready 2s after it was
	// scheduled, in the past, so that deleting it now comes after: the test
	// cannot wait for real seconds to pass.
	running := func(name string) *corev1.Pod {
		p := testenv.CreatePod(t, c, ns, podSpec{name: name, team: "a"}.pod())
		ct := p.CreationTimestamp.Time
		kubelet(t, c, p, condAt(corev1.PodScheduled, corev1.ConditionTrue, ct.Add(-10*time.Second)), condAt(corev1.PodReadyToStartContainers, corev1.ConditionTrue, ct.Add(-8*time.Second)))
		return p
	}
	sandboxDown := func(p *corev1.Pod, at time.Time) {
		kubelet(t, c, p, condAt(corev1.PodReadyToStartContainers, corev1.ConditionFalse, at))
	}

	// Readiness: containers start 1s after the sandbox, probes pass 4s later.
	probed := running("probed")
	pct := probed.CreationTimestamp.Time
	started(t, c, probed, pct.Add(-7*time.Second), pct.Add(-3*time.Second))
	// The agent finds it stable 2s after Ready (minReadySeconds 2), then a
	// container restart makes it lose stability.
	kubelet(t, c, probed, condAt("podslo.io/Stable", corev1.ConditionTrue, pct.Add(-1*time.Second)))
	eventuallyValue(t, url, "podslo_pod_stable", map[string]string{"pod": "probed"}, 1)
	kubelet(t, c, probed, condAt("podslo.io/Stable", corev1.ConditionFalse, pct))
	eventuallyValue(t, url, "podslo_pod_stable", map[string]string{"pod": "probed"}, 0)

	// Terminations.
	graceful := running("graceful")
	slow := running("slow")
	redelete := running("redelete")
	forced := running("forced")
	eventuallyValue(t, url, "podslo_pod_sandbox_creation_seconds", map[string]string{"pod": "forced"}, 2)

	r := deleteWithGrace(t, c, graceful, 30)
	// Pending until its sandbox goes: the request's time, within its grace.
	eventuallyValue(t, url, "podslo_pod_deletion_requested_timestamp_seconds", map[string]string{"pod": "graceful"}, float64(r.Unix()))
	eventuallyValue(t, url, "podslo_terminations_pending_pods", map[string]string{"over_grace": "false"}, 1)
	sandboxDown(graceful, r.Add(2*time.Second))
	r = deleteWithGrace(t, c, slow, 5)
	sandboxDown(slow, r.Add(8*time.Second))
	// A second, shorter delete moves deletionTimestamp to r2+1s, but the
	// kubelet keeps the first grace: 10s is within it, so only slow is
	// over grace.
	r = deleteWithGrace(t, c, redelete, 30)
	deleteWithGrace(t, c, redelete, 1)
	sandboxDown(redelete, r.Add(10*time.Second))
	zero := int64(0)
	require.NoError(t, c.CoreV1().Pods(ns).Delete(ctx, forced.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}), "a force deletion")
	// The kubelet removes the terminated pods.
	for _, p := range []*corev1.Pod{graceful, slow, redelete} {
		eventuallyValue(t, url, "podslo_pod_termination_seconds", map[string]string{"pod": p.Name}, map[string]float64{"graceful": 2, "slow": 8, "redelete": 10}[p.Name])
		require.NoError(t, c.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}))
	}

	// A sandbox that never comes, and one blocked by a missing ConfigMap
	// that later recovers. The blocked pod is scheduled only once the
	// exporter has recorded its user error: scheduled first, its 2s
	// creation timeout would race the event informer, and a slow event
	// would count it as a timeout. The exporter logs the user error under
	// the lock every pod update takes, so the update that schedules the pod
	// is handled after it.
	stuck := testenv.CreatePod(t, c, ns, podSpec{name: "stuck", team: "a"}.pod())
	kubelet(t, c, stuck, condAt(corev1.PodScheduled, corev1.ConditionTrue, stuck.CreationTimestamp.Time), condAt(corev1.PodReadyToStartContainers, corev1.ConditionFalse, stuck.CreationTimestamp.Time))
	blocked := testenv.CreatePod(t, c, ns, podSpec{name: "blocked", team: "a"}.pod())
	failedMount(t, c, blocked, `MountVolume.SetUp failed for volume "config" : configmap "app-config" not found`)
	logs.wait(t, `msg="Pod blocked by a missing Secret or ConfigMap, left out of the sandbox SLIs"`, "uid="+string(blocked.UID))
	bct := time.Now().Truncate(time.Second)
	kubelet(t, c, blocked, condAt(corev1.PodScheduled, corev1.ConditionTrue, bct), condAt(corev1.PodReadyToStartContainers, corev1.ConditionFalse, bct))
	// A FailedMount that is not the pod author's fault changes nothing;
	// both events are seen before the metrics are compared.
	failedMount(t, c, stuck, `MountVolume.SetUp failed for volume "pvc-1" : rpc error: code = Internal desc = mount failed`)
	eventuallyValue(t, url, "podslo_informer_events_total", map[string]string{"resource": "events", "event": "add"}, 2)
	assert.Empty(t, logs.matching("uid="+string(stuck.UID), "Secret or ConfigMap"), "the stuck pod's FailedMount is no user error")
	eventuallyMetrics(t, url, `
# HELP podslo_sandbox_creation_pending_pods Scheduled pods still waiting for their first sandbox, by whether a user error was reported for them and whether their creation timed out.
# TYPE podslo_sandbox_creation_pending_pods gauge
podslo_sandbox_creation_pending_pods{runtime_class="none",storage_class="none",timed_out="true",user_error="false"} 1
podslo_sandbox_creation_pending_pods{runtime_class="none",storage_class="none",timed_out="true",user_error="true"} 1
# HELP podslo_sandbox_creation_timeouts_total Scheduled pods whose first sandbox was not ready within --sandbox-creation-timeout, counted once per pod.
# TYPE podslo_sandbox_creation_timeouts_total counter
podslo_sandbox_creation_timeouts_total{runtime_class="none",storage_class="none"} 1
`, "podslo_sandbox_creation_pending_pods", "podslo_sandbox_creation_timeouts_total")
	// The ConfigMap appears; the sandbox follows a minute after scheduling.
	kubelet(t, c, blocked, condAt(corev1.PodReadyToStartContainers, corev1.ConditionTrue, bct.Add(time.Minute)))

	const (
		creation    = "podslo_sandbox_creation_duration_seconds"
		termination = "podslo_termination_duration_seconds"
		readiness   = "podslo_readiness_duration_seconds"
	)
	classes := `runtime_class="none",storage_class="none"`
	eventuallyMetrics(t, url, `
# HELP `+creation+` Time from PodScheduled to the first PodReadyToStartContainers=True of each pod (KEP-3085), observed once per pod UID.
# TYPE `+creation+` histogram
`+histogramText(creation, classes, 2, 2, 2, 2, 2)+`
# HELP `+termination+` Time from the deletion request (deletionTimestamp minus the grace period) to the sandbox condition turning False (KEP-3085 Story 5), observed once per pod UID.
# TYPE `+termination+` histogram
`+histogramText(termination, classes, 2, 8, 10)+`
# HELP podslo_terminations_over_grace_total Terminations that ended after the first deletion request plus its grace period, i.e. took longer than the grace the kubelet kept.
# TYPE podslo_terminations_over_grace_total counter
podslo_terminations_over_grace_total{`+classes+`} 1
# HELP `+readiness+` Time from the newest container start to the first Ready=True: what readiness probes add. Observed once per pod UID.
# TYPE `+readiness+` histogram
`+histogramText(readiness, classes, 4)+`
# HELP podslo_stabilization_duration_seconds Time from the first Ready to the first Stable=True written by podslo's agent (Ready for minReadySeconds without a restart). Observed once per pod UID.
# TYPE podslo_stabilization_duration_seconds histogram
`+histogramText("podslo_stabilization_duration_seconds", classes, 2)+`
# HELP podslo_stable_transitions_total Stable condition transitions by target status; to="false" counts the times a stable pod lost stability (Ready dropped or a container restarted).
# TYPE podslo_stable_transitions_total counter
podslo_stable_transitions_total{`+classes+`,to="false"} 1
# HELP podslo_sandbox_creation_timeouts_total Scheduled pods whose first sandbox was not ready within --sandbox-creation-timeout, counted once per pod.
# TYPE podslo_sandbox_creation_timeouts_total counter
podslo_sandbox_creation_timeouts_total{`+classes+`} 1
# HELP podslo_sandbox_creations_excluded_total Sandbox creations and timeouts left out of the SLI, by reason (user_error: a FailedMount event for a missing Secret or ConfigMap).
# TYPE podslo_sandbox_creations_excluded_total counter
podslo_sandbox_creations_excluded_total{reason="user_error",`+classes+`} 1
# HELP podslo_sandbox_creation_pending_pods Scheduled pods still waiting for their first sandbox, by whether a user error was reported for them and whether their creation timed out.
# TYPE podslo_sandbox_creation_pending_pods gauge
podslo_sandbox_creation_pending_pods{`+classes+`,timed_out="true",user_error="false"} 1
`, creation, termination, "podslo_terminations_over_grace_total", readiness, "podslo_stabilization_duration_seconds", "podslo_stable_transitions_total", "podslo_sandbox_creation_timeouts_total",
		"podslo_sandbox_creations_excluded_total", "podslo_sandbox_creation_pending_pods")
	eventuallyValue(t, url, "podslo_observations_skipped_total", map[string]string{"sli": "termination", "reason": "vanished"}, 1)
	eventuallyValue(t, url, "podslo_pod_readiness_seconds", map[string]string{"pod": "probed"}, 4)
}
