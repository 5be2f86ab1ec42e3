package probe

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

func TestTarget(t *testing.T) {
	pod := &corev1.Pod{
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "web", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}, {Name: "metrics", ContainerPort: 9090}}},
			{Name: "sidecar", Ports: []corev1.ContainerPort{{Name: "admin", ContainerPort: 15000}, {Name: "metrics", ContainerPort: 15090}}},
		}},
		Status: corev1.PodStatus{PodIP: "10.1.2.3"},
	}
	for _, tc := range []struct {
		name    string
		value   string
		pod     *corev1.Pod
		want    Target
		wantErr string
	}{
		{"number, first container by default", `{"tcpSocket":{"port":5432}}`, pod,
			Target{Container: "web", Host: "10.1.2.3", Port: 5432}, ""},
		{"number in a named container", `{"container":"sidecar","httpGet":{"port":15021}}`, pod,
			Target{Container: "sidecar", Host: "10.1.2.3", Port: 15021}, ""},
		{"named port in the named container", `{"container":"sidecar","httpGet":{"port":"metrics"}}`, pod,
			Target{Container: "sidecar", Host: "10.1.2.3", Port: 15090}, ""},
		{"named port in any container: the one declaring it", `{"httpGet":{"port":"admin"}}`, pod,
			Target{Container: "sidecar", Host: "10.1.2.3", Port: 15000}, ""},
		{"named port declared twice: the first container", `{"tcpSocket":{"port":"metrics"}}`, pod,
			Target{Container: "web", Host: "10.1.2.3", Port: 9090}, ""},
		{"grpc", `{"container":"sidecar","grpc":{"port":15010}}`, pod,
			Target{Container: "sidecar", Host: "10.1.2.3", Port: 15010}, ""},
		{"IPv6", `{"tcpSocket":{"port":80}}`, &corev1.Pod{Spec: pod.Spec, Status: corev1.PodStatus{PodIP: "fd00::1"}},
			Target{Container: "web", Host: "fd00::1", Port: 80}, ""},
		{"missing container", `{"container":"db","tcpSocket":{"port":5432}}`, pod, Target{},
			`container: Invalid value: "db": the pod has no container of this name`},
		{"port missing from the named container", `{"container":"web","httpGet":{"port":"admin"}}`, pod, Target{},
			`httpGet.port: Invalid value: "admin": container "web" declares no port of this name`},
		{"port declared by no container", `{"tcpSocket":{"port":"db"}}`, pod, Target{},
			`tcpSocket.port: Invalid value: "db": no container of the pod declares a port of this name`},
		{"pod without containers", `{"tcpSocket":{"port":80}}`, &corev1.Pod{Status: pod.Status}, Target{},
			`container: Required value: the pod has no containers`},
		{"an invalid probe wins over a missing IP", `{"container":"db","tcpSocket":{"port":80}}`, &corev1.Pod{Spec: pod.Spec}, Target{},
			`container: Invalid value: "db": the pod has no container of this name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Parse(tc.value, 0)
			require.NoError(t, err)
			got, err := p.Target(tc.pod)
			if tc.wantErr != "" {
				require.EqualError(t, err, tc.wantErr)
				requireFieldErrors(t, err)
				assert.False(t, errors.Is(err, ErrNoPodIP))
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.want, got)
		})
	}
	t.Run("no pod IP yet", func(t *testing.T) {
		p, err := Parse(`{"httpGet":{"port":"http"}}`, 0)
		require.NoError(t, err)
		_, err = p.Target(&corev1.Pod{Spec: pod.Spec})
		require.ErrorIs(t, err, ErrNoPodIP)
	})
}
