package exporter

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/podslo/podslo/internal/testenv"
	"github.com/podslo/podslo/scope"
	"github.com/podslo/podslo/sli"
)

// slis is what one exporter exports of the pods: its per-pod series (those
// with a uid label) and, per histogram series, the observation count.
type slis struct {
	perPod map[string]float64
	uids   map[string]bool
	counts map[string]uint64
}

func seriesKey(name string, labels map[string]string) string {
	keys := slices.Sorted(maps.Keys(labels))
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+labels[k])
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

func scrapeSLIs(t require.TestingT, url string) slis {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(scrapeText(t, url, "text/plain")))
	require.NoError(t, err)
	out := slis{perPod: map[string]float64{}, uids: map[string]bool{}, counts: map[string]uint64{}}
	histograms := map[string]bool{}
	for _, f := range sli.Families() {
		histograms[f.Name] = f.Type == sli.Histogram
	}
	for name, mf := range families {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch {
			case labels["uid"] != "":
				out.uids[labels["uid"]] = true
				out.perPod[seriesKey(name, labels)] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
			case histograms[name]:
				out.counts[seriesKey(name, labels)] = m.GetHistogram().GetSampleCount()
			}
		}
	}
	return out
}

// startedPodOn creates a pod bound to node whose sandbox and containers are
// ready, in the past but within the max observation age.
func startedPodOn(t *testing.T, c kubernetes.Interface, ns, name, node string, base time.Time, ready int) *corev1.Pod {
	t.Helper()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
	}
	created, err := c.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	require.NoError(t, err)
	kubelet(t, c, created,
		condAt(corev1.PodScheduled, corev1.ConditionTrue, base),
		condAt(corev1.PodReadyToStartContainers, corev1.ConditionTrue, base.Add(time.Duration(ready)*time.Second)))
	return created
}

// mergeSLIs checks that the parts share no pod and returns their union,
// with histogram counts added up.
func mergeSLIs(t assert.TestingT, parts map[string]slis) slis {
	out := slis{perPod: map[string]float64{}, uids: map[string]bool{}, counts: map[string]uint64{}}
	owner := map[string]string{}
	for name, p := range parts {
		for uid := range p.uids {
			if prev, ok := owner[uid]; ok {
				t.Errorf("pod %s exported by both %s and %s", uid, prev, name)
			}
			owner[uid] = name
			out.uids[uid] = true
		}
		maps.Copy(out.perPod, p.perPod)
		for k, v := range p.counts {
			out.counts[k] += v
		}
	}
	return out
}

// assertPartitioned waits until the parts together equal whole: every
// per-pod series exactly, no pod in two parts, histogram counts added up.
func assertPartitioned(t *testing.T, wholeURL string, partURLs map[string]string, pods int) {
	t.Helper()
	var parts map[string]slis
	// Every exporter handles the pods on its own schedule: wait until the
	// whole has observed every pod, then until the parts add up to it.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		whole := scrapeSLIs(c, wholeURL)
		var total uint64
		for k, v := range whole.counts {
			if strings.HasPrefix(k, "podslo_sandbox_creation_duration_seconds{") {
				total += v
			}
		}
		if !assert.EqualValues(c, pods, total, "every pod's sandbox creation observed once") {
			return
		}
		parts = map[string]slis{}
		for name, url := range partURLs {
			parts[name] = scrapeSLIs(c, url)
		}
		merged := mergeSLIs(c, parts)
		assert.Equal(c, whole.perPod, merged.perPod, "per-pod series")
		assert.Equal(c, whole.counts, merged.counts, "histogram counts")
	}, 60*time.Second, 100*time.Millisecond, "the parts never added up to the whole")
	for name, p := range parts {
		assert.NotEmpty(t, p.uids, "%s owns no pod: the split proves nothing", name)
	}
}

// Two shards together export exactly what one unsharded exporter does, and
// no pod appears in both; so do three per-node exporters.
func TestShardsAndNodesAddUpOnRealAPIServer(t *testing.T) {
	env := testenv.Start(t)
	c := env.Client
	const ns, pods = "slo", 24
	testenv.CreateNamespace(t, c, ns, nil)
	nodes := []string{"node-a", "node-b", "node-c"}
	start := func(sc scope.Scope) string {
		return startExporter(t, Options{Kubeconfig: env.Kubeconfig, StateDir: t.TempDir(), Scope: sc})
	}
	// Every exporter first: a new sharded state observes nothing that
	// happened before it started (pipeline.handover).
	whole := start(scope.Unscoped)
	shards := map[string]string{
		"shard 0": start(scope.Scope{Shard: 0, TotalShards: 2}),
		"shard 1": start(scope.Scope{Shard: 1, TotalShards: 2}),
	}
	perNode := map[string]string{}
	for _, n := range nodes {
		perNode[n] = start(scope.Scope{Node: n, TotalShards: 1})
	}
	base := time.Now().Add(time.Second).Truncate(time.Second)
	for i := range pods {
		startedPodOn(t, c, ns, fmt.Sprintf("web-%d", i), nodes[i%len(nodes)], base, 1+i%7)
	}
	t.Run("shards", func(t *testing.T) { assertPartitioned(t, whole, shards, pods) })
	t.Run("nodes", func(t *testing.T) { assertPartitioned(t, whole, perNode, pods) })
}

// apiserverMetrics scrapes the API server's own /metrics with the admin
// client.
func apiserverMetrics(t require.TestingT, c kubernetes.Interface) map[string]*dto.MetricFamily {
	raw, err := c.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	require.NoError(t, err)
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(string(raw)))
	require.NoError(t, err)
	return families
}

// watchStats are, per resource, the WATCH requests open by scope
// (apiserver_longrunning_requests) and the watch events sent to clients
// (apiserver_watch_events_total).
func watchStats(t require.TestingT, c kubernetes.Interface) (open map[string]float64, sent map[string]float64) {
	families := apiserverMetrics(t, c)
	open, sent = map[string]float64{}, map[string]float64{}
	for _, m := range families["apiserver_longrunning_requests"].GetMetric() {
		l := labelMap(m)
		if l["verb"] == "WATCH" {
			open[l["resource"]+"/"+l["scope"]] += m.GetGauge().GetValue()
		}
	}
	for _, m := range families["apiserver_watch_events_total"].GetMetric() {
		l := labelMap(m)
		sent[l["resource"]] += m.GetCounter().GetValue()
	}
	return open, sent
}

func labelMap(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// auditedRequest is what the API server's audit log says of one request.
type auditedRequest struct {
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	UserAgent  string `json:"userAgent"`
	Stage      string `json:"stage"`
	ObjectRef  struct {
		Resource  string `json:"resource"`
		Namespace string `json:"namespace"`
	} `json:"objectRef"`
}

// auditLog starts the API server with an audit log of every list and watch
// (metadata only) and returns a function reading it.
func auditLog(t *testing.T) (testenv.Option, testenv.Option, func() []auditedRequest) {
	dir := t.TempDir()
	policy, logPath := filepath.Join(dir, "policy.yaml"), filepath.Join(dir, "audit.log")
	require.NoError(t, os.WriteFile(policy, []byte(`apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: Metadata
  verbs: [list, watch]
- level: None
`), 0o600))
	read := func() []auditedRequest {
		raw, err := os.ReadFile(logPath)
		require.NoError(t, err)
		var out []auditedRequest
		for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
			var r auditedRequest
			if line == "" || json.Unmarshal([]byte(line), &r) != nil {
				continue
			}
			out = append(out, r)
		}
		return out
	}
	return testenv.APIServerFlag("audit-policy-file", policy), testenv.APIServerFlag("audit-log-path", logPath), read
}

// --namespaces narrows every watch on the API server: the API server's
// audit log shows that the exporter only ever lists and watches pods, PVCs
// and events inside the allowed namespace, and its metrics that the
// exporter's open watches of them are namespaced.
func TestNamespacesNarrowTheWatchOnTheAPIServer(t *testing.T) {
	policy, logPath, audited := auditLog(t)
	env := testenv.Start(t, policy, logPath)
	c := env.Client
	testenv.CreateNamespace(t, c, "mine", nil)
	testenv.CreateNamespace(t, c, "theirs", nil)
	base := time.Now().Add(-time.Minute).Truncate(time.Second)
	startedPodOn(t, c, "mine", "before", "node-a", base, 2)
	startedPodOn(t, c, "theirs", "other", "node-a", base, 2)
	// The API server's own loopback clients watch too: compare with them.
	idle, _ := watchStats(t, c)
	url := startExporter(t, Options{Kubeconfig: env.Kubeconfig, StateDir: t.TempDir(), Scope: scope.Scope{Namespaces: []string{"mine"}, TotalShards: 1}})

	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		open, _ := watchStats(ct, c)
		for _, r := range []string{"pods", "persistentvolumeclaims", "events"} {
			assert.Positive(ct, open[r+"/namespace"]-idle[r+"/namespace"], "a namespaced %s watch", r)
			assert.Zero(ct, open[r+"/cluster"]-idle[r+"/cluster"], "no cluster-wide %s watch", r)
		}
		assert.Positive(ct, open["storageclasses/cluster"]-idle["storageclasses/cluster"], "StorageClasses stay cluster-wide")
	}, 30*time.Second, 100*time.Millisecond)

	seen := map[string]int{}
	for _, r := range audited() {
		if !strings.HasPrefix(r.UserAgent, "podslo/") {
			continue
		}
		switch r.ObjectRef.Resource {
		case "pods", "persistentvolumeclaims", "events", "networkpolicies":
			assert.Equal(t, "mine", r.ObjectRef.Namespace, "%s %s", r.Verb, r.RequestURI)
			// A streamed list is a watch with initial events.
			seen[r.ObjectRef.Resource]++
		}
	}
	for _, want := range []string{"pods", "persistentvolumeclaims", "events", "networkpolicies"} {
		assert.Positive(t, seen[want], "the audit log shows the exporter's %s requests", want)
	}

	s := scrapeSLIs(t, url)
	assert.Len(t, s.uids, 1, "only the watched namespace's pod")
	for k := range s.perPod {
		assert.NotContains(t, k, "namespace=theirs")
	}
}
