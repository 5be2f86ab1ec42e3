package informers

import (
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/podslo/podslo/internal/kube/kubetest"
)

// Real kubelet FailedMount messages, and the KEP's own form.
func TestDefaultUserErrorEventRegex(t *testing.T) {
	re := regexp.MustCompile(DefaultUserErrorEventRegex)
	userErrors := []string{
		// Kubelet 1.20 and later (operation executor, event message).
		`MountVolume.SetUp failed for volume "config" : configmap "app-config" not found`,
		`MountVolume.SetUp failed for volume "db-creds" : secret "db" not found`,
		// Older kubelets quoted the API's NotFound error, with the plural.
		`MountVolume.SetUp failed for volume "config" : configmaps "app-config" not found`,
		`MountVolume.SetUp failed for volume "db-creds" : secrets "db" not found`,
		// Projected volumes list every source's error.
		`MountVolume.SetUp failed for volume "kube-api-access-x7k2p" : configmap "kube-root-ca.crt" not found`,
		`MountVolume.SetUp failed for volume "bundle" : [configmap "a" not found, secret "b" not found]`,
		`MountVolume.SetUp failed for volume "bundle" : [failed to fetch token: serviceaccounts "x" is forbidden, configmap "a" not found]`,
		// The KEP's example form.
		`MountVolume.SetUp failed for volume "config-map app" : config-map "app" not found`,
	}
	for _, m := range userErrors {
		assert.True(t, re.MatchString(m), "should match: %s", m)
	}
	platform := []string{
		// The kubelet's configmap manager has not registered the pod yet: a
		// kubelet matter, not the pod author's.
		`MountVolume.SetUp failed for volume "config" : object "default"/"app-config" not registered`,
		`MountVolume.SetUp failed for volume "pvc-1f0c" : rpc error: code = Internal desc = mount failed: exit status 32`,
		`MountVolume.MountDevice failed for volume "pvc-1f0c" : rpc error: code = DeadlineExceeded desc = context deadline exceeded`,
		`Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[data]: timed out waiting for the condition`,
		`MountVolume.SetUp failed for volume "config" : failed to sync configmap cache: timed out waiting for the condition`,
	}
	for _, m := range platform {
		assert.False(t, re.MatchString(m), "should not match: %s", m)
	}
}

// TestUserErrorEvents: the watcher matches FailedMount messages with the
// regular expression it was given, compiled once by its caller, and with
// DefaultUserErrorEventRegex without one.
func TestUserErrorEvents(t *testing.T) {
	failedMount := func(uid, message string) *corev1.Event {
		return &corev1.Event{
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: "web", UID: types.UID(uid)},
			Reason:         "FailedMount", Message: message,
		}
	}
	const custom = `MountVolume.SetUp failed for volume "cfg" : quota exceeded`
	const missingSecret = `MountVolume.SetUp failed for volume "cfg" : secret "cfg" not found`
	for _, tc := range []struct {
		name string
		re   *regexp.Regexp
		want []string
	}{
		{name: "given", re: regexp.MustCompile(`quota exceeded$`), want: []string{"user error u1 ns/web"}},
		{name: "default", want: []string{"user error u2 ns/web"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{}
			w, err := New(kubetest.Wrap(fake.NewClientset()), rec, Options{UserErrorEvents: tc.re})
			require.NoError(t, err)
			w.handleEvent(failedMount("u1", custom))
			w.handleEvent(failedMount("u2", missingSecret))
			assert.Equal(t, tc.want, rec.calls)
		})
	}
}
