package testenv

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestWriter sends logs to t.Log, so that they show only for failing tests.
type TestWriter struct{ T testing.TB }

func (w TestWriter) Write(p []byte) (int, error) {
	w.T.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// Logger logs everything, debug included, to t.Log.
func Logger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(TestWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Component is what podslo's New functions return: exporter.Exporter,
// agent.Agent.
type Component interface {
	Start(ctx context.Context) error
}

// RunComponent builds a component with build on a listener on a free
// loopback port, runs it in this process until the test ends, and returns
// the address it listens on. what names it in failures. When the test
// ends, the component's context is cancelled, and the test fails if Start
// returns an error or does not return within 30 s.
func RunComponent(t testing.TB, what string, build func(net.Listener) (Component, error)) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err, "listen for the %s", what)
	// The component's server closes it; this covers a build that fails.
	t.Cleanup(func() { _ = lis.Close() })
	c, err := build(lis)
	require.NoError(t, err, "build the %s", what)
	Run(t, what, c.Start)
	return lis.Addr().String()
}

// Run runs start in this process until the test ends; then it cancels
// start's context, and fails the test if start returns an error or does
// not return within 30 s.
func Run(t testing.TB, what string, start func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err, "%s stopped with an error", what)
		case <-time.After(30 * time.Second):
			// Where it hangs is what a fix needs, in CI above all.
			buf := make([]byte, 1<<22)
			buf = buf[:runtime.Stack(buf, true)]
			t.Errorf("%s did not stop within 30s of cancel; goroutines:\n%s", what, buf)
		}
	})
}

// WaitReady waits up to a minute for url's /readyz to answer 200, and fails
// the test if it never does.
func WaitReady(t testing.TB, url, what string) {
	t.Helper()
	WaitHTTP(t, url+"/readyz", what)
}

// WaitHTTP waits up to a minute for url to answer 200 (a server's
// readiness endpoint: /readyz, Prometheus' /-/ready), and fails the test
// if it never does.
func WaitHTTP(t testing.TB, url, what string) {
	t.Helper()
	require.Eventually(t, func() bool {
		resp, err := http.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 60*time.Second, 20*time.Millisecond, "%s never became ready", what)
}

// PodSpec is a pod of the integration tests: one pause container named
// "app", and what each test varies.
type PodSpec struct {
	Name, Node          string
	Labels, Annotations map[string]string
	Owner               *metav1.OwnerReference
	ServiceAccount      string
	RuntimeClass        string
	// Claims are PersistentVolumeClaims the pod mounts, by name.
	Claims []string
	// Ephemeral maps a generic ephemeral volume's name to the StorageClass
	// of its claim template.
	Ephemeral map[string]string
}

// CreatePod creates the pod s describes in namespace ns and returns it as
// the API server stored it.
func CreatePod(t testing.TB, c kubernetes.Interface, ns string, s PodSpec) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: ns, Labels: s.Labels, Annotations: s.Annotations},
		Spec: corev1.PodSpec{
			NodeName:           s.Node,
			ServiceAccountName: s.ServiceAccount,
			Containers:         []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
	if s.Owner != nil {
		pod.OwnerReferences = []metav1.OwnerReference{*s.Owner}
	}
	if s.RuntimeClass != "" {
		pod.Spec.RuntimeClassName = &s.RuntimeClass
	}
	for _, claim := range s.Claims {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "v-" + claim, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}})
	}
	for vol, class := range s.Ephemeral {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
			VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: corev1.PersistentVolumeClaimSpec{
				StorageClassName: &class,
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			}},
		}}})
	}
	created, err := c.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	require.NoError(t, err)
	return created
}
