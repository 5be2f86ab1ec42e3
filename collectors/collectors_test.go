package collectors

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/sli"
	"github.com/podslo/podslo/store"
)

var discard = slog.New(slog.DiscardHandler)

func newStore(t *testing.T) *store.Store {
	t.Helper()
	s, err := store.Open(store.Options{Dir: store.InMemory})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

var labels = Labels{Pod: []string{"app.kubernetes.io/name"}, Histogram: []string{"team"}}

func populate(t *testing.T, s *store.Store) {
	t.Helper()
	creation := sli.FamilyID("sandbox_creation", labels.Histogram)
	recreations := sli.FamilyID("sandbox_recreations", labels.Histogram)
	meta := func(name, rc, sc string) *store.PodMeta {
		return &store.PodMeta{Namespace: "ns", Name: name, Node: "n1", RuntimeClass: rc, StorageClass: sc, PodLabels: []string{name}, HistogramLabels: []string{"a"}}
	}
	require.NoError(t, s.Apply(store.Change{
		UID: "u1", Meta: meta("p1", "runc", "none"),
		State:   lifecycle.State{FirstSandboxReady: 100, LastSandboxReady: 200, SandboxCreationMs: 3000, HasSandboxCreation: true, Recreations: 1},
		Observe: []store.Sample{{Family: creation, Labels: []string{"runc", "none", "a"}, Value: 3}},
		Add:     []store.Sample{{Family: recreations, Labels: []string{"runc", "none", "a"}, Value: 1}},
	}))
	require.NoError(t, s.Apply(store.Change{
		UID: "u2", Meta: meta("p2", "kata", "fast,slow"),
		State:   lifecycle.State{FirstSandboxReady: 100, LastSandboxReady: 100, SandboxCreationMs: 12000, HasSandboxCreation: true},
		Observe: []store.Sample{{Family: creation, Labels: []string{"kata", "fast,slow", "a"}, Value: 12}},
	}))
	// Skipped as negative: first readiness known, no latency.
	require.NoError(t, s.Apply(store.Change{
		UID: "u3", Meta: meta("p3", "runc", "none"),
		State: lifecycle.State{FirstSandboxReady: 100, LastSandboxReady: 100},
		Add:   []store.Sample{{Family: sli.FamilySkipped, Labels: []string{"sandbox_creation", "negative_duration"}, Value: 1}},
	}))
	// Not ready yet: no per-pod series.
	require.NoError(t, s.Apply(store.Change{UID: "u4", Meta: meta("p4", "runc", "none")}))
	// Persisted under another --histogram-label set: never exposed.
	require.NoError(t, s.Apply(store.Change{
		UID: "u5", Meta: meta("p5", "runc", "none"), State: lifecycle.State{FirstSandboxReady: 1},
		Observe: []store.Sample{{Family: sli.FamilyID("sandbox_creation", []string{"tier"}), Labels: []string{"runc", "none", "gold"}, Value: 1}},
	}))
}

func TestSandboxCollector(t *testing.T) {
	s := newStore(t)
	populate(t, s)
	want := `
# HELP podslo_sandbox_creation_duration_seconds Time from PodScheduled to the first PodReadyToStartContainers=True of each pod (KEP-3085), observed once per pod UID.
# TYPE podslo_sandbox_creation_duration_seconds histogram
` + bucketLines(`runtime_class="kata",storage_class="fast,slow",team="a"`, 12) + bucketLines(`runtime_class="runc",storage_class="none",team="a"`, 3) + `
# HELP podslo_sandbox_recreations_total Sandboxes that became ready again after the first one was lost, e.g. after a node or VM crash.
# TYPE podslo_sandbox_recreations_total counter
podslo_sandbox_recreations_total{runtime_class="runc",storage_class="none",team="a"} 1
` + zeroLines("podslo_sandbox_recreations_total", `team="a"`, []string{"kata", "none", "runc"}, []string{"fast,slow", "none"}, "runc/none")
	require.NoError(t, testutil.CollectAndCompare(NewSLIs(s, labels, discard), strings.NewReader(want),
		"podslo_sandbox_creation_duration_seconds", "podslo_sandbox_recreations_total"))
}

// perPodWant is what populate's pods give per pod, in the text format.
func perPodWant() string {
	perPod := func(uid, name, rc, sc string) string {
		return `label_app_kubernetes_io_name="` + name + `",namespace="ns",node="n1",pod="` + name + `",runtime_class="` + rc + `",storage_class="` + sc + `",uid="` + uid + `"`
	}
	return `
# HELP podslo_pod_sandbox_creation_seconds Per pod: time from PodScheduled to the first sandbox readiness.
# TYPE podslo_pod_sandbox_creation_seconds gauge
podslo_pod_sandbox_creation_seconds{` + perPod("u1", "p1", "runc", "none") + `} 3
podslo_pod_sandbox_creation_seconds{` + perPod("u2", "p2", "kata", "fast,slow") + `} 12
# HELP podslo_pod_sandbox_recreations_total Per pod: sandbox re-creations after the first sandbox became ready.
# TYPE podslo_pod_sandbox_recreations_total counter
podslo_pod_sandbox_recreations_total{` + perPod("u1", "p1", "runc", "none") + `} 1
podslo_pod_sandbox_recreations_total{` + perPod("u2", "p2", "kata", "fast,slow") + `} 0
podslo_pod_sandbox_recreations_total{` + perPod("u3", "p3", "runc", "none") + `} 0
podslo_pod_sandbox_recreations_total{` + perPod("u5", "p5", "runc", "none") + `} 0
`
}

func TestPerPodText(t *testing.T) {
	s := newStore(t)
	populate(t, s)
	var buf bytes.Buffer
	require.NoError(t, NewPerPod(s, labels, nil).Write(&buf, expfmt.NewFormat(expfmt.TypeTextPlain)))
	assert.Equal(t, normalize(parseText(t, perPodWant())), normalize(parseText(t, buf.String())))
}

func TestPerPodProtobufEqualsText(t *testing.T) {
	s := newStore(t)
	populate(t, s)
	var buf bytes.Buffer
	require.NoError(t, NewPerPod(s, labels, nil).Write(&buf, expfmt.NewFormat(expfmt.TypeProtoDelim)))
	got := map[string]*dto.MetricFamily{}
	dec := expfmt.NewDecoder(&buf, expfmt.NewFormat(expfmt.TypeProtoDelim))
	for {
		var mf dto.MetricFamily
		if err := dec.Decode(&mf); err != nil {
			break
		}
		got[mf.GetName()] = &mf
	}
	assert.Equal(t, normalize(parseText(t, perPodWant())), normalize(got))
}

func TestPerPodOpenMetrics(t *testing.T) {
	s := newStore(t)
	require.NoError(t, s.Apply(store.Change{UID: "u1", Meta: &store.PodMeta{Namespace: "ns", Name: "p1", Node: "n1", RuntimeClass: "none", StorageClass: "none"},
		State: lifecycle.State{FirstSandboxReady: 1, LastSandboxReady: 1, SandboxCreationMs: 3000, HasSandboxCreation: true, Recreations: 2}}))
	var buf bytes.Buffer
	require.NoError(t, NewPerPod(s, Labels{}, nil).Write(&buf, expfmt.NewFormat(expfmt.TypeOpenMetrics)))
	assert.Equal(t, `# HELP podslo_pod_sandbox_creation_seconds Per pod: time from PodScheduled to the first sandbox readiness.
# TYPE podslo_pod_sandbox_creation_seconds gauge
podslo_pod_sandbox_creation_seconds{namespace="ns",node="n1",pod="p1",runtime_class="none",storage_class="none",uid="u1"} 3.0
# HELP podslo_pod_sandbox_recreations Per pod: sandbox re-creations after the first sandbox became ready.
# TYPE podslo_pod_sandbox_recreations counter
podslo_pod_sandbox_recreations_total{namespace="ns",node="n1",pod="p1",runtime_class="none",storage_class="none",uid="u1"} 2.0
`, buf.String())
}

func TestPerPodEscapesLabelValues(t *testing.T) {
	s := newStore(t)
	require.NoError(t, s.Apply(store.Change{UID: "u1", Meta: &store.PodMeta{Namespace: "ns", Name: "p1", PodLabels: []string{"a\\b\"c\nd"}},
		State: lifecycle.State{FirstSandboxReady: 1}}))
	var buf bytes.Buffer
	require.NoError(t, NewPerPod(s, Labels{Pod: []string{"x"}}, nil).Write(&buf, expfmt.NewFormat(expfmt.TypeTextPlain)))
	fams := parseText(t, buf.String())
	require.Contains(t, fams, "podslo_pod_sandbox_recreations_total")
	require.Len(t, fams["podslo_pod_sandbox_recreations_total"].GetMetric(), 1)
	got := fams["podslo_pod_sandbox_recreations_total"].GetMetric()[0]
	var values []string
	for _, l := range got.GetLabel() {
		if l.GetName() == "label_x" {
			values = append(values, l.GetValue())
		}
	}
	assert.Equal(t, []string{"a\\b\"c\nd"}, values, "label_x present once and round-trips through the text parser")
}

func TestHandlerServesBothAndGzip(t *testing.T) {
	s := newStore(t)
	populate(t, s)
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewSLIs(s, labels, discard))
	h := Handler(reg, NewPerPod(s, labels, nil), nil, discard)
	for _, gz := range []bool{false, true} {
		fams := parseText(t, scrapeBody(t, h, gz))
		for _, name := range []string{"podslo_sandbox_creation_duration_seconds", "podslo_pod_sandbox_creation_seconds", "podslo_pod_sandbox_recreations_total", "promhttp_metric_handler_requests_total"} {
			assert.Contains(t, fams, name, "gzip=%t", gz)
		}
	}
	t.Run("OpenMetrics ends with EOF after the per-pod families", func(t *testing.T) {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		body := rec.Body.String()
		assert.True(t, strings.HasSuffix(body, "# EOF\n"))
		assert.Equal(t, 1, strings.Count(body, "# EOF"))
		aggregate := strings.Index(body, "podslo_sandbox_creation_duration_seconds")
		perPod := strings.Index(body, "podslo_pod_sandbox_creation_seconds")
		require.GreaterOrEqual(t, aggregate, 0, "the aggregated family is served")
		require.GreaterOrEqual(t, perPod, 0, "the per-pod family is served")
		assert.Less(t, aggregate, perPod)
	})
}

// parseText parses the text format; normalize makes two expositions
// compare equal whatever order they list series and labels in.
func parseText(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	require.NoError(t, err)
	return fams
}

// normalize renders families as canonical text: families by name, series by
// labels, labels by name.
func normalize(fams map[string]*dto.MetricFamily) string {
	names := make([]string, 0, len(fams))
	for name, f := range fams {
		names = append(names, name)
		for _, m := range f.Metric {
			slices.SortFunc(m.Label, func(a, b *dto.LabelPair) int { return strings.Compare(a.GetName(), b.GetName()) })
		}
		slices.SortFunc(f.Metric, func(a, b *dto.Metric) int { return strings.Compare(labelKey(a), labelKey(b)) })
	}
	slices.Sort(names)
	var b strings.Builder
	for _, name := range names {
		_, _ = expfmt.MetricFamilyToText(&b, fams[name])
	}
	return b.String()
}

func labelKey(m *dto.Metric) string {
	var b strings.Builder
	for _, l := range m.GetLabel() {
		b.WriteString(l.GetName() + "=" + l.GetValue() + ",")
	}
	return b.String()
}

// bucketLines is the classic exposition of one observation v.
func bucketLines(labels string, v float64) string {
	var b strings.Builder
	for _, le := range store.Buckets {
		n := 0
		if v <= le {
			n = 1
		}
		b.WriteString("podslo_sandbox_creation_duration_seconds_bucket{" + labels + `,le="` + fmtFloat(le) + `"} ` + itoa(n) + "\n")
	}
	b.WriteString("podslo_sandbox_creation_duration_seconds_bucket{" + labels + `,le="+Inf"} 1` + "\n")
	b.WriteString("podslo_sandbox_creation_duration_seconds_sum{" + labels + "} " + fmtFloat(v) + "\n")
	b.WriteString("podslo_sandbox_creation_duration_seconds_count{" + labels + "} 1\n")
	return b.String()
}

func TestSkippedCollector(t *testing.T) {
	s := newStore(t)
	populate(t, s)
	// Two creations in milliseconds beside populate's two in seconds; the
	// one persisted under another --histogram-label set is not counted.
	for range 2 {
		require.NoError(t, s.Apply(store.Change{UID: "precise", Meta: &store.PodMeta{}, State: lifecycle.State{FirstSandboxReady: 1},
			Observe: []store.Sample{{Family: sli.FamilyID("sandbox_creation", labels.Histogram), Labels: []string{"runc", "none", "a"}, Value: 0.2, Precise: true}}}))
	}
	want := `
# HELP podslo_observations_skipped_total Observations not made, by SLI and reason. Each pod counts at most once per SLI and reason.
# TYPE podslo_observations_skipped_total counter
podslo_observations_skipped_total{reason="negative_duration",sli="sandbox_creation"} 1
`
	// Every other SLI and reason at 0.
	for _, sk := range lifecycle.Skips() {
		if sk != (lifecycle.Skip{SLI: lifecycle.SandboxCreation, Reason: lifecycle.NegativeDuration}) {
			want += fmt.Sprintf("podslo_observations_skipped_total{reason=%q,sli=%q} 0\n", sk.Reason, sk.SLI)
		}
	}
	want += `# HELP podslo_observations_total Observations made into podslo's histograms, by SLI and precision: millisecond when both ends were timed by the watch while it was current, second when either end is a one-second condition time.
# TYPE podslo_observations_total counter
podslo_observations_total{precision="millisecond",sli="sandbox_creation"} 2
podslo_observations_total{precision="second",sli="sandbox_creation"} 2
`
	// Every other measured SLI and precision at 0.
	for _, m := range lifecycle.MeasuredSLIs() {
		for _, p := range []string{"millisecond", "second"} {
			if m != lifecycle.SandboxCreation {
				want += fmt.Sprintf("podslo_observations_total{precision=%q,sli=%q} 0\n", p, m)
			}
		}
	}
	require.NoError(t, testutil.CollectAndCompare(NewSkipped(s, labels, discard), strings.NewReader(want)))
}

// TestNativeLayoutMatchesClientGolang observes the same values into a live
// client_golang histogram and into the store, and compares what each
// exposes: schema, zero bucket, spans and deltas must be identical.
func TestNativeLayoutMatchesClientGolang(t *testing.T) {
	values := []float64{0, 1, 2, 2, 3, 5, 8, 13, 21, 60, 61, 300, 3599, 4000}
	live := prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "x", Help: "x", Buckets: store.Buckets,
		NativeHistogramBucketFactor: 1.1, NativeHistogramMaxBucketNumber: 160,
		NativeHistogramMinResetDuration: time.Hour,
	})
	s := newStore(t)
	for i, v := range values {
		live.Observe(v)
		require.NoError(t, s.Apply(store.Change{UID: types.UID(itoa(i)), Meta: &store.PodMeta{}, State: lifecycle.State{FirstSandboxReady: int64(i + 1)},
			Observe: []store.Sample{{Family: "sandbox_creation", Labels: []string{"runc", "none"}, Value: v}}}))
	}
	var want dto.Metric
	require.NoError(t, live.Write(&want))
	got := collectOne(t, NewSLIs(s, Labels{}, discard), "podslo_sandbox_creation_duration_seconds")

	w, g := want.GetHistogram(), got.GetHistogram()
	assert.Equal(t, w.GetSchema(), g.GetSchema())
	assert.Equal(t, w.GetZeroCount(), g.GetZeroCount())
	assert.Equal(t, w.GetZeroThreshold(), g.GetZeroThreshold())
	assert.Equal(t, w.GetPositiveSpan(), g.GetPositiveSpan())
	assert.Equal(t, w.GetPositiveDelta(), g.GetPositiveDelta())
	assert.Equal(t, w.GetSampleCount(), g.GetSampleCount())
	assert.Equal(t, w.GetSampleSum(), g.GetSampleSum())
	for i := range w.GetBucket() {
		assert.Equal(t, w.GetBucket()[i].GetCumulativeCount(), g.GetBucket()[i].GetCumulativeCount(), "classic bucket le=%v", w.GetBucket()[i].GetUpperBound())
	}
}

func TestExemplarsNameThePod(t *testing.T) {
	s := newStore(t)
	at := time.Unix(1700000000, 0)
	long := strings.Repeat("p", 253)
	for i, e := range []store.Exemplar{{Namespace: "ns", Pod: "fast", Value: 2, Time: at}, {Namespace: "ns", Pod: long, Value: 5000, Time: at}} {
		require.NoError(t, s.Apply(store.Change{UID: types.UID(itoa(i)), Meta: &store.PodMeta{}, State: lifecycle.State{FirstSandboxReady: 1},
			Observe: []store.Sample{{Family: "sandbox_creation", Labels: []string{"runc", "none"}, Value: e.Value, Exemplar: &e}}}))
	}
	h := collectOne(t, NewSLIs(s, Labels{}, discard), "podslo_sandbox_creation_duration_seconds").GetHistogram()
	le2 := h.GetBucket()[5]
	require.Equal(t, 2.0, le2.GetUpperBound())
	assert.Equal(t, "ns", le2.GetExemplar().GetLabel()[0].GetValue())
	assert.Equal(t, "fast", le2.GetExemplar().GetLabel()[1].GetValue())
	assert.Equal(t, at.Unix(), le2.GetExemplar().GetTimestamp().AsTime().Unix())

	inf := h.GetBucket()[len(h.GetBucket())-1]
	assert.True(t, math.IsInf(inf.GetUpperBound(), 1), "an exemplar above every bound gets a +Inf bucket")
	assert.Equal(t, uint64(2), inf.GetCumulativeCount())
	runes := 0
	for _, l := range inf.GetExemplar().GetLabel() {
		runes += len([]rune(l.GetName())) + len([]rune(l.GetValue()))
	}
	assert.Equal(t, 128, runes, "cut to the OpenMetrics limit of 128 runes")
	assert.Len(t, h.GetExemplars(), 2, "native histograms carry the same exemplars")
}

// TestEveryExposedFamilyIsDeclared guards the docs test: a family emitted
// without a Family declaration would escape docs/metrics.md.
func TestEveryExposedFamilyIsDeclared(t *testing.T) {
	s := newStore(t)
	populate(t, s)
	// One pod with every other SLI, one still pending.
	fam := func(f string) string { return sli.FamilyID(f, labels.Histogram) }
	dims := []string{"runc", "none", "a"}
	require.NoError(t, s.Apply(store.Change{
		UID: "u6", Meta: &store.PodMeta{Namespace: "ns", Name: "p6", PodLabels: []string{"p6"}, HistogramLabels: []string{"a"}},
		State: lifecycle.State{Scheduled: 1, FirstSandboxReady: 2, LastSandboxReady: 2, HasTermination: true, TerminationMs: 3000, HasReadiness: true, ReadinessMs: 1000, StableSeen: true,
			ImagePull: 1500, ImagePullKiB: 2, Startup: 2500, Pulls: lifecycle.PullsDone | lifecycle.StartupMeasured | lifecycle.StartupDone},
		Observe: []store.Sample{
			{Family: fam("stabilization"), Labels: dims, Value: 30},
			{Family: fam("termination"), Labels: dims, Value: 3},
			{Family: fam("readiness"), Labels: dims, Value: 1},
			{Family: fam("startup_phase"), Labels: []string{"runc", "none", "total", "a"}, Value: 9},
			{Family: fam("image_pull"), Labels: []string{"runc", "none", "miss", "a"}, Value: 1.5},
			{Family: fam("pod_startup_sli"), Labels: []string{"runc", "none", "false", "a"}, Value: 2.5},
		},
		Add: []store.Sample{
			{Family: fam("terminations_over_grace"), Labels: dims, Value: 1},
			{Family: fam("stable_transitions"), Labels: []string{"runc", "none", "false", "a"}, Value: 1},
			{Family: fam("sandbox_creation_timeouts"), Labels: dims, Value: 1},
			{Family: fam("sandbox_creations_excluded"), Labels: []string{"runc", "none", "user_error", "a"}, Value: 1},
		},
	}))
	require.NoError(t, s.Apply(store.Change{
		UID: "u7", Meta: &store.PodMeta{Namespace: "ns", Name: "p7", PodLabels: []string{"p7"}, HistogramLabels: []string{"a"}},
		State: lifecycle.State{Scheduled: 1, UserError: true},
	}))
	require.NoError(t, s.Apply(store.Change{
		UID: "u8", Meta: &store.PodMeta{Namespace: "ns", Name: "p8", PodLabels: []string{"p8"}, HistogramLabels: []string{"a"}},
		State: lifecycle.State{Scheduled: 1, FirstSandboxReady: 2, LastSandboxReady: 2, DeletionRequested: 3, DeletionGrace: 30},
	}))
	reg := prometheus.NewPedanticRegistry()
	events := NewInformerEvents()
	events.WithLabelValues("pods", "add").Inc()
	reg.MustRegister(NewSLIs(s, labels, discard), NewSkipped(s, labels, discard), NewSelf(s), NewBuildInfo(), NewPodWatchCurrent(func() bool { return true }), events, NewNetworkPolicies(npState(true), nil))
	fams, err := reg.Gather()
	require.NoError(t, err)
	gathered := map[string]bool{}
	for _, f := range fams {
		gathered[f.GetName()] = true
	}
	var perPod bytes.Buffer
	require.NoError(t, NewPerPod(s, labels, nil).Write(&perPod, expfmt.NewFormat(expfmt.TypeTextPlain)))
	for name := range parseText(t, perPod.String()) {
		gathered[name] = true
	}
	declared := map[string]bool{}
	for _, f := range All() {
		declared[f.Name] = true
	}
	assert.Equal(t, declared, gathered)
}

func collectOne(t *testing.T, c prometheus.Collector, name string) *dto.Metric {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() == name {
			require.Len(t, f.GetMetric(), 1)
			return f.GetMetric()[0]
		}
	}
	t.Fatalf("no family %s", name)
	return nil
}

func TestFailureAndPendingFamilies(t *testing.T) {
	s := newStore(t)
	dims := []string{"kata", "fast"}
	require.NoError(t, s.Apply(store.Change{
		UID: "stuck", Meta: &store.PodMeta{Namespace: "ns", Name: "stuck", Node: "n1", RuntimeClass: "kata", StorageClass: "fast"},
		State: lifecycle.State{Scheduled: 1000, TimedOut: true},
		Add:   []store.Sample{{Family: "sandbox_creation_timeouts", Labels: dims, Value: 1}},
	}))
	require.NoError(t, s.Apply(store.Change{
		UID: "blocked", Meta: &store.PodMeta{Namespace: "ns", Name: "blocked", Node: "n1", RuntimeClass: "kata", StorageClass: "fast"},
		State: lifecycle.State{Scheduled: 1200, UserError: true, Excluded: true, TimedOut: true},
		Add:   []store.Sample{{Family: "sandbox_creations_excluded", Labels: []string{"kata", "fast", "user_error"}, Value: 1}},
	}))
	require.NoError(t, s.Apply(store.Change{
		UID: "leaving", Meta: &store.PodMeta{Namespace: "ns", Name: "leaving", Node: "n1", RuntimeClass: "kata", StorageClass: "fast"},
		State: lifecycle.State{Scheduled: 1200, DeletionRequested: 1300, DeletionGrace: 30},
	}))
	// Deleted just now with an hour's grace: pending, within its grace.
	draining := time.Now().Unix()
	require.NoError(t, s.Apply(store.Change{
		UID: "draining", Meta: &store.PodMeta{Namespace: "ns", Name: "draining", Node: "n1", RuntimeClass: "kata", StorageClass: "fast", DeletionDeadline: draining + 3600},
		State: lifecycle.State{Scheduled: 1200, DeletionRequested: draining, DeletionGrace: 3600},
	}))
	want := `
# HELP podslo_sandbox_creation_pending_pods Scheduled pods still waiting for their first sandbox, by whether a user error was reported for them and whether their creation timed out.
# TYPE podslo_sandbox_creation_pending_pods gauge
podslo_sandbox_creation_pending_pods{runtime_class="kata",storage_class="fast",timed_out="true",user_error="false"} 1
podslo_sandbox_creation_pending_pods{runtime_class="kata",storage_class="fast",timed_out="true",user_error="true"} 1
# HELP podslo_sandbox_creation_timeouts_total Scheduled pods whose first sandbox was not ready within --sandbox-creation-timeout, counted once per pod.
# TYPE podslo_sandbox_creation_timeouts_total counter
podslo_sandbox_creation_timeouts_total{runtime_class="kata",storage_class="fast"} 1
# HELP podslo_sandbox_creations_excluded_total Sandbox creations and timeouts left out of the SLI, by reason (user_error: a FailedMount event for a missing Secret or ConfigMap).
# TYPE podslo_sandbox_creations_excluded_total counter
podslo_sandbox_creations_excluded_total{reason="user_error",runtime_class="kata",storage_class="fast"} 1
# HELP podslo_terminations_pending_pods Pods whose deletion was requested and whose sandbox is not yet gone, by whether their grace period has ended.
# TYPE podslo_terminations_pending_pods gauge
podslo_terminations_pending_pods{over_grace="false",runtime_class="kata",storage_class="fast"} 1
podslo_terminations_pending_pods{over_grace="true",runtime_class="kata",storage_class="fast"} 1
`
	// Every other counter series of the known classes at 0.
	classes := [][]string{{"kata", "none"}, {"fast", "none"}}
	want += zeroLines("podslo_sandbox_creation_timeouts_total", "", classes[0], classes[1], "kata/fast") +
		zeroLines("podslo_sandbox_creations_excluded_total", `reason="user_error"`, classes[0], classes[1], "kata/fast") +
		header("podslo_sandbox_recreations_total") + zeroLines("podslo_sandbox_recreations_total", "", classes[0], classes[1], "") +
		header("podslo_terminations_over_grace_total") + zeroLines("podslo_terminations_over_grace_total", "", classes[0], classes[1], "") +
		header("podslo_stable_transitions_total") + zeroLines("podslo_stable_transitions_total", `to="false"`, classes[0], classes[1], "") +
		header("podslo_image_pulls_failed_total") + zeroLines("podslo_image_pulls_failed_total", "", classes[0], classes[1], "")
	require.NoError(t, testutil.CollectAndCompare(NewSLIs(s, Labels{}, discard), strings.NewReader(want)))

	pp := NewPerPod(s, Labels{}, nil)
	pp.now = func() time.Time { return time.Unix(1500, 0) }
	var buf bytes.Buffer
	require.NoError(t, pp.Write(&buf, expfmt.NewFormat(expfmt.TypeTextPlain)))
	assert.Equal(t, normalize(parseText(t, `
# HELP podslo_pod_sandbox_pending_seconds Per pod: seconds since PodScheduled of a pod still waiting for its first sandbox.
# TYPE podslo_pod_sandbox_pending_seconds gauge
podslo_pod_sandbox_pending_seconds{namespace="ns",node="n1",pod="stuck",runtime_class="kata",storage_class="fast",uid="stuck"} 500
podslo_pod_sandbox_pending_seconds{namespace="ns",node="n1",pod="blocked",runtime_class="kata",storage_class="fast",uid="blocked"} 300
# HELP podslo_pod_deletion_requested_timestamp_seconds Per pod whose termination is pending (its deletion requested, its sandbox not yet gone): the Unix time of the first deletion request.
# TYPE podslo_pod_deletion_requested_timestamp_seconds gauge
podslo_pod_deletion_requested_timestamp_seconds{namespace="ns",node="n1",pod="leaving",runtime_class="kata",storage_class="fast",uid="leaving"} 1300
podslo_pod_deletion_requested_timestamp_seconds{namespace="ns",node="n1",pod="draining",runtime_class="kata",storage_class="fast",uid="draining"} `+strconv.FormatInt(draining, 10)+`
`)), normalize(parseText(t, buf.String())))
}

// TestCollectedHistogramSharesNoStoreMemory: a collected metric is written
// after Collect returns, while the store may already be applying the next
// observation. Under -race this fails if the metric reads store memory.
func TestCollectedHistogramSharesNoStoreMemory(t *testing.T) {
	s := newStore(t)
	observe := func(i int) error {
		v := float64(i % 10)
		return s.Apply(store.Change{UID: types.UID(itoa(i)), Meta: &store.PodMeta{}, State: lifecycle.State{FirstSandboxReady: 1},
			Observe: []store.Sample{{Family: "sandbox_creation", Labels: []string{"runc", "none"}, Value: v,
				Exemplar: &store.Exemplar{Namespace: "ns", Pod: itoa(i), Value: v, Time: time.Unix(int64(i), 0)}}}})
	}
	require.NoError(t, observe(0))
	ch := make(chan prometheus.Metric, 16)
	NewSLIs(s, Labels{}, discard).Collect(ch)
	close(ch)
	var collected []prometheus.Metric
	for m := range ch {
		collected = append(collected, m)
	}
	require.NotEmpty(t, collected)
	done := make(chan error)
	go func() {
		for i := 1; i < 200; i++ {
			if err := observe(i); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for range 200 {
		for _, m := range collected {
			var out dto.Metric
			require.NoError(t, m.Write(&out))
		}
	}
	require.NoError(t, <-done)
}

// stalledWriter accepts its first write, then blocks until released, as a
// scraper that stopped reading does once the TCP window is full.
type stalledWriter struct {
	writes  int
	stalled chan struct{}
	release chan struct{}
}

func (w *stalledWriter) Write(b []byte) (int, error) {
	if w.writes++; w.writes == 2 {
		close(w.stalled)
		<-w.release
	}
	return len(b), nil
}

// A scraper that stops reading must not stop pods from being recorded: the
// per-pod writer holds the store's lock to copy, never to write.
func TestStalledScrapeDoesNotBlockTheStore(t *testing.T) {
	for name, format := range map[string]expfmt.Format{"text": expfmt.NewFormat(expfmt.TypeTextPlain), "protobuf": expfmt.NewFormat(expfmt.TypeProtoDelim)} {
		t.Run(name, func(t *testing.T) {
			s := newStore(t)
			// More than the writer's 64 KB buffer in the first family.
			for i := range 2000 {
				require.NoError(t, s.Apply(store.Change{
					UID:   types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i)),
					Meta:  &store.PodMeta{Namespace: "ns", Name: fmt.Sprintf("web-%06d", i), Node: "n1", RuntimeClass: "runc", StorageClass: "none"},
					State: lifecycle.State{FirstSandboxReady: 100, LastSandboxReady: 100, SandboxCreationMs: 3000, HasSandboxCreation: true},
				}))
			}
			w := &stalledWriter{stalled: make(chan struct{}), release: make(chan struct{})}
			done := make(chan error, 1)
			go func() { done <- NewPerPod(s, Labels{}, nil).Write(w, format) }()
			select {
			case <-w.stalled:
			case <-time.After(10 * time.Second):
				t.Fatal("the writer never wrote twice")
			}
			applied := make(chan error, 1)
			go func() {
				applied <- s.Apply(store.Change{UID: "new", Meta: &store.PodMeta{Namespace: "ns", Name: "new"},
					State: lifecycle.State{FirstSandboxReady: 101, LastSandboxReady: 101}})
			}()
			select {
			case err := <-applied:
				require.NoError(t, err)
			case <-time.After(5 * time.Second):
				t.Error("store.Apply blocked behind a stalled scrape")
			}
			close(w.release)
			require.NoError(t, <-done)
		})
	}
}

// scrapeBody scrapes h, asking for gzip or not, and returns the body,
// decompressed: a gzip stream must be complete, trailer included.
func scrapeBody(t *testing.T, h http.Handler, gz bool) string {
	t.Helper()
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	if gz {
		req.Header.Set("Accept-Encoding", "gzip")
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusOK, rec.Code)
	if !gz {
		require.Empty(t, rec.Header().Get("Content-Encoding"))
		return rec.Body.String()
	}
	require.Equal(t, "gzip", rec.Header().Get("Content-Encoding"))
	zr, err := gzip.NewReader(rec.Body)
	require.NoError(t, err)
	raw, err := io.ReadAll(zr)
	require.NoError(t, err)
	return string(raw)
}

// manyPods stores n started pods: enough for a body of several MB, which
// the gzip path hands over in several chunks.
func manyPods(t *testing.T, s *store.Store, n int) {
	t.Helper()
	for i := range n {
		require.NoError(t, s.Apply(store.Change{
			UID:   types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", i)),
			Meta:  &store.PodMeta{Namespace: "ns", Name: fmt.Sprintf("web-%06d", i), Node: fmt.Sprintf("node-%03d", i%100), RuntimeClass: "none", StorageClass: "none", PodLabels: []string{"web"}},
			State: lifecycle.State{Scheduled: 98, FirstSandboxReady: 100, LastSandboxReady: 100, SandboxCreationMs: int32(i%30) * 1000, HasSandboxCreation: true},
		}))
	}
}

// The gzip body is compressed by another goroutine, chunk by chunk: once
// decompressed it must be the identity body, byte for byte.
func TestHandlerGzipBodyIsTheIdentityBody(t *testing.T) {
	s := newStore(t)
	manyPods(t, s, 30_000)
	h := Handler(prometheus.NewRegistry(), NewPerPod(s, labels, nil), nil, discard)
	// The store lists pods in no fixed order, so the lines are compared
	// sorted; the handler's own request counter differs between the two
	// scrapes.
	lines := func(body string) []string {
		var keep []string
		for _, l := range strings.SplitAfter(body, "\n") {
			if !strings.Contains(l, "promhttp_metric_handler_requests") {
				keep = append(keep, l)
			}
		}
		slices.Sort(keep)
		return keep
	}
	identity := scrapeBody(t, h, false)
	require.Greater(t, len(identity), 4<<20, "a body of several chunks")
	require.Equal(t, 30_000, strings.Count(identity, "\npodslo_pod_sandbox_creation_seconds{"))
	want, got := lines(identity), lines(scrapeBody(t, h, true))
	require.Len(t, got, len(want))
	for i := range want {
		// One line at a time: a diff of the whole body is unreadable.
		require.Equal(t, want[i], got[i], "sorted line %d", i)
	}
}

// failingWriter is a scraper that went away: every write fails.
type failingWriter struct {
	header http.Header
	writes int
}

func (w *failingWriter) Header() http.Header { return w.header }
func (w *failingWriter) WriteHeader(int)     {}
func (w *failingWriter) Write([]byte) (int, error) {
	w.writes++
	return 0, errors.New("connection reset by peer")
}

// A scraper that goes away stops the rendering, and the handler returns:
// the compressing goroutine's error reaches the renderer through the pipe.
func TestHandlerGzipStopsWhenTheScraperGoesAway(t *testing.T) {
	s := newStore(t)
	manyPods(t, s, 30_000)
	var logs bytes.Buffer
	h := Handler(prometheus.NewRegistry(), NewPerPod(s, labels, nil), nil, slog.New(slog.NewTextHandler(&logs, nil)))
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	w := &failingWriter{header: http.Header{}}
	h.ServeHTTP(w, req)
	// One chunk's compressed output fails, and nothing more is written:
	// without the error, the body's chunks would each have been tried.
	assert.LessOrEqual(t, w.writes, 2)
	assert.Contains(t, logs.String(), "Writing per-pod metrics failed")
	assert.Contains(t, logs.String(), "connection reset by peer")
}
