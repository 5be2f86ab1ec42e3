package e2e

import (
	"context"
	"fmt"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// writePulledEvents writes, for up to n running stateless pods of ns,
// the Pulled events the kubelet would have written for each container
// (kwok's stages write none): the first pod's images pulled, the others'
// already present, so that the image pull and start-up SLIs have data.
func writePulledEvents(t require.TestingT, c kubernetes.Interface, ns string, n int) {
	ctx := context.Background()
	pods, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "status.phase=Running"})
	require.NoError(t, err)
	written := 0
	for _, p := range pods.Items {
		if written == n || hasClaim(&p) {
			continue
		}
		for _, ctr := range p.Spec.Containers {
			msg := fmt.Sprintf("Container image %q already present on machine", ctr.Image)
			if written == 0 {
				msg = fmt.Sprintf("Successfully pulled image %q in 10ms (12ms including waiting). Image size: 1000 bytes.", ctr.Image)
			}
			_, err := c.CoreV1().Events(ns).Create(ctx, &corev1.Event{
				ObjectMeta: metav1.ObjectMeta{GenerateName: p.Name + "-", Namespace: ns},
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: ns, Name: p.Name, UID: p.UID,
					FieldPath: "spec.containers{" + ctr.Name + "}"},
				Reason: "Pulled", Type: corev1.EventTypeNormal, Message: msg,
				Source:         corev1.EventSource{Component: "kubelet", Host: p.Spec.NodeName},
				FirstTimestamp: metav1.Now(), LastTimestamp: metav1.Now(), Count: 1,
			}, metav1.CreateOptions{})
			require.NoError(t, err)
		}
		written++
	}
	require.Equal(t, n, written, "running stateless pods to write Pulled events for")
}

func hasClaim(p *corev1.Pod) bool {
	for _, v := range p.Spec.Volumes {
		if v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			return true
		}
	}
	return false
}
