package classtable

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podslo/podslo/internal/testenv"
	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/sli"
	"github.com/podslo/podslo/store"
)

func newStore(t *testing.T) *store.Store {
	t.Helper()
	s, err := store.Open(store.Options{Dir: store.InMemory})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// histogramLabels stand for the exporter's --histogram-label names.
var histogramLabels = []string{"team"}

// quantileCases are classic histograms over bounds 1, 2, 4, 8 (and +Inf)
// with the quantile histogram_quantile gives, worked out by hand.
var quantileCases = []struct {
	name   string
	q      float64
	bounds []float64
	counts []uint64 // per bucket, the last one +Inf
	want   float64
}{
	{"median within one bucket", 0.5, []float64{1, 2, 4, 8}, []uint64{0, 4, 0, 0, 0}, 1.5},
	{"the first bucket starts at 0", 0.5, []float64{1, 2, 4, 8}, []uint64{4, 0, 0, 0, 0}, 0.5},
	{"median across buckets", 0.5, []float64{1, 2, 4, 8}, []uint64{1, 1, 1, 1, 0}, 2},
	{"p90 across buckets", 0.9, []float64{1, 2, 4, 8}, []uint64{1, 1, 1, 1, 0}, 6.4},
	{"p99 across buckets", 0.99, []float64{1, 2, 4, 8}, []uint64{1, 1, 1, 1, 0}, 7.84},
	{"a rank on a bucket's count is its upper bound", 0.5, []float64{1, 2, 4, 8}, []uint64{2, 2, 0, 0, 0}, 1},
	{"empty buckets before are skipped", 0.25, []float64{1, 2, 4, 8}, []uint64{0, 0, 4, 0, 0}, 2.5},
	{"q=1 is the top of the highest non-empty bucket", 1, []float64{1, 2, 4, 8}, []uint64{1, 1, 0, 0, 0}, 2},
	{"in the +Inf bucket: the highest finite bound", 0.5, []float64{1, 2, 4, 8}, []uint64{1, 0, 0, 0, 3}, 8},
	{"p99 in the +Inf bucket", 0.99, []float64{1, 2, 4, 8}, []uint64{98, 0, 0, 0, 2}, 8},
	{"p99 on the last finite bucket's count", 0.99, []float64{1, 2, 4, 8}, []uint64{99, 0, 0, 0, 1}, 1},
	{"just below the +Inf bucket", 0.75, []float64{1, 2, 4, 8}, []uint64{1, 0, 0, 2, 1}, 8},
	{"a non-positive first bound is returned as is", 0.5, []float64{-1, 0, 1}, []uint64{2, 0, 0, 0}, -1},
	{"empty histogram", 0.5, []float64{1, 2, 4, 8}, []uint64{0, 0, 0, 0, 0}, math.NaN()},
	{"q=0 in an empty first bucket is NaN, as in Prometheus (0/0)", 0, []float64{1, 2, 4, 8}, []uint64{0, 2, 0, 0, 0}, math.NaN()},
	{"only a +Inf bucket", 0.5, nil, []uint64{3}, math.NaN()},
	{"counts not matching the bounds", 0.5, []float64{1, 2}, []uint64{1, 1}, math.NaN()},
	{"q < 0", -0.1, []float64{1, 2, 4, 8}, []uint64{1, 1, 1, 1, 0}, math.Inf(-1)},
	{"q > 1", 1.1, []float64{1, 2, 4, 8}, []uint64{1, 1, 1, 1, 0}, math.Inf(+1)},
	{"q NaN", math.NaN(), []float64{1, 2, 4, 8}, []uint64{1, 1, 1, 1, 0}, math.NaN()},
}

func assertSeconds(t *testing.T, want, got float64, msgAndArgs ...any) {
	t.Helper()
	switch {
	case math.IsNaN(want):
		assert.True(t, math.IsNaN(got), "want NaN, got %v", got)
	case math.IsInf(want, 0):
		assert.Equal(t, want, got, msgAndArgs...)
	default:
		assert.InDelta(t, want, got, 1e-12, msgAndArgs...)
	}
}

func TestBucketQuantile(t *testing.T) {
	for _, tc := range quantileCases {
		t.Run(tc.name, func(t *testing.T) {
			assertSeconds(t, tc.want, bucketQuantile(tc.q, tc.bounds, tc.counts))
		})
	}
}

// TestBucketQuantileAgreesWithPromQL evaluates histogram_quantile in
// Prometheus' own engine (promtool's rule unit tests) on every finite case
// above, so that "as PromQL does" is checked against PromQL, not only
// against the hand-worked values.
func TestBucketQuantileAgreesWithPromQL(t *testing.T) {
	promtool := testenv.Promtool(t)
	var series, evals strings.Builder
	for i, tc := range quantileCases {
		got := bucketQuantile(tc.q, tc.bounds, tc.counts)
		if math.IsNaN(got) || math.IsInf(got, 0) || len(tc.counts) != len(tc.bounds)+1 {
			// promtool cannot expect NaN; q outside [0, 1] is not a
			// histogram question.
			continue
		}
		var cum uint64
		for b, n := range tc.counts {
			cum += n
			le := "+Inf"
			if b < len(tc.bounds) {
				le = strconv.FormatFloat(tc.bounds[b], 'g', -1, 64)
			}
			fmt.Fprintf(&series, "      - series: 'h_bucket{case=\"%d\",le=\"%s\"}'\n        values: '%d'\n", i, le, cum)
		}
		fmt.Fprintf(&evals, "      - expr: histogram_quantile(%g, h_bucket{case=\"%d\"})\n        eval_time: 0s\n        exp_samples:\n          - labels: '{case=\"%d\"}'\n            value: %s\n",
			tc.q, i, i, strconv.FormatFloat(got, 'g', -1, 64))
	}
	test := "tests:\n  - interval: 1m\n    input_series:\n" + series.String() + "    promql_expr_test:\n" + evals.String()
	path := filepath.Join(t.TempDir(), "quantiles_test.yaml")
	require.NoError(t, os.WriteFile(path, []byte(test), 0o600))
	out, err := exec.Command(promtool, "test", "rules", path).CombinedOutput()
	require.NoError(t, err, "promtool disagrees:\n%s\ntest file:\n%s", out, test)
}

// rowsText renders rows for comparison: readable diffs, quantiles to the
// nanosecond, and NaN equal to NaN.
func rowsText(tb Table) []string {
	out := make([]string, 0, len(tb.Rows))
	for _, r := range tb.Rows {
		out = append(out, fmt.Sprintf("%s %s count=%d p50=%.9f p90=%.9f p99=%.9f recreations=%d pending=%d",
			r.Label, r.Class, r.Count, r.P50, r.P90, r.P99, r.Recreations, r.Pending))
	}
	return out
}

func TestClassTable(t *testing.T) {
	s := newStore(t)
	creation := sli.FamilyID("sandbox_creation", histogramLabels)
	recreations := sli.FamilyID("sandbox_recreations", histogramLabels)
	n := 0
	apply := func(c store.Change) {
		t.Helper()
		n++
		c.UID = types.UID(fmt.Sprintf("u%d", n))
		require.NoError(t, s.Apply(c))
	}
	observed := func(seconds float64, values ...string) {
		apply(store.Change{
			State:   lifecycle.State{Scheduled: 100, FirstSandboxReady: 100 + int64(seconds), HasSandboxCreation: true},
			Observe: []store.Sample{{Family: creation, Labels: values, Value: seconds}},
		})
	}
	recreated := func(values ...string) {
		apply(store.Change{State: lifecycle.State{FirstSandboxReady: 100}, Add: []store.Sample{{Family: recreations, Labels: values, Value: 1}}})
	}
	pod := func(st lifecycle.State, runtimeClass, storageClass string) {
		apply(store.Change{State: st, Meta: &store.PodMeta{Namespace: "ns", Name: "p", RuntimeClass: runtimeClass, StorageClass: storageClass, HistogramLabels: []string{"a"}}})
	}

	// Two histogram-label values of one class pair add up.
	observed(1, "runc", "none", "a")
	observed(2, "runc", "none", "b")
	observed(3, "runc", "none", "a")
	observed(10, "runc", "fast", "a")
	// A pod with PVCs of two classes is in the row of both names, as on
	// /metrics; 5000s is beyond the last bound, in the +Inf bucket.
	observed(40, "kata", "fast,slow", "a")
	observed(5000, "kata", "fast,slow", "a")
	recreated("runc", "none", "a")
	recreated("runc", "none", "b")
	recreated("kata", "fast,slow", "a")
	// Persisted under another --histogram-label set: not on /metrics, not
	// here either.
	apply(store.Change{Observe: []store.Sample{{Family: sli.FamilyID("sandbox_creation", []string{"tier"}), Labels: []string{"runc", "none", "gold"}, Value: 1}}})
	apply(store.Change{Add: []store.Sample{{Family: sli.FamilyID("sandbox_recreations", []string{"tier"}), Labels: []string{"runc", "none", "gold"}, Value: 1}}})
	// Pending: user errors count, pods being deleted or with a ready
	// sandbox do not. gvisor has nothing but a pending pod: no quantiles.
	pod(lifecycle.State{Scheduled: 100}, "runc", "none")
	pod(lifecycle.State{Scheduled: 100, UserError: true}, "runc", "none")
	pod(lifecycle.State{Scheduled: 100, DeletionRequested: 110}, "runc", "none")
	pod(lifecycle.State{Scheduled: 100, FirstSandboxReady: 101}, "runc", "none")
	pod(lifecycle.State{Scheduled: 100}, "gvisor", "none")

	// Kubelet buckets …, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, …, 3600.
	// runc 1, 2, 3, 10: p50 rank 2 in (1, 2]; p90 rank 3.6 and p99 3.96 in
	// (8, 10], the fourth observation. kata 40, 5000: p50 rank 1 tops
	// (30, 45]; ranks 1.8 and 1.98 only reach the +Inf bucket. none 1, 2, 3:
	// ranks 1.5, 2.7, 2.97. fast 10: ranks 0.5, 0.9, 0.99 in (8, 10].
	assert.Equal(t, []string{
		"runtime_class gvisor count=0 p50=NaN p90=NaN p99=NaN recreations=0 pending=1",
		"runtime_class kata count=2 p50=45.000000000 p90=3600.000000000 p99=3600.000000000 recreations=1 pending=0",
		"runtime_class runc count=4 p50=2.000000000 p90=9.200000000 p99=9.920000000 recreations=2 pending=2",
		"storage_class fast count=1 p50=9.000000000 p90=9.800000000 p99=9.980000000 recreations=0 pending=0",
		"storage_class fast,slow count=2 p50=45.000000000 p90=3600.000000000 p99=3600.000000000 recreations=1 pending=0",
		"storage_class none count=3 p50=1.500000000 p90=2.700000000 p99=2.970000000 recreations=2 pending=3",
	}, rowsText(FromStore(s, histogramLabels)))
}

func TestClassTableOfAnEmptyStore(t *testing.T) {
	tb := FromStore(newStore(t), nil)
	b, err := json.Marshal(tb)
	require.NoError(t, err)
	assert.JSONEq(t, `{"rows": []}`, string(b), "an empty list, not null, for clients that iterate")
}

func TestClassTableJSON(t *testing.T) {
	tb := Table{Rows: []Row{
		{Label: RuntimeClassLabel, Class: "kata", Count: 3, P50: 1.5, P90: 9.8, P99: 3600, Recreations: 1, Pending: 2},
		{Label: StorageClassLabel, Class: "none", P50: math.NaN(), P90: math.NaN(), P99: math.NaN(), Pending: 1},
	}}
	b, err := json.Marshal(tb)
	require.NoError(t, err)
	assert.JSONEq(t, `{"rows": [
		{"label": "runtime_class", "class": "kata", "count": 3, "p50_seconds": 1.5, "p90_seconds": 9.8, "p99_seconds": 3600, "recreations": 1, "pending": 2},
		{"label": "storage_class", "class": "none", "count": 0, "p50_seconds": null, "p90_seconds": null, "p99_seconds": null, "recreations": 0, "pending": 1}
	]}`, string(b))

	var back Table
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, rowsText(tb), rowsText(back), "null reads back as NaN")
}

func TestWriteText(t *testing.T) {
	tb := Table{Rows: []Row{
		{Label: RuntimeClassLabel, Class: "kata", Count: 1234, P50: 1.23, P90: 9.8, P99: 3600, Recreations: 5, Pending: 2},
		{Label: RuntimeClassLabel, Class: "runc", Count: 7, P50: 0.25, P90: 0.4999, P99: 75.4, Pending: 0},
		{Label: StorageClassLabel, Class: "fast,slow", P50: math.NaN(), P90: math.NaN(), P99: math.NaN(), Pending: 1},
	}}
	var buf bytes.Buffer
	require.NoError(t, tb.WriteText(&buf))
	assert.Equal(t, ""+
		"LABEL          CLASS      COUNT  P50    P90    P99    RE-CREATIONS  PENDING\n"+
		"runtime_class  kata       1234   1.2s   9.8s   1h     5             2\n"+
		"runtime_class  runc       7      250ms  500ms  1m15s  0             0\n"+
		"storage_class  fast,slow  0      -      -      -      0             1\n", buf.String())
}

func TestFormatSeconds(t *testing.T) {
	for _, tc := range []struct {
		seconds float64
		want    string
	}{
		{0, "0s"},
		{0.0004, "0s"},
		{0.25, "250ms"},
		{0.9996, "1s"},
		{1.23, "1.2s"},
		{59.94, "59.9s"},
		{75.4, "1m15s"},
		{120, "2m"},
		{3600, "1h"},
		{3661, "1h1m1s"},
		{3660, "1h1m"},
		{7200.4, "2h"},
		{math.NaN(), "-"},
		{math.Inf(1), "-"},
	} {
		t.Run(fmt.Sprint(tc.seconds), func(t *testing.T) {
			assert.Equal(t, tc.want, FormatSeconds(tc.seconds))
		})
	}
}
