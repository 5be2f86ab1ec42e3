package realnode_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/podslo/podslo/exporter"
	"github.com/podslo/podslo/internal/realnode"
	"github.com/podslo/podslo/internal/testenv"
)

const sandboxCondition = corev1.PodConditionType("PodReadyToStartContainers")

// truth is what the test's own watch of the pods saw: per pod, when it was
// scheduled and every distinct time its sandbox became ready.
type truth struct {
	mu   sync.Mutex
	pods map[types.UID]*podTruth
}

type podTruth struct {
	name, class string
	scheduled   time.Time
	// sandboxReady holds each distinct lastTransitionTime of the sandbox
	// condition turning True, in the order seen: the first is the first
	// sandbox, each later one a re-created sandbox.
	sandboxReady []time.Time
}

func (tr *truth) observe(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	p := tr.pods[pod.UID]
	if p == nil {
		p = &podTruth{name: pod.Name, class: "none"}
		if rc := pod.Spec.RuntimeClassName; rc != nil {
			p.class = *rc
		}
		tr.pods[pod.UID] = p
	}
	for _, c := range pod.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch c.Type {
		case corev1.PodScheduled:
			if p.scheduled.IsZero() {
				p.scheduled = c.LastTransitionTime.Time
			}
		case sandboxCondition:
			if n := len(p.sandboxReady); n == 0 || !p.sandboxReady[n-1].Equal(c.LastTransitionTime.Time) {
				p.sandboxReady = append(p.sandboxReady, c.LastTransitionTime.Time)
			}
		}
	}
}

// creations is, per runtime class, the number of first sandboxes and the
// sum of their creation times (PodScheduled to the first sandbox ready),
// and the number of re-created sandboxes.
func (tr *truth) creations() (count map[string]uint64, sum map[string]float64, recreations map[string]int, ready int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	count, sum, recreations = map[string]uint64{}, map[string]float64{}, map[string]int{}
	for _, p := range tr.pods {
		if p.scheduled.IsZero() || len(p.sandboxReady) == 0 {
			continue
		}
		ready++
		count[p.class]++
		sum[p.class] += p.sandboxReady[0].Sub(p.scheduled).Seconds()
		recreations[p.class] += len(p.sandboxReady) - 1
	}
	return count, sum, recreations, ready
}

func (tr *truth) get(uid types.UID) podTruth {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return *tr.pods[uid]
}

func TestSandboxCreationOnARealNode(t *testing.T) {
	began := time.Now()
	node := realnode.Start(t)
	t.Logf("real node ready after %v", time.Since(began).Round(time.Millisecond))
	ctx := context.Background()
	c := node.Client
	const ns = "default"

	// make nodebin stamps the version: unstamped, the node says v0.0.0-master.
	want, err := testenv.KubernetesVersion()
	require.NoError(t, err)
	n, err := c.CoreV1().Nodes().Get(ctx, realnode.NodeName, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, want, n.Status.NodeInfo.KubeletVersion, "the kubelet's version")

	_, err = c.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "runc"}, Handler: "runc"}, metav1.CreateOptions{})
	require.NoError(t, err)

	tr := &truth{pods: map[types.UID]*podTruth{}}
	factory := informers.NewSharedInformerFactoryWithOptions(c, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	_, err = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: tr.observe, UpdateFunc: func(_, obj any) { tr.observe(obj) }})
	require.NoError(t, err)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	factory.Start(stop)
	require.True(t, cache.WaitForCacheSync(stop, inf.HasSynced))

	url := "http://" + testenv.RunComponent(t, "exporter", func(lis net.Listener) (testenv.Component, error) {
		return exporter.New(exporter.Options{Kubeconfig: node.Kubeconfig, StateDir: t.TempDir(), Logger: testenv.Logger(t)},
			exporter.WithListener(lis))
	})
	testenv.WaitReady(t, url, "exporter")

	classes := map[string]string{"plain-0": "", "plain-1": "", "plain-2": "", "runc-0": "runc", "runc-1": "runc"}
	uids := map[string]types.UID{}
	for name, class := range classes {
		uids[name] = createPod(t, node, ns, name, class).UID
	}
	var count map[string]uint64
	var sum map[string]float64
	require.Eventually(t, func() bool {
		var ready int
		count, sum, _, ready = tr.creations()
		return ready == len(classes)
	}, 3*time.Minute, 100*time.Millisecond, "pods' sandboxes never all ready")
	require.Equal(t, map[string]uint64{"none": 3, "runc": 2}, count)
	t.Logf("sandbox creation per class from the pods' conditions: count %v, sum %v s", count, sum)

	// podslo's histogram, class by class, equals the pods' own conditions.
	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		fams := scrape(ct, url)
		gotCount, gotSum := histogramByClass(fams["podslo_sandbox_creation_duration_seconds"])
		assert.Equal(ct, count, gotCount)
		assert.Equal(ct, sum, gotSum)
	}, 30*time.Second, 100*time.Millisecond, "podslo's sandbox creations differ from the pods' conditions")

	// The kubelet ran exactly one sandbox per pod.
	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.Equal(ct, uint64(len(classes)), kubeletSandboxRuns(ct, node))
	}, 30*time.Second, 100*time.Millisecond, "the kubelet's run_podsandbox count differs from podslo's creations")

	// A sandbox killed through containerd: the kubelet re-creates it, and
	// podslo counts exactly one re-creation and no second creation.
	victim := uids["plain-0"]
	first := tr.get(victim).sandboxReady
	// Conditions have one-second precision: a sandbox re-created within the
	// second its first one became ready would show the same
	// lastTransitionTime, and neither the test nor podslo could tell.
	require.Eventually(t, func() bool { return time.Now().After(first[0].Add(time.Second)) }, 2*time.Second,
		10*time.Millisecond)
	require.NoError(t, node.KillSandbox(string(victim)))
	if !assert.Eventually(t, func() bool { return len(tr.get(victim).sandboxReady) == len(first)+1 }, 2*time.Minute,
		100*time.Millisecond) {
		t.Fatalf("the killed sandbox never became ready again; ready at %v; the pod: %+v", tr.get(victim).sandboxReady, podStatus(t, node, ns, "plain-0"))
	}
	_, _, recreations, _ := tr.creations()
	require.Equal(t, map[string]int{"none": 1, "runc": 0}, recreations)
	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		fams := scrape(ct, url)
		assert.Equal(ct, map[string]float64{"none": 1}, counterByClass(fams["podslo_sandbox_recreations_total"]))
		gotCount, gotSum := histogramByClass(fams["podslo_sandbox_creation_duration_seconds"])
		assert.Equal(ct, count, gotCount)
		assert.Equal(ct, sum, gotSum)
		// Every sandbox the kubelet ran is one podslo counted: first
		// creations plus re-creations.
		assert.Equal(ct, uint64(len(classes)+1), kubeletSandboxRuns(ct, node))
	}, 30*time.Second, 100*time.Millisecond, "podslo's re-creations differ from the pods' conditions or the kubelet's")

	// A pod reaches the API server through the kubernetes Service
	// (kube-proxy's rules), as the agent's pods must.
	client := createPod(t, node, ns, "apiserver-client", "", "apiserver")
	var phase corev1.PodPhase
	require.Eventually(t, func() bool {
		p, err := c.CoreV1().Pods(ns).Get(ctx, client.Name, metav1.GetOptions{})
		require.NoError(t, err)
		phase = p.Status.Phase
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed
	}, 2*time.Minute, 100*time.Millisecond, "the API server client never finished")
	logs, err := c.CoreV1().Pods(ns).GetLogs(client.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	require.NoError(t, err, "the pod's log through the API server and the kubelet")
	require.Equal(t, corev1.PodSucceeded, phase, "the pod did not reach the API server through the kubernetes Service:\n%s", logs)
	t.Logf("a pod asked the API server through the kubernetes Service: %s", logs)
	t.Logf("test body done after %v", time.Since(began).Round(time.Millisecond))
}

// podStatus is a pod's status, for a failure message.
func podStatus(t *testing.T, node *realnode.Node, ns, name string) corev1.PodStatus {
	p, err := node.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Logf("get pod %s: %v", name, err)
		return corev1.PodStatus{}
	}
	return p.Status
}

// createPod creates a pod of the sleeper image, in RuntimeClass class
// unless empty; args, if any, make it run once (restartPolicy Never).
func createPod(t *testing.T, node *realnode.Node, ns, name, class string, args ...string) *corev1.Pod {
	t.Helper()
	no := false
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: &no,
			Containers:                   []corev1.Container{{Name: "app", Image: realnode.Image, ImagePullPolicy: corev1.PullNever, Args: args}},
		},
	}
	if len(args) > 0 {
		pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	}
	if class != "" {
		pod.Spec.RuntimeClassName = &class
	}
	created, err := node.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	require.NoError(t, err)
	return created
}

func scrape(t require.TestingT, url string) map[string]*dto.MetricFamily {
	resp, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	require.NoError(t, err)
	return fams
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// histogramByClass adds up a histogram's series per runtime_class.
func histogramByClass(f *dto.MetricFamily) (map[string]uint64, map[string]float64) {
	count, sum := map[string]uint64{}, map[string]float64{}
	for _, m := range f.GetMetric() {
		class := label(m, "runtime_class")
		count[class] += m.GetHistogram().GetSampleCount()
		sum[class] += m.GetHistogram().GetSampleSum()
	}
	return count, sum
}

// counterByClass adds up a counter's non-zero series per runtime_class.
func counterByClass(f *dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for _, m := range f.GetMetric() {
		if v := m.GetCounter().GetValue(); v != 0 {
			out[label(m, "runtime_class")] += v
		}
	}
	return out
}

// kubeletSandboxRuns is the kubelet's own count of RunPodSandbox calls.
func kubeletSandboxRuns(t require.TestingT, node *realnode.Node) uint64 {
	raw, err := node.KubeletMetrics(context.Background())
	require.NoError(t, err)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(raw)))
	require.NoError(t, err)
	f := fams["kubelet_runtime_operations_duration_seconds"]
	require.NotNil(t, f, "kubelet_runtime_operations_duration_seconds not in the kubelet's /metrics")
	for _, m := range f.GetMetric() {
		if label(m, "operation_type") == "run_podsandbox" {
			return m.GetHistogram().GetSampleCount()
		}
	}
	require.Fail(t, fmt.Sprintf("no run_podsandbox series in %d", len(f.GetMetric())))
	return 0
}
