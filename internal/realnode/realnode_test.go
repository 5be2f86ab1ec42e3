package realnode_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podslo/podslo/internal/realnode"
)

// TestTeardownAfterKubeletCrash leaves a running pod behind a dead kubelet,
// so that no pod deletion can go through it: the teardown must still stop
// the pod's containers and remove its sandbox, mounts, network namespace
// and cgroups, or it fails this test (Start checks, in t.Cleanup, that
// nothing is left).
func TestTeardownAfterKubeletCrash(t *testing.T) {
	node := realnode.Start(t)
	ctx := context.Background()
	no := false
	pod, err := node.Client.CoreV1().Pods("default").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "orphan"},
		Spec: corev1.PodSpec{AutomountServiceAccountToken: &no, Containers: []corev1.Container{
			{Name: "app", Image: realnode.Image, ImagePullPolicy: corev1.PullNever}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		p, err := node.Client.CoreV1().Pods("default").Get(ctx, pod.Name, metav1.GetOptions{})
		require.NoError(t, err)
		return p.Status.Phase == corev1.PodRunning
	}, 2*time.Minute, 100*time.Millisecond, "the pod never ran")
	node.KillKubelet()
}
