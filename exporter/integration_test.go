package exporter

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/podslo/podslo/internal/testenv"
)

// kubelet patches pod status the way the kubelet's status manager does: a
// strategic merge patch on the status subresource, merged by condition type.
func kubelet(t *testing.T, c kubernetes.Interface, pod *corev1.Pod, conds ...corev1.PodCondition) {
	t.Helper()
	patchStatus(t, c, pod, map[string]any{"status": map[string]any{"conditions": conds}})
}

func patchStatus(t *testing.T, c kubernetes.Interface, pod *corev1.Pod, patch map[string]any) {
	t.Helper()
	body, err := json.Marshal(patch)
	require.NoError(t, err)
	_, err = c.CoreV1().Pods(pod.Namespace).Patch(context.Background(), pod.Name, types.StrategicMergePatchType, body, metav1.PatchOptions{}, "status")
	require.NoError(t, err)
}

func condAt(typ corev1.PodConditionType, status corev1.ConditionStatus, at time.Time) corev1.PodCondition {
	return corev1.PodCondition{Type: typ, Status: status, LastTransitionTime: metav1.NewTime(at)}
}

type podSpec struct {
	name, team   string
	runtimeClass string
	claims       []string
	ephemeral    map[string]string // volume name -> template class
}

// pod is what the tests' vocabulary means: a pod on node-a, labelled with
// its team and with its name (the label the per-pod series copy).
func (s podSpec) pod() testenv.PodSpec {
	return testenv.PodSpec{
		Name: s.name, Node: "node-a",
		Labels:       map[string]string{"team": s.team, "app.kubernetes.io/name": s.name},
		RuntimeClass: s.runtimeClass, Claims: s.claims, Ephemeral: s.ephemeral,
	}
}

// fixtures creates what the class labels are resolved from: a RuntimeClass,
// two StorageClasses (one default) and PVCs bound to pre-made PVs.
func fixtures(t *testing.T, c kubernetes.Interface, ns string) {
	t.Helper()
	ctx := context.Background()
	testenv.CreateNamespace(t, c, ns, nil)
	_, err := c.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "kata"}, Handler: "kata"}, metav1.CreateOptions{})
	require.NoError(t, err)
	for name, isDefault := range map[string]bool{"fast": true, "slow": false} {
		sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Provisioner: "csi.example.com"}
		if isDefault {
			sc.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
		}
		_, err = c.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	fast := "fast"
	for _, claim := range []string{"data"} {
		pv := &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: "pv-" + claim},
			Spec: corev1.PersistentVolumeSpec{
				StorageClassName:       fast,
				Capacity:               corev1.ResourceList{corev1.ResourceStorage: mustQuantity("1Gi")},
				AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				ClaimRef:               &corev1.ObjectReference{Namespace: ns, Name: claim},
				PersistentVolumeSource: corev1.PersistentVolumeSource{CSI: &corev1.CSIPersistentVolumeSource{Driver: "csi.example.com", VolumeHandle: claim}},
			},
		}
		_, err = c.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
		require.NoError(t, err)
		pvc := &corev1.PersistentVolumeClaim{
			ObjectMeta: metav1.ObjectMeta{Name: claim, Namespace: ns},
			Spec: corev1.PersistentVolumeClaimSpec{
				StorageClassName: &fast,
				VolumeName:       pv.Name,
				AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: mustQuantity("1Gi")}},
			},
		}
		created, err := c.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{})
		require.NoError(t, err)
		created.Status.Phase = corev1.ClaimBound
		_, err = c.CoreV1().PersistentVolumeClaims(ns).UpdateStatus(ctx, created, metav1.UpdateOptions{})
		require.NoError(t, err)
	}
}

// startExporter runs the exporter in this process until the test ends,
// and returns its URL once /readyz says ready.
func startExporter(t *testing.T, opts Options, with ...Option) string {
	t.Helper()
	url := "http://" + runExporter(t, opts, with...)
	waitReady(t, url)
	return url
}

// runExporter runs the exporter in this process until the test ends, and
// returns the address it listens on.
func runExporter(t *testing.T, opts Options, with ...Option) string {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testenv.Logger(t)
	}
	return testenv.RunComponent(t, "exporter", func(lis net.Listener) (testenv.Component, error) {
		return New(opts, append(with, WithListener(lis))...)
	})
}

func waitReady(t *testing.T, url string) {
	t.Helper()
	testenv.WaitReady(t, url, "exporter")
}

// logLines keeps every line the exporter logged, and sends them to t.Log,
// so that a test can wait for what the exporter says it did.
type logLines struct {
	t     *testing.T
	mu    sync.Mutex
	lines []string
}

func newLogLines(t *testing.T) *logLines { return &logLines{t: t} }

// logger is a debug-level text logger writing to l.
func (l *logLines) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func (l *logLines) Write(p []byte) (int, error) {
	line := strings.TrimRight(string(p), "\n")
	l.t.Log(line)
	l.mu.Lock()
	l.lines = append(l.lines, line)
	l.mu.Unlock()
	return len(p), nil
}

// matching returns the lines that contain every one of parts.
func (l *logLines) matching(parts ...string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(line, p)
		}
		if all {
			out = append(out, line)
		}
	}
	return out
}

// wait waits until a line contains every one of parts.
func (l *logLines) wait(t *testing.T, parts ...string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.NotEmpty(c, l.matching(parts...)) },
		30*time.Second, 10*time.Millisecond, "no log line with %q", parts)
}

// eventuallyMetrics polls /metrics until the named families equal want.
func eventuallyMetrics(t *testing.T, url, want string, names ...string) {
	t.Helper()
	eventuallyMetricsWithin(t, 30*time.Second, url, want, names...)
}

// eventuallyMetricsWithin polls /metrics for up to wait until the named
// families equal want. A counter series at 0 that want does not list is
// left out of the comparison: every counter has a series at 0 for each
// class the exporter knows (docs/metrics.md), and TestCountersStartAtZero
// checks those.
func eventuallyMetricsWithin(t *testing.T, wait time.Duration, url, want string, names ...string) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.NoError(c, scrapeAndCompare(c, url, want, names...))
	}, wait, 50*time.Millisecond, "metrics never matched")
}

// scrapeAndCompare is testutil.ScrapeAndCompare, but for a counter series
// at 0 that want does not list: every counter has a series at 0 for each
// class the exporter knows (docs/metrics.md, TestCountersStartAtZero), and
// those are left out of the comparison.
func scrapeAndCompare(t require.TestingT, url, want string, names ...string) error {
	wp, gp := expfmt.NewTextParser(model.UTF8Validation), expfmt.NewTextParser(model.UTF8Validation)
	wantFams, err := wp.TextToMetricFamilies(strings.NewReader(want))
	if err != nil {
		return err
	}
	got, err := gp.TextToMetricFamilies(strings.NewReader(scrapeText(t, url, "text/plain")))
	if err != nil {
		return err
	}
	var kept []*dto.MetricFamily
	for _, f := range got {
		listed := map[string]bool{}
		if w := wantFams[f.GetName()]; w != nil {
			for _, m := range w.GetMetric() {
				listed[sortedLabels(m)] = true
			}
		}
		f.Metric = slices.DeleteFunc(f.Metric, func(m *dto.Metric) bool {
			return f.GetType() == dto.MetricType_COUNTER && m.GetCounter().GetValue() == 0 && !listed[sortedLabels(m)]
		})
		// In the order testutil gives want: labels by name, series by
		// label values.
		for _, m := range f.Metric {
			slices.SortFunc(m.Label, func(a, b *dto.LabelPair) int { return strings.Compare(a.GetName(), b.GetName()) })
		}
		slices.SortStableFunc(f.Metric, func(a, b *dto.Metric) int {
			for i := range min(len(a.Label), len(b.Label)) {
				if c := strings.Compare(a.Label[i].GetValue(), b.Label[i].GetValue()); c != 0 {
					return c
				}
			}
			return len(a.Label) - len(b.Label)
		})
		if len(f.Metric) > 0 {
			kept = append(kept, f)
		}
	}
	slices.SortFunc(kept, func(a, b *dto.MetricFamily) int { return strings.Compare(a.GetName(), b.GetName()) })
	return testutil.GatherAndCompare(prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return kept, nil }), strings.NewReader(want), names...)
}

// sortedLabels is a series' label set as one string, whatever the order
// its exposition lists the labels in.
func sortedLabels(m *dto.Metric) string {
	pairs := make([]string, 0, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		pairs = append(pairs, l.GetName()+"="+l.GetValue())
	}
	slices.Sort(pairs)
	return strings.Join(pairs, "\xff")
}

// classicBuckets are the classic bucket bounds podslo exposes: three for
// the millisecond SLIs, then the kubelet's pod start-up buckets.
var classicBuckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}

// histogramText renders the exposition of one classic histogram series from
// its raw observations, independently of the code under test.
func histogramText(name, labels string, values ...float64) string {
	return histogramTextIn(classicBuckets, name, labels, values...)
}

// histogramTextIn is histogramText with the classic bounds a release
// exposes: the previous release's had none below 0.5 s.
func histogramTextIn(bounds []float64, name, labels string, values ...float64) string {
	var b strings.Builder
	sum := 0.0
	for _, v := range values {
		sum += v
	}
	for _, le := range bounds {
		n := 0
		for _, v := range values {
			if v <= le {
				n++
			}
		}
		fmt.Fprintf(&b, "%s_bucket{%s,le=\"%g\"} %d\n", name, labels, le, n)
	}
	fmt.Fprintf(&b, "%s_bucket{%s,le=\"+Inf\"} %d\n%s_sum{%s} %g\n%s_count{%s} %d\n", name, labels, len(values), name, labels, sum, name, labels, len(values))
	return b.String()
}

func TestSandboxCreationOnRealAPIServer(t *testing.T) {
	env := testenv.Start(t)
	c := env.Client
	const ns = "slo"
	fixtures(t, c, ns)
	url := startExporter(t, Options{
		Kubeconfig:      env.Kubeconfig,
		StateDir:        t.TempDir(),
		PodLabels:       []string{"app.kubernetes.io/name"},
		HistogramLabels: []string{"team=label:team"},
	})

	// Scheduled after every pod below is created, as in a real cluster.
	base := time.Now().Add(30 * time.Second).Truncate(time.Second)
	sched := func(at time.Time) corev1.PodCondition { return condAt(corev1.PodScheduled, corev1.ConditionTrue, at) }
	ready := func(status corev1.ConditionStatus, at time.Time) corev1.PodCondition {
		return condAt(corev1.PodReadyToStartContainers, status, at)
	}
	uids := map[string]types.UID{}
	pod := func(s podSpec) *corev1.Pod {
		p := testenv.CreatePod(t, c, ns, s.pod())
		uids[s.name] = p.UID
		return p
	}

	plain := pod(podSpec{name: "plain", team: "a"})
	kubelet(t, c, plain, sched(base), ready(corev1.ConditionFalse, base.Add(time.Second)))
	kubelet(t, c, plain, ready(corev1.ConditionTrue, base.Add(3*time.Second)))

	withPVCs := pod(podSpec{name: "kata-pvc", team: "b", runtimeClass: "kata", claims: []string{"data"}, ephemeral: map[string]string{"scratch": "slow"}})
	kubelet(t, c, withPVCs, sched(base), ready(corev1.ConditionTrue, base.Add(10*time.Second)))

	missing := pod(podSpec{name: "kata-missing", team: "b", runtimeClass: "kata", claims: []string{"nope"}})
	kubelet(t, c, missing, sched(base), ready(corev1.ConditionTrue, base.Add(5*time.Second)))

	crashy := pod(podSpec{name: "crashy", team: "a"})
	kubelet(t, c, crashy, sched(base), ready(corev1.ConditionTrue, base.Add(2*time.Second)))

	legacy := pod(podSpec{name: "legacy", team: "a"})
	kubelet(t, c, legacy, sched(base), condAt("PodHasNetwork", corev1.ConditionTrue, base.Add(4*time.Second)))

	skewed := pod(podSpec{name: "skewed", team: "a"})
	kubelet(t, c, skewed, sched(base), ready(corev1.ConditionTrue, base.Add(-2*time.Second)))

	ancient := pod(podSpec{name: "ancient", team: "a"})
	kubelet(t, c, ancient, sched(base.Add(-3*time.Hour)), ready(corev1.ConditionTrue, base.Add(-3*time.Hour+time.Second)))

	unscheduled := pod(podSpec{name: "unscheduled", team: "a"})
	kubelet(t, c, unscheduled, ready(corev1.ConditionTrue, base.Add(time.Second)))

	never := pod(podSpec{name: "never", team: "a"})
	kubelet(t, c, never, sched(base), ready(corev1.ConditionFalse, base.Add(time.Second)))

	// Wait for the first readiness of crashy to be recorded before its
	// sandbox is lost and re-created, as a node crash would do.
	// Labels in the sorted order the comparison expects.
	perPod := func(name, runtimeClass, storageClass string) string {
		return fmt.Sprintf(`label_app_kubernetes_io_name=%q,namespace="slo",node="node-a",pod=%q,runtime_class=%q,storage_class=%q,uid=%q`,
			name, name, runtimeClass, storageClass, uids[name])
	}
	eventuallyValue(t, url, "podslo_pod_sandbox_creation_seconds", map[string]string{"pod": "crashy"}, 2)
	kubelet(t, c, crashy, ready(corev1.ConditionFalse, base.Add(60*time.Second)))
	kubelet(t, c, crashy, ready(corev1.ConditionTrue, base.Add(65*time.Second)))

	const name = "podslo_sandbox_creation_duration_seconds"
	eventuallyMetrics(t, url, `
# HELP `+name+` Time from PodScheduled to the first PodReadyToStartContainers=True of each pod (KEP-3085), observed once per pod UID.
# TYPE `+name+` histogram
`+histogramText(name, `runtime_class="none",storage_class="none",team="a"`, 3, 2, 4)+
		histogramText(name, `runtime_class="kata",storage_class="fast,slow",team="b"`, 10)+
		histogramText(name, `runtime_class="kata",storage_class="unknown",team="b"`, 5)+`
# HELP podslo_sandbox_recreations_total Sandboxes that became ready again after the first one was lost, e.g. after a node or VM crash.
# TYPE podslo_sandbox_recreations_total counter
podslo_sandbox_recreations_total{runtime_class="none",storage_class="none",team="a"} 1
# HELP podslo_observations_skipped_total Observations not made, by SLI and reason. Each pod counts at most once per SLI and reason.
# TYPE podslo_observations_skipped_total counter
podslo_observations_skipped_total{reason="negative_duration",sli="sandbox_creation"} 1
podslo_observations_skipped_total{reason="no_scheduled_condition",sli="sandbox_creation"} 1
podslo_observations_skipped_total{reason="too_old",sli="sandbox_creation"} 1
podslo_observations_skipped_total{reason="negative_duration",sli="startup_phase"} 2
podslo_observations_skipped_total{reason="too_old",sli="startup_phase"} 1
`, name, "podslo_sandbox_recreations_total", "podslo_observations_skipped_total")
	// Counters start at 0 for every class the exporter knows (issue 26,
	// defect 3): "slow" only from the StorageClass watch, as no pod has it
	// alone; kata from the pods.
	eventuallyExactValue(t, url, "podslo_sandbox_creation_timeouts_total", map[string]string{"runtime_class": "kata", "storage_class": "slow", "team": "b"}, 0)
	eventuallyExactValue(t, url, "podslo_sandbox_recreations_total", map[string]string{"runtime_class": "none", "storage_class": "slow", "team": "a"}, 0)
	eventuallyExactValue(t, url, "podslo_observations_skipped_total", map[string]string{"sli": "termination", "reason": "vanished"}, 0)

	perPodWant := fmt.Sprintf(`
# HELP podslo_pod_sandbox_creation_seconds Per pod: time from PodScheduled to the first sandbox readiness.
# TYPE podslo_pod_sandbox_creation_seconds gauge
podslo_pod_sandbox_creation_seconds{%[1]s} 3
podslo_pod_sandbox_creation_seconds{%[2]s} 10
podslo_pod_sandbox_creation_seconds{%[3]s} 5
podslo_pod_sandbox_creation_seconds{%[4]s} 2
podslo_pod_sandbox_creation_seconds{%[5]s} 4
podslo_pod_sandbox_creation_seconds{%[6]s} 1
# HELP podslo_pod_sandbox_recreations_total Per pod: sandbox re-creations after the first sandbox became ready.
# TYPE podslo_pod_sandbox_recreations_total counter
podslo_pod_sandbox_recreations_total{%[1]s} 0
podslo_pod_sandbox_recreations_total{%[2]s} 0
podslo_pod_sandbox_recreations_total{%[3]s} 0
podslo_pod_sandbox_recreations_total{%[4]s} 1
podslo_pod_sandbox_recreations_total{%[5]s} 0
podslo_pod_sandbox_recreations_total{%[6]s} 0
podslo_pod_sandbox_recreations_total{%[7]s} 0
podslo_pod_sandbox_recreations_total{%[8]s} 0
`, perPod("plain", "none", "none"), perPod("kata-pvc", "kata", "fast,slow"), perPod("kata-missing", "kata", "unknown"), perPod("crashy", "none", "none"),
		perPod("legacy", "none", "none"), perPod("ancient", "none", "none"), perPod("skewed", "none", "none"), perPod("unscheduled", "none", "none"))
	eventuallyMetrics(t, url, perPodWant, "podslo_pod_sandbox_creation_seconds", "podslo_pod_sandbox_recreations_total")

	t.Run("native histogram over protobuf", func(t *testing.T) {
		fam := scrapeProto(t, url, name)
		h := series(t, fam, map[string]string{"runtime_class": "none", "storage_class": "none", "team": "a"}).GetHistogram()
		assert.Equal(t, int32(3), h.GetSchema(), "factor 1.1 is schema 3")
		// 2s, 3s and 4s are native buckets 8, 13 and 16 at schema 3.
		assert.Equal(t, map[int32]int64{8: 1, 13: 1, 16: 1}, nativeBuckets(h))
		assert.Equal(t, uint64(3), h.GetSampleCount())
		assert.Len(t, h.GetBucket(), len(classicBuckets), "classic buckets ride along")
		assert.Len(t, h.GetExemplars(), 3, "one exemplar per observed pod")
	})

	t.Run("exemplars name the pod in OpenMetrics", func(t *testing.T) {
		body := scrapeText(t, url, "application/openmetrics-text; version=1.0.0")
		assert.Regexp(t, regexp.MustCompile(`podslo_sandbox_creation_duration_seconds_bucket\{runtime_class="kata",storage_class="fast,slow",team="b",le="10.0"\} 1 # \{namespace="slo",pod="kata-pvc"\} 10.0 \d`), body)
	})

	t.Run("a deleted pod's series disappear", func(t *testing.T) {
		zero := int64(0)
		require.NoError(t, c.CoreV1().Pods(ns).Delete(context.Background(), "plain", metav1.DeleteOptions{GracePeriodSeconds: &zero}))
		without := strings.ReplaceAll(perPodWant, fmt.Sprintf("podslo_pod_sandbox_creation_seconds{%s} 3\n", perPod("plain", "none", "none")), "")
		without = strings.ReplaceAll(without, fmt.Sprintf("podslo_pod_sandbox_recreations_total{%s} 0\n", perPod("plain", "none", "none")), "")
		require.NotEqual(t, perPodWant, without)
		eventuallyMetrics(t, url, without, "podslo_pod_sandbox_creation_seconds", "podslo_pod_sandbox_recreations_total")
		// The aggregate keeps the deleted pod's observation.
		fam := scrapeProto(t, url, name)
		assert.Equal(t, uint64(3), series(t, fam, map[string]string{"runtime_class": "none", "storage_class": "none", "team": "a"}).GetHistogram().GetSampleCount())
	})

	t.Run("health endpoints", func(t *testing.T) {
		for _, path := range []string{"/healthz", "/readyz"} {
			resp, err := http.Get(url + path)
			require.NoError(t, err)
			resp.Body.Close()
			assert.Equal(t, http.StatusOK, resp.StatusCode, path)
		}
	})
}

// scrapeFamilies reads /metrics as text and parses it. Like scrapeText, it
// takes a require.TestingT, so that an EventuallyWithT tick can call it.
func scrapeFamilies(t require.TestingT, url string) map[string]*dto.MetricFamily {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(scrapeText(t, url, "text/plain")))
	require.NoError(t, err)
	return fams
}

// eventuallyValue polls /metrics until the first series of family with the
// given labels has value v.
func eventuallyValue(t *testing.T, url, family string, labels map[string]string, v float64) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		fams := scrapeFamilies(c, url)
		require.Contains(c, fams, family)
		// The sum of the series with these labels: a counter also has a
		// series at 0 for every other class the exporter knows.
		found, sum := false, 0.0
		for _, m := range fams[family].GetMetric() {
			if hasLabels(m, labels) {
				found = true
				sum += m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
		assert.True(c, found, "no series with these labels")
		assert.Equal(c, v, sum)
	}, 30*time.Second, 50*time.Millisecond, "no %s%v = %v", family, labels, v)
}

// eventuallyExactValue waits for the series with exactly these labels to
// equal v.
func eventuallyExactValue(t *testing.T, url, family string, labels map[string]string, v float64) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		fams := scrapeFamilies(c, url)
		require.Contains(c, fams, family)
		for _, m := range fams[family].GetMetric() {
			if len(m.GetLabel()) == len(labels) && hasLabels(m, labels) {
				assert.Equal(c, v, m.GetGauge().GetValue()+m.GetCounter().GetValue())
				return
			}
		}
		assert.Fail(c, "no series with these labels")
	}, 30*time.Second, 50*time.Millisecond, "no %s%v = %v", family, labels, v)
}

func hasLabels(m *dto.Metric, labels map[string]string) bool {
	got := map[string]string{}
	for _, l := range m.GetLabel() {
		got[l.GetName()] = l.GetValue()
	}
	for k, v := range labels {
		if got[k] != v {
			return false
		}
	}
	return true
}

// scrapeText reads /metrics. It takes a require.TestingT so that a
// condition of require.EventuallyWithT can call it with its CollectT: a
// failed request then fails that tick only, not the test.
func scrapeText(t require.TestingT, url, accept string) string {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	req, err := http.NewRequest(http.MethodGet, url+"/metrics", nil)
	require.NoError(t, err)
	req.Header.Set("Accept", accept)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(body)
}

func scrapeProto(t *testing.T, url, family string) *dto.MetricFamily {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url+"/metrics", nil)
	require.NoError(t, err)
	req.Header.Set("Accept", `application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited`)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	dec := expfmt.NewDecoder(resp.Body, expfmt.NewFormat(expfmt.TypeProtoDelim))
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err != nil {
			t.Fatalf("family %s not in protobuf scrape: %v", family, err)
		}
		if mf.GetName() == family {
			return &mf
		}
	}
}

func series(t *testing.T, mf *dto.MetricFamily, labels map[string]string) *dto.Metric {
	t.Helper()
	for _, m := range mf.GetMetric() {
		if hasLabels(m, labels) {
			return m
		}
	}
	t.Fatalf("no %s series with labels %v", mf.GetName(), labels)
	return nil
}

// nativeBuckets expands spans and deltas into absolute bucket counts.
func nativeBuckets(h *dto.Histogram) map[int32]int64 {
	out := map[int32]int64{}
	idx, count, d := int32(0), int64(0), 0
	for _, span := range h.GetPositiveSpan() {
		idx += span.GetOffset()
		for i := uint32(0); i < span.GetLength(); i++ {
			count += h.GetPositiveDelta()[d]
			d++
			if count != 0 {
				out[idx] = count
			}
			idx++
		}
	}
	return out
}
