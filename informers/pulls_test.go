package informers

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	"github.com/podslo/podslo/lifecycle"
)

// TestPullEvents holds the kubelet's image event messages, in each form
// kubelets have written them, to what podslo reads of them.
func TestPullEvents(t *testing.T) {
	const app = "spec.containers{app}"
	for _, tc := range []struct {
		reason, fieldPath, message string
		want                       lifecycle.PullEvent
		ok                         bool
	}{
		{"Pulled", app, `Successfully pulled image "registry.k8s.io/pause:3.10" in 1.234s (1.5s including waiting). Image size: 320368 bytes.`,
			lifecycle.PullEvent{Container: app, Result: lifecycle.PullDone, Ms: 1500, Bytes: 320368}, true},
		{"Pulled", app, `Successfully pulled image "nginx" in 812ms (812ms including waiting). Image size: 72 bytes.`,
			lifecycle.PullEvent{Container: app, Result: lifecycle.PullDone, Ms: 812, Bytes: 72}, true},
		{"Pulled", app, `Successfully pulled image "nginx" in 1m2.345s (1m3.001s including waiting)`,
			lifecycle.PullEvent{Container: app, Result: lifecycle.PullDone, Ms: 63001}, true},
		// Before 1.28: the pull alone.
		{"Pulled", app, `Successfully pulled image "nginx" in 2.5s`,
			lifecycle.PullEvent{Container: app, Result: lifecycle.PullDone, Ms: 2500}, true},
		{"Pulled", "spec.initContainers{setup}", `Successfully pulled image "busybox" in 0s (0s including waiting). Image size: 1 bytes.`,
			lifecycle.PullEvent{Container: "spec.initContainers{setup}", Init: true, Result: lifecycle.PullDone, Bytes: 1}, true},
		{"Pulled", app, `Container image "nginx" already present on machine`,
			lifecycle.PullEvent{Container: app, Result: lifecycle.PullCached}, true},
		{"Pulled", app, `Container image "nginx" already present on machine and can be accessed by the pod`,
			lifecycle.PullEvent{Container: app, Result: lifecycle.PullCached}, true},
		{"Failed", app, `Failed to pull image "nope:1": rpc error: code = NotFound desc = failed to pull and unpack image "docker.io/library/nope:1": not found`,
			lifecycle.PullEvent{Container: app, Result: lifecycle.PullFailed}, true},
		{"Failed", app, `Error: ErrImagePull`, lifecycle.PullEvent{Container: app, Result: lifecycle.PullFailed}, true},
		{"Failed", app, `Error: ImagePullBackOff`, lifecycle.PullEvent{Container: app, Result: lifecycle.PullFailed}, true},
		{"BackOff", app, `Back-off pulling image "nope:1"`, lifecycle.PullEvent{Container: app, Result: lifecycle.PullFailed}, true},
		// Not pulls.
		{"BackOff", app, `Back-off restarting failed container app in pod web_ns(uid)`, lifecycle.PullEvent{}, false},
		{"Failed", app, `Error: failed to create containerd task: exec: "nope": not found`, lifecycle.PullEvent{}, false},
		{"Pulled", app, `Successfully pulled image "nginx"`, lifecycle.PullEvent{}, false},
		{"Pulled", app, `Successfully pulled image "nginx" in soon`, lifecycle.PullEvent{}, false},
		{"Pulled", "spec.ephemeralContainers{debug}", `Successfully pulled image "busybox" in 1s (1s including waiting)`, lifecycle.PullEvent{}, false},
		// A size beyond uint64 is no size; the pull still counts.
		{"Pulled", app, `Successfully pulled image "nginx" in 1s (1s including waiting). Image size: 99999999999999999999999 bytes.`,
			lifecycle.PullEvent{Container: app, Result: lifecycle.PullDone, Ms: 1000}, true},
		// About the pod, as kwok's stages write it: no container named.
		{"Pulled", "", `Successfully pulled image "busybox" in 1s (1s including waiting)`, lifecycle.PullEvent{Result: lifecycle.PullDone, Ms: 1000}, true},
	} {
		t.Run(tc.reason+" "+tc.message, func(t *testing.T) {
			got, ok := pullEvent(&corev1.Event{Reason: tc.reason, Message: tc.message, InvolvedObject: corev1.ObjectReference{FieldPath: tc.fieldPath}})
			assert.Equal(t, tc.ok, ok)
			if tc.ok {
				assert.Equal(t, tc.want, got)
			}
		})
	}
}

func TestEventSelectors(t *testing.T) {
	assert.Equal(t, []string{
		"reason=FailedMount,involvedObject.kind=Pod,metadata.namespace!=kube-system",
		"reason=Pulled,involvedObject.kind=Pod,metadata.namespace!=kube-system",
		"reason=Failed,involvedObject.kind=Pod,metadata.namespace!=kube-system",
	}, eventSelectors("metadata.namespace!=kube-system"))
}
