package kwok_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/podslo/podslo/internal/testenv"
)

// holdingProxy stands between kwok and the API server. Armed with a path,
// it holds the next PATCH of that path in flight until released, then
// forwards it: an API server slow to answer one request, as one is right
// after it came back from an outage.
type holdingProxy struct {
	rp *httputil.ReverseProxy

	mu      sync.Mutex
	armed   string
	held    chan struct{} // closed once the armed request arrived
	release chan struct{} // closed to forward it
}

func newHoldingProxy(t *testing.T, cfg *rest.Config) (*holdingProxy, *httptest.Server) {
	target, err := url.Parse(cfg.Host)
	require.NoError(t, err)
	transport, err := rest.TransportFor(cfg)
	require.NoError(t, err)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.Transport = transport
	rp.FlushInterval = -1 // watches stream
	p := &holdingProxy{rp: rp}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	return p, srv
}

func (p *holdingProxy) arm(path string) (held, release chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed, p.held, p.release = path, make(chan struct{}), make(chan struct{})
	return p.held, p.release
}

func (p *holdingProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	hold := r.Method == http.MethodPatch && p.armed != "" && r.URL.Path == p.armed
	var release chan struct{}
	if hold {
		p.armed = ""
		close(p.held)
		release = p.release
	}
	p.mu.Unlock()
	if hold {
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
	}
	p.rp.ServeHTTP(w, r)
}

// proxyKubeconfig writes a kubeconfig that reaches the API server through
// the proxy, which adds the credentials.
func proxyKubeconfig(t *testing.T, server string) string {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, os.WriteFile(path, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: proxy
  cluster:
    server: %s
users:
- name: proxy
  user: {}
contexts:
- name: proxy
  context:
    cluster: proxy
    user: proxy
current-context: proxy
`, server), 0o600))
	return path
}

// TestAStageNeverLandsOnTheNextPodOfItsName replaces a pod by a new one of
// the same name while kwok's termination of the old one is in flight, as
// a chaos run did across an API server outage: kwok keys its stages by
// namespace/name and patches by name, so the old pod's termination, written
// from the old pod, reached the new one, which then showed containers
// started (and exited) and a terminal phase while no sandbox of its own
// was ever ready. The real kubelet cannot write that: it runs containers
// only in a ready sandbox, and its status updates go to the pod UID it
// syncs. The new pod must go through its own lifecycle, untouched.
func TestAStageNeverLandsOnTheNextPodOfItsName(t *testing.T) {
	env := testenv.Start(t)
	proxy, srv := newHoldingProxy(t, env.Config)
	runKwok(t, env, proxyKubeconfig(t, srv.URL))
	rec := watchPods(t, env.Client)
	c := env.Client
	ctx := context.Background()
	const ns, name = "same-name", "pod"
	key := ns + "/" + name
	_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)

	createAndBind(t, c, ns, name, nil)
	old := waitFor(t, rec, key, "", "the first pod Ready", func(s snapshot) bool { return isReady(s) })

	// The old pod's termination is kwok's next patch of the name: hold it
	// in flight, and meanwhile replace the pod.
	held, release := proxy.arm("/api/v1/namespaces/" + ns + "/pods/" + name + "/status")
	grace := int64(30)
	require.NoError(t, c.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace}))
	select {
	case <-held:
	case <-time.After(30 * time.Second):
		t.Fatal("kwok never patched the deleted pod's status")
	}
	zero := int64(0)
	require.NoError(t, c.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero, Preconditions: &metav1.Preconditions{UID: &old}}))
	require.Eventually(t, func() bool {
		_, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 30*time.Second, 20*time.Millisecond)
	createAndBind(t, c, ns, name, nil)
	pod, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	fresh := pod.UID
	require.NotEqual(t, old, fresh)
	// kwok admitted the new pod before the old pod's patch goes on.
	waitFor(t, rec, key, fresh, "the new pod admitted", func(s snapshot) bool { return sandboxStatus(s) == "False" })
	close(release)

	waitFor(t, rec, key, fresh, "the new pod Ready", func(s snapshot) bool { return isReady(s) })
	var sandboxReady bool
	for _, s := range rec.snapshots(key) {
		if s.UID != fresh {
			continue
		}
		require.NotContains(t, []string{"Succeeded", "Failed"}, s.Phase, "the new pod got the old pod's termination")
		if sandboxStatus(s) == "True" {
			sandboxReady = true
		}
		if !sandboxReady {
			require.Empty(t, containerStarts(s), "a container of the new pod started while no sandbox of it was ever ready")
		}
	}
}

// waitFor waits until a state of the pod at key (of UID uid, or any when
// empty) satisfies ok, and returns that pod's UID.
func waitFor(t *testing.T, rec *recorder, key string, uid types.UID, what string, ok func(snapshot) bool) types.UID {
	var found types.UID
	require.Eventually(t, func() bool {
		for _, s := range rec.snapshots(key) {
			if (uid == "" || s.UID == uid) && ok(s) {
				found = s.UID
				return true
			}
		}
		return false
	}, time.Minute, 20*time.Millisecond, "%s never came:\n%s", what, strings.Join(texts(rec.states(key)), "\n"))
	return found
}

func (r *recorder) snapshots(key string) []snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]snapshot(nil), r.pods[key]...)
}

func sandboxStatus(s snapshot) string {
	for _, c := range s.Conditions {
		if c.Type == "PodReadyToStartContainers" {
			return c.Status
		}
	}
	return ""
}

func isReady(s snapshot) bool {
	for _, c := range s.Conditions {
		if c.Type == "Ready" {
			return c.Status == "True"
		}
	}
	return false
}

// containerStarts lists what shows that a container ran: a start time in
// its state or last state, or a restart.
func containerStarts(s snapshot) []string {
	var out []string
	for _, c := range s.Containers {
		switch {
		case c.State.Running != nil:
			out = append(out, c.Name+" running")
		case c.State.Terminated != nil && !c.State.Terminated.StartedAt.IsZero():
			out = append(out, c.Name+" terminated after a start")
		}
		if c.LastState.Terminated != nil {
			out = append(out, c.Name+" has a last state")
		}
		if c.RestartCount > 0 {
			out = append(out, fmt.Sprintf("%s restarted %d times", c.Name, c.RestartCount))
		}
	}
	return out
}

// TestAStatusPatchNamingAnotherUIDIsRefused is what the stages' guard rests
// on: a pods/status patch that names a pod UID is refused by the API
// server on a pod of the same name and another UID (uid is immutable), and
// applied to the pod it names.
func TestAStatusPatchNamingAnotherUIDIsRefused(t *testing.T) {
	env := testenv.Start(t)
	c := env.Client
	ctx := context.Background()
	const ns, name = "uid-guard", "pod"
	_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	createAndBind(t, c, ns, name, nil)
	pod, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	patch := func(uid types.UID) error {
		body := fmt.Sprintf(`{"metadata":{"uid":%q},"status":{"conditions":[{"type":"PodReadyToStartContainers","status":"False","lastTransitionTime":%q}]}}`,
			uid, time.Now().UTC().Format(time.RFC3339))
		_, err := c.CoreV1().Pods(ns).Patch(ctx, name, types.StrategicMergePatchType, []byte(body), metav1.PatchOptions{}, "status")
		return err
	}
	err = patch("an-earlier-pod-of-the-name")
	require.True(t, apierrors.IsInvalid(err), "a patch naming another UID: %v", err)
	require.NoError(t, patch(pod.UID))
	got, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, pod.UID, got.UID)
	require.Equal(t, "False", sandboxStatus(snapshotOf(got, false)))
}
