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

// TestLateFailedMountDoesNotResurrectADeletedPod: events outlive their pods
// by an hour, so a FailedMount event can reach the exporter after its pod
// was deleted. It used to create a store record for the gone UID that
// nothing removed until a restart. Now it changes nothing.
func TestLateFailedMountDoesNotResurrectADeletedPod(t *testing.T) {
	env := testenv.Start(t)
	c := env.Client
	const ns = "late"
	testenv.CreateNamespace(t, c, ns, nil)
	url := startExporter(t, Options{Kubeconfig: env.Kubeconfig, StateDir: t.TempDir()})

	p := testenv.CreatePod(t, c, ns, podSpec{name: "gone", team: "a"}.pod())
	at := time.Now().Truncate(time.Second)
	kubelet(t, c, p, condAt(corev1.PodScheduled, corev1.ConditionTrue, at), condAt(corev1.PodReadyToStartContainers, corev1.ConditionTrue, at.Add(time.Second)))
	eventuallyValue(t, url, "podslo_store_tracked_pods", nil, 1)
	zero := int64(0)
	require.NoError(t, c.CoreV1().Pods(ns).Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}))
	eventuallyValue(t, url, "podslo_store_tracked_pods", nil, 0)

	// A live pod waiting for its sandbox, to mark the point where the late
	// event has been handled: events are handled in order, one at a time.
	blocked := testenv.CreatePod(t, c, ns, podSpec{name: "blocked", team: "a"}.pod())
	kubelet(t, c, blocked, condAt(corev1.PodScheduled, corev1.ConditionTrue, at), condAt(corev1.PodReadyToStartContainers, corev1.ConditionFalse, at))
	eventuallyValue(t, url, "podslo_store_tracked_pods", nil, 1)

	failedMount(t, c, p, `MountVolume.SetUp failed for volume "config" : configmap "app" not found`)
	failedMount(t, c, blocked, `MountVolume.SetUp failed for volume "config" : configmap "app" not found`)
	eventuallyValue(t, url, "podslo_sandbox_creation_pending_pods", map[string]string{"user_error": "true"}, 1)
	v, err := value(url, "podslo_store_tracked_pods")
	require.NoError(t, err)
	assert.Equal(t, 1.0, v, "only the live pod has a record; the deleted one did not come back")
	assert.NotContains(t, scrapeText(t, url, "text/plain"), `pod="gone"`)
}
