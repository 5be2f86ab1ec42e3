package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/podslo/podslo/agent/probe"
	"github.com/podslo/podslo/internal/testenv"
)

// period is the probes' period in these tests: the 100 ms. The
// timeout equals it, the longest the rule "timeout ≤ period" allows.
const period = 100 * time.Millisecond

// fastProbe is a 100 ms probe with a 100 ms timeout; handler is its JSON
// handler, such as `"httpGet":{"path":"/healthz","port":"health"}`.
func fastProbe(handler string) string {
	return `{` + handler + `,"periodSeconds":1,"periodMilliseconds":-900,"timeoutSeconds":1,"timeoutMilliseconds":-900,"failureThreshold":3}`
}

// gateChange is one change of a pod's gate condition as a watch delivered it.
type gateChange struct {
	status corev1.ConditionStatus
	reason string
	msg    string
	at     time.Time
}

// gates watches a namespace and keeps every change of each pod's gate
// condition, with its arrival time, and every Event the agent sends.
type gates struct {
	mu      sync.Mutex
	changes map[string][]gateChange
}

func watchGates(t *testing.T, c kubernetes.Interface, ns string) *gates {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := c.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	g := &gates{changes: map[string][]gateChange{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			now := time.Now()
			for _, cond := range pod.Status.Conditions {
				if cond.Type != DefaultProbeConditionType {
					continue
				}
				g.mu.Lock()
				h := g.changes[pod.Name]
				if len(h) == 0 || h[len(h)-1].status != cond.Status || h[len(h)-1].reason != cond.Reason || h[len(h)-1].msg != cond.Message {
					g.changes[pod.Name] = append(h, gateChange{cond.Status, cond.Reason, cond.Message, now})
				}
				g.mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		cancel()
		w.Stop()
		<-done
	})
	return g
}

// wait returns the first change of the pod's gate to status, at or after
// the n-th change.
func (g *gates) wait(t *testing.T, pod string, n int, status corev1.ConditionStatus) gateChange {
	t.Helper()
	var got gateChange
	require.Eventually(t, func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		h := g.changes[pod]
		for i := n; i < len(h); i++ {
			if h[i].status == status {
				got = h[i]
				return true
			}
		}
		return false
	}, 20*time.Second, 5*time.Millisecond, "pod %s: gate never turned %s after change %d", pod, status, n)
	return got
}

func (g *gates) of(pod string) []gateChange {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]gateChange(nil), g.changes[pod]...)
}

// startProbedPod creates a pod on node with the gate, the probe annotation
// and a port named "health", then plays the kubelet: the pod gets ip and a
// running container.
func startProbedPod(t *testing.T, c kubernetes.Interface, ns, name, node, ip string, port int, annotation string) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{probe.Annotation: annotation}},
		Spec: corev1.PodSpec{
			NodeName:       node,
			ReadinessGates: []corev1.PodReadinessGate{{ConditionType: DefaultProbeConditionType}},
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
				Ports: []corev1.ContainerPort{{Name: "health", ContainerPort: int32(port)}}}},
		},
	}
	created, err := c.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	require.NoError(t, err)
	return runContainer(t, c, created, ip, name+"-1")
}

// runContainer patches the pod's status as the kubelet does when the
// container (re)starts: a new container ID and start time.
func runContainer(t *testing.T, c kubernetes.Interface, pod *corev1.Pod, ip, containerID string) *corev1.Pod {
	t.Helper()
	started := metav1.NewTime(time.Now())
	patch := map[string]any{"status": map[string]any{
		"podIP":  ip,
		"podIPs": []corev1.PodIP{{IP: ip}},
		"containerStatuses": []corev1.ContainerStatus{{
			Name: "app", Image: "registry.k8s.io/pause:3.10", ImageID: "registry.k8s.io/pause@sha256:0",
			ContainerID: "containerd://" + containerID,
			State:       corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}},
		}},
	}}
	body, err := json.Marshal(patch)
	require.NoError(t, err)
	updated, err := c.CoreV1().Pods(pod.Namespace).Patch(context.Background(), pod.Name, types.StrategicMergePatchType, body, metav1.PatchOptions{}, "status")
	require.NoError(t, err)
	return updated
}

// healthServer is an HTTP health endpoint whose answer the test switches;
// it counts the probes it answered each way.
type healthServer struct {
	healthy            atomic.Bool
	stall              chan struct{}
	passed, failed     atomic.Int64
	lastAgent, lastHdr atomic.Value
	first              atomic.Pointer[time.Time]
}

func (h *healthServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	h.first.CompareAndSwap(nil, &now)
	h.lastAgent.Store(r.UserAgent())
	h.lastHdr.Store(r.Header.Get("X-Probe"))
	if h.stall != nil {
		select {
		case <-h.stall:
		case <-r.Context().Done():
		}
		return
	}
	if r.URL.Path == "/healthz" && h.healthy.Load() {
		h.passed.Add(1)
		w.WriteHeader(http.StatusOK)
		return
	}
	h.failed.Add(1)
	w.WriteHeader(http.StatusServiceUnavailable)
}

// listen listens on a TCP port of ip, a loopback address, until the test
// ends.
func listen(t *testing.T, ip string) net.Listener {
	t.Helper()
	lis, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	require.NoError(t, err)
	t.Cleanup(func() { lis.Close() })
	return lis
}

func serveHTTP(t *testing.T, ip string, h *healthServer) int {
	t.Helper()
	lis := listen(t, ip)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: time.Second}
	go srv.Serve(lis)
	t.Cleanup(func() {
		if h.stall != nil {
			close(h.stall)
		}
		srv.Close()
	})
	return lis.Addr().(*net.TCPAddr).Port
}

// probeMetricsOf reads the prober's metrics from the agent's /metrics.
type probeScrape struct {
	total   map[string]float64 // podslo_agent_probe_total by result
	writes  map[string]float64 // condition writes of the gate type, by result
	workers float64
	invalid float64
	// toCondition is the count of podslo_agent_probe_to_condition_seconds.
	toCondition uint64
	// durations is the count of podslo_agent_probe_duration_seconds by
	// probe_type/result.
	durations map[string]uint64
}

// scrapeProbes reads the prober's metrics; like scrape, it takes a
// require.TestingT so that require.EventuallyWithT's CollectT can call it.
func scrapeProbes(t require.TestingT, url string) probeScrape {
	helper(t)
	resp, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	s := probeScrape{total: map[string]float64{}, writes: map[string]float64{}, durations: map[string]uint64{}}
	for _, m := range fams[probeTotalName].GetMetric() {
		s.total[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
	}
	for _, m := range fams[writesName].GetMetric() {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		if l["condition_type"] == DefaultProbeConditionType {
			s.writes[l["result"]] = m.GetCounter().GetValue()
		}
	}
	for _, m := range fams[probeDurationName].GetMetric() {
		l := map[string]string{}
		for _, p := range m.GetLabel() {
			l[p.GetName()] = p.GetValue()
		}
		s.durations[l["probe_type"]+"/"+l["result"]] = m.GetHistogram().GetSampleCount()
	}
	for _, name := range []string{workersName, invalidName, toConditionName} {
		require.Contains(t, fams, name)
		require.Len(t, fams[name].GetMetric(), 1, name)
	}
	s.workers = fams[workersName].GetMetric()[0].GetGauge().GetValue()
	s.invalid = fams[invalidName].GetMetric()[0].GetCounter().GetValue()
	s.toCondition = fams[toConditionName].GetMetric()[0].GetHistogram().GetSampleCount()
	return s
}

// agentEvents lists the Events the agent sent about a pod, as "reason:
// message".
func agentEvents(t require.TestingT, c kubernetes.Interface, ns, pod string) []string {
	helper(t)
	list, err := c.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("involvedObject.name", pod).String(),
	})
	require.NoError(t, err)
	var out []string
	for _, e := range list.Items {
		if e.Source.Component == fieldManager || e.ReportingController == fieldManager {
			out = append(out, e.Type+" "+e.Reason+": "+e.Message)
		}
	}
	return out
}

// gateBound is how late a gate change may arrive after the health change
// that causes it. A change takes a few probe periods, a PATCH and a watch
// event, well under a second on an idle machine (assertWithin logs it),
// but a loaded CI machine running -race can stall any of them: the bound
// only catches a change that never comes on its own. What these tests hold
// exact is one write per transition.
const gateBound = 5 * time.Second

// assertWithin checks that a gate change arrived no later than gateBound
// after the health change at since.
func assertWithin(t *testing.T, what string, got gateChange, since time.Time) {
	t.Helper()
	t.Logf("%s: %s after the server changed", what, got.at.Sub(since))
	assert.LessOrEqual(t, got.at.Sub(since), gateBound, "%s", what)
}

func TestReadinessGateProbesOnRealAPIServer(t *testing.T) {
	env := testenv.Start(t)
	c := env.Client
	ctx := context.Background()
	createNode(t, c, "node-a")
	const ns = "gates"
	testenv.CreateNamespace(t, c, ns, nil)
	g := watchGates(t, c, ns)
	url := startAgent(t, Options{NodeName: "node-a"}, WithRestConfig(env.Config))
	// The servers live as long as the agent: a server stopped at the end
	// of its subtest would flip its pod's gate during the next one.
	whole := t

	t.Run("http", func(t *testing.T) {
		h := &healthServer{}
		port := serveHTTP(whole, "127.0.0.2", h)
		startProbedPod(t, c, ns, "web", "node-a", "127.0.0.2", port,
			fastProbe(`"httpGet":{"path":"/healthz","port":"health","httpHeaders":[{"name":"X-Probe","value":"podslo"}]}`))

		down := g.wait(t, "web", 0, corev1.ConditionFalse)
		assert.Equal(t, ReasonProbeFailed, down.reason)
		assert.Equal(t, "HTTP probe failed with statuscode: 503", down.msg)
		assert.GreaterOrEqual(t, h.failed.Load(), int64(3), "False before failureThreshold failures")
		assert.Equal(t, "podslo", h.lastHdr.Load())

		healthyAt := time.Now()
		h.healthy.Store(true)
		up := g.wait(t, "web", 1, corev1.ConditionTrue)
		assert.Equal(t, ReasonProbeSucceeded, up.reason)
		assertWithin(t, "True", up, healthyAt)

		// Let many probes pass: none of them may write.
		passed := h.passed.Load()
		require.Eventually(t, func() bool { return h.passed.Load() >= passed+10 }, 30*time.Second, period)

		failedBefore := h.failed.Load()
		sickAt := time.Now()
		h.healthy.Store(false)
		down = g.wait(t, "web", 2, corev1.ConditionFalse)
		assert.Equal(t, ReasonProbeFailed, down.reason)
		assert.GreaterOrEqual(t, h.failed.Load()-failedBefore, int64(3), "False after failureThreshold (3) failures, not before")
		// The third failure comes two periods after the first at the
		// earliest.
		assert.GreaterOrEqual(t, down.at.Sub(sickAt), 2*period-10*time.Millisecond)
		assertWithin(t, "False", down, sickAt)

		assert.Len(t, g.of("web"), 3, "one change per transition: %+v", g.of("web"))
		// The watch can deliver a change before the PATCH's response has
		// reached the agent, which counts it then.
		var m probeScrape
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			m = scrapeProbes(c, url)
			assert.GreaterOrEqual(c, m.toCondition, uint64(3))
		}, 30*time.Second, 5*time.Millisecond)
		assert.Equal(t, float64(3), m.writes[resultSuccess], "a PATCH per transition, never per probe")
		assert.GreaterOrEqual(t, m.total[string(probe.Success)], float64(passed+10))
		assert.Equal(t, uint64(3), m.toCondition)
	})

	t.Run("tcp", func(t *testing.T) {
		// A port nobody listens on yet: the probe's connection is refused.
		lis, err := net.Listen("tcp", "127.0.0.3:0")
		require.NoError(t, err)
		port := lis.Addr().(*net.TCPAddr).Port
		require.NoError(t, lis.Close())
		startProbedPod(t, c, ns, "cache", "node-a", "127.0.0.3", port, fastProbe(`"tcpSocket":{"port":`+strconv.Itoa(port)+`}`))

		down := g.wait(t, "cache", 0, corev1.ConditionFalse)
		assert.Equal(t, ReasonProbeFailed, down.reason)
		assert.Contains(t, down.msg, "connection refused")

		openAt := time.Now()
		lis, err = net.Listen("tcp", net.JoinHostPort("127.0.0.3", strconv.Itoa(port)))
		require.NoError(t, err)
		whole.Cleanup(func() { lis.Close() })
		go func() {
			for {
				conn, err := lis.Accept()
				if err != nil {
					return
				}
				conn.Close()
			}
		}()
		up := g.wait(t, "cache", 1, corev1.ConditionTrue)
		assert.Equal(t, ReasonProbeSucceeded, up.reason)
		assertWithin(t, "True", up, openAt)
	})

	t.Run("grpc", func(t *testing.T) {
		lis := listen(whole, "127.0.0.4")
		hs := health.NewServer()
		hs.SetServingStatus("podslo.test.Ready", healthpb.HealthCheckResponse_NOT_SERVING)
		srv := grpc.NewServer()
		healthpb.RegisterHealthServer(srv, hs)
		go srv.Serve(lis)
		whole.Cleanup(srv.Stop)
		port := lis.Addr().(*net.TCPAddr).Port
		startProbedPod(t, c, ns, "rpc", "node-a", "127.0.0.4", port,
			fastProbe(`"grpc":{"port":`+strconv.Itoa(port)+`,"service":"podslo.test.Ready"}`))

		down := g.wait(t, "rpc", 0, corev1.ConditionFalse)
		assert.Equal(t, ReasonProbeFailed, down.reason)
		assert.Contains(t, down.msg, "NOT_SERVING")

		servingAt := time.Now()
		hs.SetServingStatus("podslo.test.Ready", healthpb.HealthCheckResponse_SERVING)
		up := g.wait(t, "rpc", 1, corev1.ConditionTrue)
		assertWithin(t, "True", up, servingAt)
	})

	t.Run("timeout", func(t *testing.T) {
		h := &healthServer{stall: make(chan struct{})}
		port := serveHTTP(whole, "127.0.0.5", h)
		startProbedPod(t, c, ns, "slow", "node-a", "127.0.0.5", port, fastProbe(`"httpGet":{"path":"/healthz","port":"health"}`))
		down := g.wait(t, "slow", 0, corev1.ConditionFalse)
		assert.Equal(t, ReasonProbeTimeout, down.reason)
		assert.Contains(t, down.msg, "100ms")
		assert.Positive(t, scrapeProbes(t, url).durations["http/timeout"])
	})

	t.Run("initial delay", func(t *testing.T) {
		h := &healthServer{}
		h.healthy.Store(true)
		port := serveHTTP(whole, "127.0.0.9", h)
		pod := startProbedPod(t, c, ns, "late", "node-a", "127.0.0.9", port,
			`{"httpGet":{"path":"/healthz","port":"health"},"initialDelaySeconds":1,"initialDelayMilliseconds":500,"periodSeconds":1,"periodMilliseconds":-900,"timeoutSeconds":1,"timeoutMilliseconds":-900}`)
		g.wait(t, "late", 0, corev1.ConditionTrue)
		// The delay counts from the container's start as the API stores
		// it, in whole seconds.
		started := pod.Status.ContainerStatuses[0].State.Running.StartedAt.Time
		first := *h.first.Load()
		t.Logf("first probe %s after the container started", first.Sub(started))
		assert.False(t, first.Before(started.Add(1500*time.Millisecond)), "first probe %s, container started %s", first, started)
		// Lower bound exact (the delay); the upper one only catches a delay
		// ignored the other way, far longer than asked.
		assert.Less(t, first.Sub(started), 1500*time.Millisecond+gateBound)
	})

	t.Run("invalid probe", func(t *testing.T) {
		annotation := `{"httpGet":{"port":"health"},"periodSeconds":1,"periodMilliseconds":1000}`
		_, wantErr := probe.Parse(annotation, DefaultMinProbePeriod)
		require.Error(t, wantErr)
		startProbedPod(t, c, ns, "typo", "node-a", "127.0.0.6", 8080, annotation)
		down := g.wait(t, "typo", 0, corev1.ConditionFalse)
		assert.Equal(t, ReasonInvalidProbe, down.reason)
		assert.Equal(t, wantErr.Error(), down.msg)
		require.EventuallyWithT(t, func(ct *assert.CollectT) { assert.NotEmpty(ct, agentEvents(ct, c, ns, "typo")) }, 30*time.Second, 20*time.Millisecond)
		assert.Equal(t, []string{"Warning InvalidProbe: Readiness probe not run: " + wantErr.Error()}, agentEvents(t, c, ns, "typo"))
		assert.Equal(t, float64(1), scrapeProbes(t, url).invalid)
	})

	t.Run("workers follow the pods", func(t *testing.T) {
		h := &healthServer{}
		h.healthy.Store(true)
		port := serveHTTP(whole, "127.0.0.7", h)
		before := scrapeProbes(t, url).writes[resultSuccess]
		pod := startProbedPod(t, c, ns, "churn", "node-a", "127.0.0.7", port, fastProbe(`"httpGet":{"path":"/healthz","port":"health"}`))
		g.wait(t, "churn", 0, corev1.ConditionTrue)
		// The agent counts its write when the PATCH's response arrives,
		// which may be after the watch delivered the change.
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.Equal(c, before+1, scrapeProbes(c, url).writes[resultSuccess])
		}, 30*time.Second, 5*time.Millisecond)
		// http, tcp, grpc, timeout, initial delay and this one; the invalid
		// probe has none.
		assert.Equal(t, float64(6), scrapeProbes(t, url).workers)

		// A restarted container gets a new worker, which finds the gate
		// already True and writes nothing.
		writes := scrapeProbes(t, url).writes[resultSuccess]
		runContainer(t, c, pod, "127.0.0.7", "churn-2")
		passed := h.passed.Load()
		require.Eventually(t, func() bool { return h.passed.Load() >= passed+5 }, 30*time.Second, period)
		assert.Equal(t, writes, scrapeProbes(t, url).writes[resultSuccess])
		assert.Equal(t, float64(6), scrapeProbes(t, url).workers)

		// Without the annotation the pod is no longer probed.
		_, err := c.CoreV1().Pods(ns).Patch(ctx, "churn", types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"`+probe.Annotation+`":null}}}`), metav1.PatchOptions{})
		require.NoError(t, err)
		require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Equal(c, float64(5), scrapeProbes(c, url).workers) }, 30*time.Second, 10*time.Millisecond)
		stopped := h.passed.Load() + h.failed.Load()
		// The other five workers are the clock: 25 of their probes are five
		// periods, in which a live worker would have probed five times.
		clock := func(t require.TestingT) float64 {
			var n float64
			for _, v := range scrapeProbes(t, url).total {
				n += v
			}
			return n
		}
		from := clock(t)
		require.EventuallyWithT(t, func(c *assert.CollectT) { assert.GreaterOrEqual(c, clock(c), from+25) }, 30*time.Second, period)
		assert.LessOrEqual(t, h.passed.Load()+h.failed.Load(), stopped+1, "probes after the annotation was removed")

		require.NoError(t, c.CoreV1().Pods(ns).Delete(ctx, "slow", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
		require.EventuallyWithT(t, func(c *assert.CollectT) { assert.Equal(c, float64(4), scrapeProbes(c, url).workers) }, 30*time.Second, 10*time.Millisecond)
	})
}

func TestProbeWorkerLimit(t *testing.T) {
	env := testenv.Start(t)
	c := env.Client
	ctx := context.Background()
	createNode(t, c, "node-a")
	const ns = "limited"
	testenv.CreateNamespace(t, c, ns, nil)
	g := watchGates(t, c, ns)
	url := startAgent(t, Options{NodeName: "node-a", MaxProbeWorkers: 1}, WithRestConfig(env.Config))

	h := &healthServer{}
	h.healthy.Store(true)
	port := serveHTTP(t, "127.0.0.8", h)
	probeJSON := fastProbe(`"httpGet":{"path":"/healthz","port":"health"}`)
	startProbedPod(t, c, ns, "first", "node-a", "127.0.0.8", port, probeJSON)
	g.wait(t, "first", 0, corev1.ConditionTrue)
	startProbedPod(t, c, ns, "second", "node-a", "127.0.0.8", port, probeJSON)
	require.EventuallyWithT(t, func(ct *assert.CollectT) { assert.NotEmpty(ct, agentEvents(ct, c, ns, "second")) }, 30*time.Second, 20*time.Millisecond)
	assert.Equal(t, []string{fmt.Sprintf("Warning %s: Not probed: the podslo agent of node node-a runs its maximum of 1 probe workers", reasonWorkerLimit)},
		agentEvents(t, c, ns, "second"))
	assert.Empty(t, g.of("second"))
	assert.Equal(t, float64(1), scrapeProbes(t, url).workers)

	// The first pod's end frees the worker for the second.
	require.NoError(t, c.CoreV1().Pods(ns).Delete(ctx, "first", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}))
	g.wait(t, "second", 0, corev1.ConditionTrue)
	assert.Equal(t, float64(1), scrapeProbes(t, url).workers)
}
