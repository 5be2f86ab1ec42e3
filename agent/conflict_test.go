package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/podslo/podslo/internal/testenv"
)

// statusHook sits in the agent's HTTP transport and keeps every request
// the agent sends about a pod of one namespace. Armed, it holds the agent's
// next PATCH of one pod's status whose body contains a string, runs a
// function (another writer's change, made through another client), and
// only then lets the PATCH go: the agent's write then carries the
// resourceVersion of a pod that has changed since it decided, as when the
// kubelet writes between the agent's read and its write.
type statusHook struct {
	next   http.RoundTripper
	prefix string // "/api/v1/namespaces/<ns>/pods/"

	mu    sync.Mutex
	calls []call
	path  string
	match string
	run   func() error
	fired chan error
}

// call is one request of the agent about a pod.
type call struct {
	method, path string
	status       int
	// hooked: the PATCH the armed hook held.
	hooked bool
}

// arm makes the next PATCH of name's status that contains match run fn
// first. The returned channel receives fn's error once it ran.
func (h *statusHook) arm(name, match string, fn func() error) <-chan error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.path = h.prefix + name + "/status"
	h.match, h.run, h.fired = match, fn, make(chan error, 1)
	return h.fired
}

func (h *statusHook) RoundTrip(req *http.Request) (*http.Response, error) {
	if !strings.HasPrefix(req.URL.Path, h.prefix) {
		return h.next.RoundTrip(req)
	}
	out := req
	var run func() error
	var fired chan error
	if req.Method == http.MethodPatch && req.Body != nil {
		body, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		out = req.Clone(req.Context())
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		h.mu.Lock()
		if h.run != nil && req.URL.Path == h.path && bytes.Contains(body, []byte(h.match)) {
			run, fired = h.run, h.fired
			h.run = nil
		}
		h.mu.Unlock()
	}
	var runErr error
	if run != nil {
		runErr = run()
	}
	resp, err := h.next.RoundTrip(out)
	c := call{method: req.Method, path: req.URL.Path, hooked: run != nil}
	if err == nil {
		c.status = resp.StatusCode
	}
	h.mu.Lock()
	h.calls = append(h.calls, c)
	h.mu.Unlock()
	if fired != nil {
		fired <- runErr
	}
	return resp, err
}

// after returns the hooked PATCH of pod name and every later request
// about that pod.
func (h *statusHook) after(name string) []call {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []call
	for _, c := range h.calls {
		if c.path != h.prefix+name && c.path != h.prefix+name+"/status" {
			continue
		}
		if c.hooked {
			out = nil
		}
		if c.hooked || out != nil {
			out = append(out, c)
		}
	}
	return out
}

// lines keeps what a logger wrote, line by line, and passes it to t.Log.
type lines struct {
	t   testing.TB
	mu  sync.Mutex
	all []string
}

func (l *lines) Write(p []byte) (int, error) {
	line := strings.TrimRight(string(p), "\n")
	l.t.Log(line)
	l.mu.Lock()
	l.all = append(l.all, line)
	l.mu.Unlock()
	return len(p), nil
}

func (l *lines) containing(s string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.all {
		if strings.Contains(line, s) {
			out = append(out, line)
		}
	}
	return out
}

// patchReady plays the kubelet outside the test goroutine: Ready and
// ContainersReady to ready since since, and a third party's condition
// that the agent must keep.
func patchReady(c kubernetes.Interface, pod *corev1.Pod, ready bool, since time.Time, audit string) error {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	at := metav1.NewTime(since)
	body, err := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.PodCondition{
		{Type: corev1.ContainersReady, Status: status, LastTransitionTime: at},
		{Type: corev1.PodReady, Status: status, LastTransitionTime: at},
		{Type: "example.com/Audited", Status: corev1.ConditionTrue, LastTransitionTime: at, Reason: audit},
	}}})
	if err != nil {
		return err
	}
	_, err = c.CoreV1().Pods(pod.Namespace).Patch(context.Background(), pod.Name, types.StrategicMergePatchType, body, metav1.PatchOptions{}, "status")
	return err
}

// TestWriteConflicts makes another writer change a pod between the
// agent's decision and its PATCH, on a real API server. The PATCH carries
// the resourceVersion the decision was made on, so it fails with 409; the
// agent then reads the live pod and decides again at once, so that a
// decision made on a stale copy never lands, and a pod re-created under
// the same name gets nothing of the old pod's.
func TestWriteConflicts(t *testing.T) {
	env := testenv.Start(t)
	c := env.Client
	ctx := context.Background()
	createNode(t, c, "node-a")
	const ns = "conflicts"
	testenv.CreateNamespace(t, c, ns, nil)
	rec := record(t, c, ns)

	hook := &statusHook{prefix: "/api/v1/namespaces/" + ns + "/pods/"}
	cfg := rest.CopyConfig(env.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { hook.next = rt; return hook })
	logs := &lines{t: t}
	url := startAgent(t, Options{NodeName: "node-a",
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}, WithRestConfig(cfg))

	// writes waits until the agent counted exactly success successful
	// writes (a PATCH's count may come after its watch event), and at
	// least conflicts conflicts: besides the ones a test forces, a sync
	// that runs on a cache not yet holding the agent's own last write
	// meets one too, and settles it the same way.
	writes := func(t *testing.T, success, conflicts float64) {
		t.Helper()
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			m := scrape(c, url)
			assert.GreaterOrEqual(c, m.writes[resultConflict], conflicts)
			m.writes[resultConflict] = 0
			assert.Equal(c, map[string]float64{
				resultSuccess: success, resultConflict: 0,
				resultNotFound: 0, resultForbidden: 0, resultRefused: 0, resultError: 0,
			}, m.writes)
		}, 30*time.Second, 10*time.Millisecond)
	}
	// notReady creates a pod with minReadySeconds 0 and waits for the
	// agent's first write, False/NotReady.
	notReady := func(t *testing.T, name string) *corev1.Pod {
		t.Helper()
		p := testenv.CreatePod(t, c, ns, testenv.PodSpec{Name: name, Node: "node-a", Annotations: map[string]string{MinReadySecondsAnnotation: "0"}})
		kubelet(t, c, p, kubeletStatus{ready: false, readySince: now()})
		got := rec.waitStable(t, name, 1)
		require.Len(t, got, 1)
		require.Equal(t, [2]string{"False", ReasonNotReady}, [2]string{string(got[0].cond.Status), got[0].cond.Reason})
		return p
	}
	// stableTrue is in the body of a PATCH that writes Stable=True: the
	// agent's PATCH of the Stable condition carries that condition only.
	const stableTrue = `"status":"True"`
	podPath := func(name string) string { return hook.prefix + name }

	t.Run("a conflict with an unrelated change is retried on the live pod", func(t *testing.T) {
		p := notReady(t, "web")
		writes(t, 1, 0)
		// The kubelet's audit condition changes under the agent's write of
		// Stable=True: nothing the decision depends on.
		ready := now()
		fired := hook.arm("web", stableTrue, func() error { return patchReady(c, p, true, ready, "AuditedAgain") })
		require.NoError(t, patchReady(c, p, true, ready, "Audited"))
		require.NoError(t, waitFired(t, fired))
		got := rec.waitStable(t, "web", 2)
		assert.Equal(t, transition{"True", ReasonMinReadySecondsElapsed, ready}, transitions(got)[1])
		writes(t, 2, 1)
		// The held PATCH lost; the same sync read the live pod and wrote
		// again, on it.
		assert.Equal(t, []call{
			{http.MethodPatch, podPath("web") + "/status", http.StatusConflict, true},
			{http.MethodGet, podPath("web"), http.StatusOK, false},
			{http.MethodPatch, podPath("web") + "/status", http.StatusOK, false},
		}, hook.waitAfter(t, "web", 3)[:3])
		live, err := c.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		audit, ok := conditionOf(live, "example.com/Audited")
		require.True(t, ok)
		assert.Equal(t, "AuditedAgain", audit.Reason, "the retry kept the other writer's change")
		assert.Len(t, rec.stableOf(t, "web"), 2, "one write per transition")
	})

	t.Run("a decision made on a stale copy never lands", func(t *testing.T) {
		p := notReady(t, "api")
		writes(t, 3, 1)
		// Ready drops again between the agent's decision (Stable=True) and
		// its PATCH.
		fired := hook.arm("api", stableTrue, func() error { return patchReady(c, p, false, now(), "Audited") })
		require.NoError(t, patchReady(c, p, true, now(), "Audited"))
		require.NoError(t, waitFired(t, fired))
		// The live pod is not Ready: Stable stays False/NotReady, and the
		// sync that met the conflict writes nothing.
		calls := hook.waitAfter(t, "api", 2)
		assert.Equal(t, []call{
			{http.MethodPatch, podPath("api") + "/status", http.StatusConflict, true},
			{http.MethodGet, podPath("api"), http.StatusOK, false},
		}, calls[:2])
		// The next Ready is the only way to True.
		ready := now()
		require.NoError(t, patchReady(c, p, true, ready, "Audited"))
		got := rec.waitStable(t, "api", 2)
		assert.Equal(t, transition{"True", ReasonMinReadySecondsElapsed, ready}, transitions(got)[1])
		writes(t, 4, 2)
		assert.Len(t, rec.stableOf(t, "api"), 2, "the stale Stable=True never landed")
	})

	t.Run("a pod re-created under the same name gets nothing of the old one", func(t *testing.T) {
		old := notReady(t, "db-0")
		writes(t, 5, 2)
		// As a StatefulSet does: the pod is deleted and created again
		// under its name, between the agent's decision for the old pod
		// and its PATCH.
		var recreated *corev1.Pod
		fired := hook.arm("db-0", stableTrue, func() error {
			zero := int64(0)
			if err := c.CoreV1().Pods(ns).Delete(ctx, "db-0", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
				return err
			}
			var err error
			recreated, err = c.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "db-0", Namespace: ns, Annotations: map[string]string{MinReadySecondsAnnotation: "0"}},
				Spec:       corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
			}, metav1.CreateOptions{})
			return err
		})
		require.NoError(t, patchReady(c, old, true, now(), "Audited"))
		require.NoError(t, waitFired(t, fired))
		require.NotEqual(t, old.UID, recreated.UID)
		calls := hook.waitAfter(t, "db-0", 2)
		assert.Equal(t, []call{
			{http.MethodPatch, podPath("db-0") + "/status", http.StatusConflict, true},
			{http.MethodGet, podPath("db-0"), http.StatusOK, false},
		}, calls[:2])
		// The new pod's own first decision: not Ready, False/NotReady. The
		// old pod's Stable=True never reaches it.
		var firstCond corev1.PodCondition
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			live, err := c.CoreV1().Pods(ns).Get(ctx, "db-0", metav1.GetOptions{})
			require.NoError(ct, err)
			require.Equal(ct, recreated.UID, live.UID)
			cond, ok := stableOf(live)
			require.True(ct, ok, "the new pod has no Stable condition yet")
			firstCond = cond
		}, 30*time.Second, 10*time.Millisecond)
		assert.Equal(t, [2]string{"False", ReasonNotReady}, [2]string{string(firstCond.Status), firstCond.Reason})
		writes(t, 6, 3)

		ready := now()
		require.NoError(t, patchReady(c, recreated, true, ready, "Audited"))
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			live, err := c.CoreV1().Pods(ns).Get(ctx, "db-0", metav1.GetOptions{})
			require.NoError(ct, err)
			cond, ok := stableOf(live)
			require.True(ct, ok)
			assert.Equal(ct, transition{"True", ReasonMinReadySecondsElapsed, ready}, transition{cond.Status, cond.Reason, cond.LastTransitionTime.UTC()})
		}, 30*time.Second, 10*time.Millisecond)
		writes(t, 7, 3)
		var trues []transition
		for _, tr := range transitions(rec.stableOf(t, "db-0")) {
			if tr.Status == corev1.ConditionTrue {
				trues = append(trues, tr)
			}
		}
		assert.Equal(t, []transition{{"True", ReasonMinReadySecondsElapsed, ready}}, trues, "only the new pod's own Stable=True")
	})

	// Each conflict was settled inside the sync that met it, by reading the
	// live pod, not by the queue's error path.
	assert.Empty(t, logs.containing("Writing pod conditions failed"))
}

// waitAfter waits until the hooked PATCH of pod name and at least n-1
// later requests about that pod have been sent, and returns them all: the
// agent's retry runs after the hooked PATCH has returned.
func (h *statusHook) waitAfter(t *testing.T, name string, n int) []call {
	t.Helper()
	var calls []call
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		calls = h.after(name)
		assert.GreaterOrEqual(c, len(calls), n)
	}, 30*time.Second, 10*time.Millisecond, "requests about pod %s", name)
	return calls
}

// waitFired waits for an armed hook to have run, and returns its error.
func waitFired(t *testing.T, fired <-chan error) error {
	t.Helper()
	select {
	case err := <-fired:
		return err
	case <-time.After(30 * time.Second):
		return errors.New("the agent never sent the PATCH the hook waits for")
	}
}

func conditionOf(pod *corev1.Pod, typ corev1.PodConditionType) (corev1.PodCondition, bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type == typ {
			return c, true
		}
	}
	return corev1.PodCondition{}, false
}
