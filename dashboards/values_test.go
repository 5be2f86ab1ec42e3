package dashboards

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/podslo/podslo/internal/testenv"
)

// The synthetic cluster the panel values are computed from: per-second
// rates of each bucket (cumulative, as Prometheus stores them), constant
// for the whole test, so that rate() over any window gives them back
// exactly. cluster="prod", job="podslo-exporter" on every series.
//
// Sandbox creation (buckets 1, 2, 5, 10, 20, +Inf; the SLO's 5s is le="5"):
//
//	runc/none       40  80  97 100 100 100
//	runc/standard    0   0   8  10  10  10
//	kata/none        0   0   1   3   4   4
//
// Termination (buckets 1, 5, 30, 60, 120, +Inf; the SLO's 1m is le="60"):
//
//	runc/none       10  30  36  39  40  40
//	kata/none        0   0   2   6   8   8
//
// Readiness (buckets 1, 5, 30, 60, +Inf; the SLO's 30s is le="30"):
//
//	runc/none        2   5   9  10  10
//
// Counters, per minute: re-creations runc/none 3 and kata/none 1;
// creation timeouts runc/none 0 and kata/none 60 (1/s); terminations over
// the grace period runc/none 6 (0.1/s) and kata/none 120 (2/s).
type histogramInput struct {
	name   string
	bounds []string
	// perSecond holds, by "runtime_class/storage_class", the cumulative
	// bucket rates in the order of bounds.
	perSecond map[string][]float64
}

var panelInputs = []histogramInput{
	{"podslo_sandbox_creation_duration_seconds", []string{"1", "2", "5", "10", "20", "+Inf"}, map[string][]float64{
		"runc/none":     {40, 80, 97, 100, 100, 100},
		"runc/standard": {0, 0, 8, 10, 10, 10},
		"kata/none":     {0, 0, 1, 3, 4, 4},
	}},
	{"podslo_termination_duration_seconds", []string{"1", "5", "30", "60", "120", "+Inf"}, map[string][]float64{
		"runc/none": {10, 30, 36, 39, 40, 40},
		"kata/none": {0, 0, 2, 6, 8, 8},
	}},
	{"podslo_readiness_duration_seconds", []string{"1", "5", "30", "60", "+Inf"}, map[string][]float64{
		"runc/none": {2, 5, 9, 10, 10},
	}},
}

// panelCounters are counters by name and "runtime_class/storage_class",
// as increments per minute.
var panelCounters = map[string]map[string]float64{
	"podslo_sandbox_recreations_total":       {"runc/none": 3, "kata/none": 1},
	"podslo_sandbox_creation_timeouts_total": {"runc/none": 0, "kata/none": 60},
	"podslo_terminations_over_grace_total":   {"runc/none": 6, "kata/none": 120},
}

// panelGauges are constant series, as written: the NetworkPolicy
// families, which have no classes. Two policies need 1.8 and one 1.12;
// np/egress is unsupported, np/old has a CIDR problem, np/fine neither.
var panelGauges = []string{
	`podslo_networkpolicies{cluster="prod",job="podslo-exporter",min_version="1.8",supported="true"}`,
	`podslo_networkpolicies{cluster="prod",job="podslo-exporter",min_version="1.8",supported="false"}`,
	`podslo_networkpolicies{cluster="prod",job="podslo-exporter",min_version="1.12",supported="false"}`,
	`podslo_networkpolicy_condition{cluster="prod",job="podslo-exporter",namespace="np",networkpolicy="egress",type="Supported",status="False",reason="Unimplemented"}`,
	`podslo_networkpolicy_condition{cluster="prod",job="podslo-exporter",namespace="np",networkpolicy="egress",type="Problem",status="False",reason="None"}`,
	`podslo_networkpolicy_condition{cluster="prod",job="podslo-exporter",namespace="np",networkpolicy="old",type="Supported",status="True",reason="Implemented"}`,
	`podslo_networkpolicy_condition{cluster="prod",job="podslo-exporter",namespace="np",networkpolicy="old",type="Problem",status="True",reason="AmbiguousCIDR"}`,
	`podslo_networkpolicy_condition{cluster="prod",job="podslo-exporter",namespace="np",networkpolicy="fine",type="Supported",status="True",reason="Implemented"}`,
	`podslo_networkpolicy_condition{cluster="prod",job="podslo-exporter",namespace="np",networkpolicy="fine",type="Problem",status="False",reason="None"}`,
}

// panelCase is one query of one panel, with the dashboard's variables set
// as a user would, and every sample it must return.
type panelCase struct {
	file string
	// row is the start of the title of the row the panel is in; empty
	// when the panel's title is unique in its dashboard.
	row, title, refID string
	// runtimeClass and storageClass are the variables' values; empty is
	// Grafana's "All".
	runtimeClass, storageClass string
	// want maps each sample's labels, as promtool writes them, to its
	// value.
	want map[string]float64
}

const (
	startup     = "podslo-pod-startup.json"
	termination = "podslo-termination-readiness.json"
	overview    = "podslo-slo-overview.json"
)

// panelCases: histogram_quantile interpolates linearly within the bucket
// that holds rank q×count, from its lower bound: lower + width × (rank −
// below) / in-bucket.
var panelCases = []panelCase{
	// NetworkPolicies: the counts as exported, and the bad conditions only.
	{file: overview, title: "NetworkPolicies by minVersion and support", refID: "A",
		want: map[string]float64{`{min_version="1.8", supported="true"}`: 1, `{min_version="1.8", supported="false"}`: 2, `{min_version="1.12", supported="false"}`: 3}},
	{file: overview, title: "Unsupported or problematic NetworkPolicies", refID: "A",
		want: map[string]float64{
			`{cluster="prod", job="podslo-exporter", namespace="np", networkpolicy="egress", reason="Unimplemented", status="False", type="Supported"}`: 1,
			`{cluster="prod", job="podslo-exporter", namespace="np", networkpolicy="old", reason="AmbiguousCIDR", status="True", type="Problem"}`:       1,
		}},
	// Sandbox creation latency per class, through the class variables.
	// runc sums both storage classes: 40 80 105 110 110 110.
	{file: startup, title: "Sandbox creation latency", refID: "A", runtimeClass: "runc",
		want: map[string]float64{"{}": 1 + 1*(55.0-40)/40}}, // rank 55 in (1,2]
	{file: startup, title: "Sandbox creation latency", refID: "C", runtimeClass: "runc",
		want: map[string]float64{"{}": 5 + 5*(0.99*110-105)/5}}, // rank 108.9 in (5,10]
	{file: startup, title: "Sandbox creation latency", refID: "A", runtimeClass: "kata",
		want: map[string]float64{"{}": 5 + 5*(2.0-1)/2}}, // rank 2 in (5,10]
	{file: startup, title: "Sandbox creation latency", refID: "C", runtimeClass: "kata",
		want: map[string]float64{"{}": 10 + 10*(0.99*4-3)/1}}, // rank 3.96 in (10,20]
	{file: startup, title: "Sandbox creation latency", refID: "A", storageClass: "standard",
		want: map[string]float64{"{}": 2 + 3*(5.0-0)/8}}, // rank 5 in (2,5]
	// All classes: 40 80 106 113 114 114.
	{file: startup, title: "Sandbox creation latency", refID: "A",
		want: map[string]float64{"{}": 1 + 1*(57.0-40)/40}}, // rank 57 in (1,2]
	{file: startup, title: "Sandbox creations", refID: "A",
		want: map[string]float64{
			`{runtime_class="runc", storage_class="none"}`:     100,
			`{runtime_class="runc", storage_class="standard"}`: 10,
			`{runtime_class="kata", storage_class="none"}`:     4,
		}},
	{file: startup, title: "sandbox creations within 5s", refID: "A",
		want: map[string]float64{
			`{runtime_class="runc", storage_class="none"}`:     97.0 / 100,
			`{runtime_class="runc", storage_class="standard"}`: 8.0 / 10,
			`{runtime_class="kata", storage_class="none"}`:     1.0 / 4,
		}},
	// Re-creations per minute.
	{file: startup, title: "Sandbox re-creations", refID: "A",
		want: map[string]float64{
			`{runtime_class="runc", storage_class="none"}`: 3,
			`{runtime_class="kata", storage_class="none"}`: 1,
		}},
	{file: startup, title: "Sandbox creation timeouts", refID: "A",
		want: map[string]float64{
			`{runtime_class="runc", storage_class="none"}`: 0,
			`{runtime_class="kata", storage_class="none"}`: 1,
		}},

	// Termination.
	{file: termination, title: "Termination latency", refID: "A", runtimeClass: "runc",
		want: map[string]float64{"{}": 1 + 4*(20.0-10)/20}}, // rank 20 in (1,5]
	{file: termination, title: "Termination latency", refID: "C", runtimeClass: "runc",
		want: map[string]float64{"{}": 60 + 60*(0.99*40-39)/1}}, // rank 39.6 in (60,120]
	{file: termination, title: "Termination latency", refID: "A", runtimeClass: "kata",
		want: map[string]float64{"{}": 30 + 30*(4.0-2)/4}}, // rank 4 in (30,60]
	{file: termination, title: "Termination latency", refID: "C", runtimeClass: "kata",
		want: map[string]float64{"{}": 60 + 60*(0.99*8-6)/2}}, // rank 7.92 in (60,120]
	// All: 10 30 38 45 48 48.
	{file: termination, title: "Termination latency", refID: "A",
		want: map[string]float64{"{}": 1 + 4*(24.0-10)/20}}, // rank 24 in (1,5]
	{file: termination, title: "terminations within 1m", refID: "A",
		want: map[string]float64{
			`{runtime_class="runc", storage_class="none"}`: 39.0 / 40,
			`{runtime_class="kata", storage_class="none"}`: 6.0 / 8,
		}},
	{file: termination, title: "Terminations over the grace period", refID: "A",
		want: map[string]float64{
			`{runtime_class="runc", storage_class="none"}`: 0.1,
			`{runtime_class="kata", storage_class="none"}`: 2,
		}},
	{file: termination, title: "Readiness latency", refID: "A",
		want: map[string]float64{"{}": 1 + 4*(5.0-2)/3}}, // rank 5 in (1,5]

	// SLO overview, from the recording rules of alerts/prometheus_rules.yaml
	// fed the same series: the error ratio is the same over every window.
	// A is the SLI (1 − errors), B the error budget left (1 − errors /
	// allowed), C and the burn-rate panel errors / allowed.
	//
	// Creation latency: errors beyond 5s, runc (110−105)/110, kata
	// (4−1)/4; none (104−98)/104, standard (10−8)/10. Allowed 1%.
	{file: overview, row: "Sandbox creation latency:", title: "Objective", refID: "A",
		want: map[string]float64{"{}": 0.99}},
	{file: overview, row: "Sandbox creation latency:", title: "Sandbox creation latency per runtime_class", refID: "A",
		want: map[string]float64{`{cluster="prod", runtime_class="runc"}`: 1 - 5.0/110, `{cluster="prod", runtime_class="kata"}`: 1 - 3.0/4}},
	{file: overview, row: "Sandbox creation latency:", title: "Sandbox creation latency per runtime_class", refID: "B",
		want: map[string]float64{`{cluster="prod", runtime_class="runc"}`: 1 - 5.0/110/0.01, `{cluster="prod", runtime_class="kata"}`: 1 - 3.0/4/0.01}},
	{file: overview, row: "Sandbox creation latency:", title: "Sandbox creation latency per runtime_class", refID: "C",
		want: map[string]float64{`{cluster="prod", runtime_class="runc"}`: 5.0 / 110 / 0.01, `{cluster="prod", runtime_class="kata"}`: 3.0 / 4 / 0.01}},
	{file: overview, row: "Sandbox creation latency:", title: "Sandbox creation latency per storage_class", refID: "B",
		want: map[string]float64{`{cluster="prod", storage_class="none"}`: 1 - 6.0/104/0.01, `{cluster="prod", storage_class="standard"}`: 1 - 2.0/10/0.01}},
	{file: overview, row: "Sandbox creation latency:", title: "Burn rate over 1h", refID: "A", runtimeClass: "kata",
		want: map[string]float64{`{cluster="prod", runtime_class="kata"}`: 3.0 / 4 / 0.01}},
	{file: overview, row: "Sandbox creation latency:", title: "Burn rate over 1h", refID: "B",
		want: map[string]float64{`{cluster="prod", storage_class="none"}`: 6.0 / 104 / 0.01, `{cluster="prod", storage_class="standard"}`: 2.0 / 10 / 0.01}},
	// Creation success: timeouts / (timeouts + creations); runc 0/110,
	// kata 1/5; none 1/105; standard, creations without a timeout series,
	// 0. Allowed 0.5%.
	{file: overview, row: "Sandbox creation success:", title: "Sandbox creation success per runtime_class", refID: "A",
		want: map[string]float64{`{cluster="prod", runtime_class="runc"}`: 1, `{cluster="prod", runtime_class="kata"}`: 1 - 1.0/5}},
	{file: overview, row: "Sandbox creation success:", title: "Sandbox creation success per runtime_class", refID: "B",
		want: map[string]float64{`{cluster="prod", runtime_class="runc"}`: 1, `{cluster="prod", runtime_class="kata"}`: 1 - 1.0/5/0.005}},
	{file: overview, row: "Sandbox creation success:", title: "Sandbox creation success per storage_class", refID: "C",
		want: map[string]float64{`{cluster="prod", storage_class="none"}`: 1.0 / 105 / 0.005, `{cluster="prod", storage_class="standard"}`: 0}},
	// Termination latency: errors beyond 1m, runc 1/40, kata 2/8; none
	// 3/48.
	{file: overview, row: "Termination latency:", title: "Termination latency per runtime_class", refID: "B",
		want: map[string]float64{`{cluster="prod", runtime_class="runc"}`: 1 - 1.0/40/0.01, `{cluster="prod", runtime_class="kata"}`: 1 - 2.0/8/0.01}},
	{file: overview, row: "Termination latency:", title: "Termination latency per storage_class", refID: "A",
		want: map[string]float64{`{cluster="prod", storage_class="none"}`: 1 - 3.0/48}},
	{file: overview, row: "Termination latency:", title: "Burn rate over 1h", refID: "A",
		want: map[string]float64{`{cluster="prod", runtime_class="runc"}`: 1.0 / 40 / 0.01, `{cluster="prod", runtime_class="kata"}`: 2.0 / 8 / 0.01}},
	// Readiness latency: errors beyond 30s, runc 1/10.
	{file: overview, row: "Readiness latency:", title: "Readiness latency per runtime_class", refID: "B",
		want: map[string]float64{`{cluster="prod", runtime_class="runc"}`: 1 - 1.0/10/0.01}},
	{file: overview, row: "Readiness latency:", title: "Burn rate over 1h", refID: "B",
		want: map[string]float64{`{cluster="prod", storage_class="none"}`: 1.0 / 10 / 0.01}},
}

// The promtool unit-test file, written as JSON, which is YAML.
type promtoolFile struct {
	RuleFiles          []string       `json:"rule_files"`
	EvaluationInterval string         `json:"evaluation_interval"`
	Tests              []promtoolTest `json:"tests"`
}

type promtoolTest struct {
	Name        string           `json:"name"`
	Interval    string           `json:"interval"`
	InputSeries []promtoolSeries `json:"input_series"`
	ExprTests   []promtoolExpr   `json:"promql_expr_test"`
}

type promtoolSeries struct {
	Series string `json:"series"`
	Values string `json:"values"`
}

type promtoolExpr struct {
	Expr       string           `json:"expr"`
	EvalTime   string           `json:"eval_time"`
	ExpSamples []promtoolSample `json:"exp_samples"`
}

type promtoolSample struct {
	Labels string  `json:"labels"`
	Value  float64 `json:"value"`
}

// scale: promtool compares floats exactly, and the panels divide; each
// query is compared as round(query × scale), six decimals.
const scale = 1e6

// TestPanelValues feeds synthetic series to promtool's rule unit tests and
// checks the key panel queries of the generated dashboards for exact
// values: creation quantiles per class, re-creations, terminations, and
// the SLO and error budget panels through the real recording rules.
func TestPanelValues(t *testing.T) {
	promtool := testenv.Promtool(t)
	dashboards := loadDashboards(t)
	rules, err := filepath.Abs(filepath.Join("..", "alerts", "prometheus_rules.yaml"))
	require.NoError(t, err)

	var input []promtoolSeries
	// 150 minutes of samples; the queries run at 2h, with every window up
	// to 1h full (30d windows hold all 2h, which changes no ratio).
	const minutes = 150
	labels := func(class, extra string) string {
		rc, sc, _ := strings.Cut(class, "/")
		return fmt.Sprintf(`cluster="prod",job="podslo-exporter",runtime_class=%q,storage_class=%q%s`, rc, sc, extra)
	}
	for _, h := range panelInputs {
		for class, rates := range h.perSecond {
			for i, le := range h.bounds {
				input = append(input, promtoolSeries{fmt.Sprintf("%s_bucket{%s}", h.name, labels(class, fmt.Sprintf(",le=%q", le))), fmt.Sprintf("0+%gx%d", rates[i]*60, minutes)})
			}
			input = append(input, promtoolSeries{fmt.Sprintf("%s_count{%s}", h.name, labels(class, "")), fmt.Sprintf("0+%gx%d", rates[len(rates)-1]*60, minutes)})
		}
	}
	for name, byClass := range panelCounters {
		for class, perMinute := range byClass {
			input = append(input, promtoolSeries{fmt.Sprintf("%s{%s}", name, labels(class, "")), fmt.Sprintf("0+%gx%d", perMinute, minutes)})
		}
	}
	for i, series := range panelGauges {
		// Distinct values, so that the sums below add up to one answer only.
		v := 1.0
		if strings.HasPrefix(series, "podslo_networkpolicies{") {
			v = float64(i + 1)
		}
		input = append(input, promtoolSeries{series, fmt.Sprintf("%gx%d", v, minutes)})
	}
	slices.SortFunc(input, func(a, b promtoolSeries) int { return strings.Compare(a.Series, b.Series) })

	// One group: each group evaluates every recording rule again.
	test := promtoolTest{Name: "panel values", Interval: "1m", InputSeries: input}
	names := map[string]string{}
	for _, pc := range panelCases {
		expr := fmt.Sprintf("round((%s) * %g)", panelExpr(t, dashboards, pc), scale)
		names[expr] = fmt.Sprintf("%s / %s / %s (row %q, runtime_class=%q, storage_class=%q)", pc.file, pc.title, pc.refID, pc.row, pc.runtimeClass, pc.storageClass)
		var want []promtoolSample
		for l, v := range pc.want {
			want = append(want, promtoolSample{Labels: l, Value: math.Round(v * scale)})
		}
		test.ExprTests = append(test.ExprTests, promtoolExpr{Expr: expr, EvalTime: "2h", ExpSamples: want})
	}
	require.Len(t, names, len(panelCases), "two cases with the same query")
	raw, err := json.MarshalIndent(promtoolFile{RuleFiles: []string{rules}, EvaluationInterval: "10m", Tests: []promtoolTest{test}}, "", "  ")
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "panel_values.yaml")
	require.NoError(t, os.WriteFile(path, raw, 0o644))
	out, err := exec.Command(promtool, "test", "rules", path).CombinedOutput()
	if err != nil {
		// promtool quotes the failing expression.
		for expr, name := range names {
			if strings.Contains(string(out), fmt.Sprintf("expr: %q", expr)) {
				t.Errorf("wrong values: %s", name)
			}
		}
		t.Fatalf("promtool test rules:\n%s", out)
	}
}

// panelExpr finds the one query a case names and sets the dashboard's
// variables in it.
func panelExpr(t *testing.T, dashboards map[string]dashboardJSON, pc panelCase) string {
	t.Helper()
	d, ok := dashboards[pc.file]
	require.True(t, ok, "no dashboard %s", pc.file)
	var found []string
	row := ""
	var walk func([]panelJSON)
	walk = func(ps []panelJSON) {
		for _, p := range ps {
			if p.Type == "row" {
				row = p.Title
				walk(p.Panels)
				continue
			}
			if p.Title != pc.title || !strings.HasPrefix(row, pc.row) {
				continue
			}
			for _, tg := range p.Targets {
				if tg.RefID == pc.refID {
					found = append(found, tg.Expr)
				}
			}
		}
	}
	walk(d.Panels)
	require.Len(t, found, 1, "%s: query %s of panel %q in row %q", pc.file, pc.refID, pc.title, pc.row)
	class := func(v string) string {
		if v == "" {
			return ".*"
		}
		return v
	}
	return strings.NewReplacer(
		"$__rate_interval", "5m",
		"$cluster", ".*",
		"$runtime_class", class(pc.runtimeClass),
		"$storage_class", class(pc.storageClass),
	).Replace(found[0])
}
