package kwok_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const annotationPulls = "kwok.podslo.io/pulls"

// TestPullsAnnotationDelaysTheStart checks kwok.podslo.io/pulls (README.md):
// the init containers complete, and the containers start, later by their
// images' pulls in whole seconds rounded up, as the kubelet pulls each
// image between the sandbox and the container's start; without it (or with
// text that is no number) a pod starts as if its images were present.
func TestPullsAnnotationDelaysTheStart(t *testing.T) {
	c, _ := startKwok(t)
	ns := "pulls"
	_, err := c.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	withInit := func(p *corev1.Pod) {
		p.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "registry.k8s.io/pause:3.10"}}
	}
	cases := []struct {
		name  string
		opt   podOption
		init  int64 // sandbox → Initialized, seconds
		start int64 // sandbox (or Initialized) → the containers' start
	}{
		{"plain", nil, 0, 1},
		{"containers", annotated(annotationPulls, "0,2001"), 0, 1 + 3},
		{"cached", annotated(annotationPulls, "0,0"), 0, 1},
		{"not-a-number", annotated(annotationPulls, "x,y"), 0, 1},
		{"init", func(p *corev1.Pod) { withInit(p); p.Annotations[annotationPulls] = "1500,999" }, 1 + 2, 1},
		{"init-plain", withInit, 1, 0},
	}
	for _, tc := range cases {
		createAndBind(t, c, ns, tc.name, tc.opt)
	}
	for _, tc := range cases {
		var pod *corev1.Pod
		require.Eventually(t, func() bool {
			p, err := c.CoreV1().Pods(ns).Get(context.Background(), tc.name, metav1.GetOptions{})
			require.NoError(t, err)
			pod = p
			return p.Status.Phase == corev1.PodRunning
		}, time.Minute, 100*time.Millisecond, "pod %s never ran", tc.name)
		at := func(typ corev1.PodConditionType) time.Time {
			for _, c := range pod.Status.Conditions {
				if c.Type == typ && c.Status == corev1.ConditionTrue {
					return c.LastTransitionTime.Time
				}
			}
			t.Fatalf("pod %s: no %s=True", tc.name, typ)
			return time.Time{}
		}
		sandbox := at(corev1.PodReadyToStartContainers)
		from := sandbox
		if tc.name == "init" || tc.name == "init-plain" {
			from = at(corev1.PodInitialized)
			assert.Equal(t, tc.init, int64(from.Sub(sandbox)/time.Second), "pod %s: sandbox → Initialized", tc.name)
		}
		require.Len(t, pod.Status.ContainerStatuses, 1)
		running := pod.Status.ContainerStatuses[0].State.Running
		require.NotNil(t, running, "pod %s", tc.name)
		assert.Equal(t, tc.start, int64(running.StartedAt.Sub(from)/time.Second), "pod %s: start of the containers", tc.name)
	}
}
