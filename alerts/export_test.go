package alerts

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	oslov1 "github.com/OpenSLO/oslo/pkg/manifest/v1"
	"github.com/OpenSLO/oslo/pkg/validate"
	slothmodel "github.com/slok/sloth/pkg/common/model"
	sloth "github.com/slok/sloth/pkg/lib"
	slothv1 "github.com/slok/sloth/pkg/prometheus/api/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// TestExportGolden: the exports of the shipped slos.yaml, as `podslo slo
// export` prints them.
func TestExportGolden(t *testing.T) {
	spec, err := Default()
	require.NoError(t, err)
	for _, format := range ExportFormats {
		t.Run(format, func(t *testing.T) {
			got, err := spec.Export(format, "podslo")
			require.NoError(t, err)
			file := filepath.Join("testdata", "export-"+format+".yaml")
			want, err := os.ReadFile(file)
			require.NoError(t, err)
			if !bytes.Equal(want, got) {
				t.Errorf("%s is stale: run `go run . slo export --format %s > alerts/%s` and review the difference", file, format, file)
			}
		})
	}
}

func TestExportRejects(t *testing.T) {
	spec, err := Default()
	require.NoError(t, err)
	_, err = spec.Export("pyrra", "podslo")
	assert.EqualError(t, err, `format "pyrra": want one of sloth, openslo`)
	_, err = spec.Sloth("pod slo")
	assert.ErrorContains(t, err, `service "pod slo" is not a Sloth name`)
	_, err = spec.OpenSLO("Podslo")
	assert.ErrorContains(t, err, `service "Podslo" is not an OpenSLO name`)

	spec.SLOs[2].Window = "28d"
	_, err = spec.Sloth("podslo")
	assert.EqualError(t, err, "sloth: the SLO period is one for all SLOs of a run (sloth generate --default-slo-period): "+
		"the windows differ: sandbox_creation_latency is 30d, termination_latency is 28d; export the SLOs of each window from a spec of their own")
	out, err := spec.OpenSLO("podslo")
	require.NoError(t, err, "OpenSLO has a window per SLO")
	assert.Contains(t, string(out), "duration: 28d")
}

// decodeSloth decodes a Sloth export strictly into Sloth's own types: a
// field Sloth does not know, which its loader would drop without a word,
// fails here.
func decodeSloth(t *testing.T, raw []byte) slothv1.Spec {
	t.Helper()
	js, err := utilyaml.ToJSON(raw)
	require.NoError(t, err)
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	var spec slothv1.Spec
	require.NoError(t, dec.Decode(&spec))
	return spec
}

// slothRules is the Prometheus rule file Sloth's library generates from
// spec's Sloth export, as `sloth generate --default-slo-period=<the SLOs'
// window>` would. edit, if not nil, changes the specification first.
func slothRules(t *testing.T, spec *Spec, edit func(*slothv1.Spec)) []byte {
	t.Helper()
	raw, err := spec.Sloth("podslo")
	require.NoError(t, err)
	api := decodeSloth(t, raw)
	gen, err := sloth.NewPrometheusSLOGenerator(sloth.PrometheusSLOGeneratorConfig{DefaultSLOPeriod: spec.SLOs[0].WindowDuration(), StrictPlugins: true})
	require.NoError(t, err)
	ctx := context.Background()
	var res *slothmodel.PromSLOGroupResult
	if edit == nil {
		// The way `sloth generate` reads a file.
		res, err = gen.GenerateFromRaw(ctx, raw)
	} else {
		edit(&api)
		res, err = gen.GenerateFromSlothV1(ctx, api)
	}
	require.NoError(t, err)
	var b bytes.Buffer
	require.NoError(t, gen.WriteResultAsPrometheusStd(ctx, *res, &b))
	return b.Bytes()
}

// TestSlothExport: the Sloth export is a specification of Sloth's
// prometheus/v1 types, with nothing they lack, one SLO per SLO and class
// label whose alerts bear podslo's alert's name.
func TestSlothExport(t *testing.T) {
	spec, err := Default()
	require.NoError(t, err)
	raw, err := spec.Sloth("podslo")
	require.NoError(t, err)
	got := decodeSloth(t, raw)
	assert.Equal(t, slothv1.Version, got.Version)
	assert.Equal(t, "podslo", got.Service)
	var want []string
	for _, slo := range spec.SLOs {
		for _, class := range slo.GroupBy {
			want = append(want, fmt.Sprintf("%s_by_%s %v %s", slo.Name, class, slo.Objective, slo.Alert))
		}
	}
	var names []string
	for _, slo := range got.SLOs {
		names = append(names, fmt.Sprintf("%s %v %s", slo.Name, slo.Objective, slo.Alerting.Name))
		assert.Equal(t, "critical", slo.Alerting.PageAlert.Labels["severity"])
		assert.Equal(t, "warning", slo.Alerting.TicketAlert.Labels["severity"])
	}
	assert.Equal(t, "Of the sandbox creations of runtime_class {{ $labels.runtime_class }} in cluster {{ $labels.cluster }}, more than the objective allows were slower than 5s: "+
		"more than 14.4 times its 1% over the last 1h and 5m, or more than 6 times over the last 6h and 30m. The objective is 99% per 30d.",
		got.SLOs[0].Alerting.PageAlert.Annotations["description"])
	assert.Equal(t, "Of the sandbox creations of storage_class {{ $labels.storage_class }} in cluster {{ $labels.cluster }}, more than the objective allows timed out: "+
		"more than 3 times its 0.5% over the last 1d and 2h, or more than 1 times over the last 3d and 6h. The objective is 99.5% per 30d.",
		got.SLOs[3].Alerting.TicketAlert.Annotations["description"])
	assert.Equal(t, want, names)

	// The chart's routing labels and disabled alerts, as podslo's alerts.
	spec.Config.Cluster = "eu-1"
	spec.Config.AlertLabels = map[string]string{"team": "platform"}
	spec.Config.DisabledAlerts = []string{"PodsloTerminationLatencyBudgetBurn"}
	raw, err = spec.Sloth("podslo")
	require.NoError(t, err)
	for _, slo := range decodeSloth(t, raw).SLOs {
		assert.Equal(t, map[string]string{"cluster": "eu-1", "team": "platform"}, slo.Alerting.Labels, slo.Name)
		off := strings.HasPrefix(slo.Name, "termination_latency_")
		assert.Equal(t, off, slo.Alerting.PageAlert.Disable, slo.Name)
		assert.Equal(t, off, slo.Alerting.TicketAlert.Disable, slo.Name)
	}
}

// TestOpenSLOExport: the OpenSLO export passes the OpenSLO project's own
// validation (oslo validate), and decodes into its openslo/v1 types with
// no field left over: a Service and its SLOs, one per SLO and class label.
func TestOpenSLOExport(t *testing.T) {
	spec, err := Default()
	require.NoError(t, err)
	raw, err := spec.OpenSLO("podslo")
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "openslo.yaml")
	require.NoError(t, os.WriteFile(file, raw, 0o644))
	require.NoError(t, validate.Files([]string{file}))

	services, slos := decodeOpenSLO(t, raw)
	require.Len(t, services, 1)
	assert.Equal(t, "podslo", services[0].Metadata.Name)
	var names []string
	for _, slo := range slos {
		names = append(names, slo.Metadata.Name)
		assert.Equal(t, "podslo", slo.Spec.Service)
		assert.Equal(t, "Occurrences", slo.Spec.BudgetingMethod)
		assert.Equal(t, []oslov1.TimeWindow{{Duration: "30d", IsRolling: true}}, slo.Spec.TimeWindow)
		require.Len(t, slo.Spec.Objectives, 1)
		ratio := slo.Spec.Indicator.Spec.RatioMetric
		require.NotNil(t, ratio)
		assert.True(t, ratio.Counter)
		assert.NotEqual(t, ratio.Good == nil, ratio.Bad == nil, "good or bad")
	}
	assert.Equal(t, []string{
		"sandbox-creation-latency-by-runtime-class", "sandbox-creation-latency-by-storage-class",
		"sandbox-creation-success-by-runtime-class", "sandbox-creation-success-by-storage-class",
		"termination-latency-by-runtime-class", "termination-latency-by-storage-class",
		"readiness-latency-by-runtime-class", "readiness-latency-by-storage-class",
		"runc-sandbox-creation-latency-by-runtime-class", "pod-startup-latency-by-runtime-class",
	}, names)
	assert.Equal(t, 0.995, slos[2].Spec.Objectives[0].Target)
}

// decodeOpenSLO decodes the documents of an OpenSLO export strictly into
// the OpenSLO project's types.
func decodeOpenSLO(t *testing.T, raw []byte) (services []oslov1.Service, slos []oslov1.SLO) {
	t.Helper()
	var kinds []string
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	for {
		var head struct {
			APIVersion string `yaml:"apiVersion"`
			Kind       string `yaml:"kind"`
		}
		if err := dec.Decode(&head); err == io.EOF {
			break
		} else {
			require.NoError(t, err)
		}
		require.Equal(t, oslov1.APIVersion, head.APIVersion)
		kinds = append(kinds, head.Kind)
	}
	dec = yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	for _, kind := range kinds {
		switch kind {
		case oslov1.KindService:
			var s oslov1.Service
			require.NoError(t, dec.Decode(&s))
			services = append(services, s)
		case oslov1.KindSLO:
			var s oslov1.SLO
			require.NoError(t, dec.Decode(&s))
			slos = append(slos, s)
		default:
			t.Fatalf("unexpected kind %s", kind)
		}
	}
	return services, slos
}

// TestExportsComputePodslosSLI: Sloth's own library turns the Sloth export
// into its rules, and promtool evaluates them next to podslo's on the same
// series. Over the SLO period, Sloth's error ratio of each cluster and
// class is podslo's, and both are the ratio that the counts give; over
// every window of the burn-rate alerts, Sloth's is podslo's. The OpenSLO
// export's indicator gives that ratio too: its queries are counters, and
// the input's start from 0 within the period, so their values at its end
// are their increases over the period.
func TestExportsComputePodslosSLI(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Spec)
	}{
		{"slos.yaml", func(*Spec) {}},
		// The classes' own thresholds make the good buckets an or of
		// selectors.
		{"kata within 20s", func(s *Spec) {
			s.SLOs[0].Latency.ClassThresholds = map[string]map[string]string{"runtime_class": {"kata": "20s"}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spec, err := Default()
			require.NoError(t, err)
			tc.edit(spec)
			require.NoError(t, spec.Validate())
			const minutes = 60
			input := sliInput(t, spec)
			podslo, _ := Generate(spec, "a test")
			raw, err := spec.OpenSLO("podslo")
			require.NoError(t, err)
			_, openslo := decodeOpenSLO(t, raw)
			slos, err := spec.exported()
			require.NoError(t, err)
			require.Len(t, openslo, len(slos))

			cluster := spec.Config.ClusterLabel
			var checks []promCheck
			for i, e := range slos {
				want := wantRatios(t, spec, e, input, minutes)
				require.NotEmpty(t, want, e.name())
				var own, theirs, same, indicator []promSample
				for _, key := range slices.Sorted(maps.Keys(want)) {
					c, class, _ := strings.Cut(key, "/")
					on := map[string]string{cluster: c, e.class: class}
					own = append(own, promSample{promSeries(spec.ErrorRatio(e.slo, e.class, e.slo.window), on), want[key]})
					labels := maps.Clone(on)
					maps.Copy(labels, map[string]string{
						"slo": e.slo.Name, "sloth_id": "podslo-" + e.name(), "sloth_service": "podslo", "sloth_slo": e.name(), "sloth_window": "30d",
					})
					theirs = append(theirs, promSample{promSeries("slo:sli_error:ratio_rate30d", labels), want[key]})
					same = append(same, promSample{promSeries("", on), 1})
					indicator = append(indicator, promSample{promSeries("", on), want[key]})
				}
				slo := fmt.Sprintf("{sloth_slo=%q}", e.name())
				checks = append(checks,
					promCheck{expr: spec.ErrorRatio(e.slo, e.class, e.slo.window), want: own},
					promCheck{expr: "slo:sli_error:ratio_rate30d" + slo, want: theirs})
				for _, w := range RatioWindows() {
					checks = append(checks, promCheck{
						expr: fmt.Sprintf("slo:sli_error:ratio_rate%s%s == bool on (%s, %s) %s",
							modelDuration(w), slo, cluster, e.class, spec.ErrorRatio(e.slo, e.class, w)),
						want: same,
					})
				}
				ratio := openslo[i].Spec.Indicator.Spec.RatioMetric
				total := ratio.Total.MetricSource.MetricSourceSpec["query"]
				var expr string
				if ratio.Good != nil {
					expr = fmt.Sprintf("(\n(%s)\n-\n(%s)\n)\n/\n(%s)", total, ratio.Good.MetricSource.MetricSourceSpec["query"], total)
				} else {
					expr = fmt.Sprintf("(\n%s\n)\n/\n(%s)", ratio.Bad.MetricSource.MetricSourceSpec["query"], total)
				}
				checks = append(checks, promCheck{expr: expr, want: indicator})
			}
			promtoolTest(t, map[string][]byte{"podslo.yaml": podslo, "sloth.yaml": slothRules(t, spec, nil)}, input, minutes, checks)
		})
	}
}

// TestSlothPeriodRatioUnoptimized: why the Sloth export turns off the
// optimization of Sloth's SLI plugin. A class fast and busy for an hour,
// slow and quiet for the next, then idle: of its 6060 sandbox creations
// 60 were slow, a period error ratio of 60/6060 in podslo's rules and in
// Sloth's from the export. Sloth's optimized ratio, the average of the 5m
// ratios, is about a half after the second hour, and NaN once a 5m
// window without events enters the average.
func TestSlothPeriodRatioUnoptimized(t *testing.T) {
	spec, err := Default()
	require.NoError(t, err)
	spec.SLOs = spec.SLOs[:1]
	spec.SLOs[0].GroupBy = []string{"runtime_class"}
	require.NoError(t, spec.Validate())
	labels := map[string]string{"cluster": "prod", "job": "podslo-exporter", "runtime_class": "runc", "storage_class": "none"}
	bucket := maps.Clone(labels)
	bucket["le"] = "5"
	input := []counter{
		{metric: "podslo_sandbox_creation_duration_seconds_count", labels: labels, values: "0+100x60 6001+1x59 6060x10"},
		{metric: "podslo_sandbox_creation_duration_seconds_bucket", labels: bucket, values: "0+100x60 6000x70"},
	}
	on := map[string]string{"cluster": "prod", "runtime_class": "runc"}
	exported := maps.Clone(on)
	maps.Copy(exported, map[string]string{
		"slo": "sandbox_creation_latency", "sloth_id": "podslo-sandbox_creation_latency_by_runtime_class",
		"sloth_service": "podslo", "sloth_slo": "sandbox_creation_latency_by_runtime_class", "sloth_window": "30d",
	})
	const ratio = 60.0 / 6060
	var checks []promCheck
	for _, at := range []int{120, 130} {
		checks = append(checks,
			promCheck{expr: "cluster_runtime_class:podslo_sandbox_creation_latency_errors:ratio_rate30d", at: at,
				want: []promSample{{promSeries("cluster_runtime_class:podslo_sandbox_creation_latency_errors:ratio_rate30d", on), ratio}}},
			promCheck{expr: `slo:sli_error:ratio_rate30d{sloth_service="podslo"}`, at: at,
				want: []promSample{{promSeries("slo:sli_error:ratio_rate30d", exported), ratio}}})
	}
	optimized := `slo:sli_error:ratio_rate30d{sloth_service="optimized"}`
	checks = append(checks,
		promCheck{expr: "max(" + optimized + ") > bool 0.4", at: 120, want: []promSample{{"{}", 1}}},
		promCheck{expr: "count(" + optimized + " != " + optimized + ")", at: 130, want: []promSample{{"{}", 1}}})
	podslo, _ := Generate(spec, "a test")
	promtoolTest(t, map[string][]byte{
		"podslo.yaml": podslo,
		"sloth.yaml":  slothRules(t, spec, nil),
		"optimized.yaml": slothRules(t, spec, func(s *slothv1.Spec) {
			s.Service = "optimized"
			s.SLOPlugins = slothv1.SLOPlugins{}
		}),
	}, input, 130, checks)
}

// counter is an input series of the tests: a counter that rises by inc a
// minute from 0.
type counter struct {
	metric string
	labels map[string]string
	inc    int
	// values, if set, are the series' values in promtool's notation
	// instead.
	values string
}

func (c counter) series() string { return promSeries(c.metric, c.labels) }

// promSeries writes a series as PromQL does, its labels sorted.
func promSeries(metric string, labels map[string]string) string {
	var ls []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		ls = append(ls, fmt.Sprintf("%s=%q", k, labels[k]))
	}
	return metric + "{" + strings.Join(ls, ",") + "}"
}

// sliInput is what the exporter would expose for pods of four kinds in two
// clusters, and of a fifth whose sandboxes all time out: every histogram
// the SLOs of spec read, with a bucket at each of their thresholds, the
// classes' own included, and the timeouts. Each kind of pod has its own
// rates and share of slow events, so that the classes' ratios differ.
func sliInput(t *testing.T, spec *Spec) []counter {
	t.Helper()
	require.Equal(t, `job="podslo-exporter"`, spec.Config.ExporterSelector, "the input carries the default job label")
	cluster := spec.Config.ClusterLabel
	kinds := []map[string]string{
		{cluster: "prod", "runtime_class": "runc", "storage_class": "none", "stateful": "false"},
		{cluster: "prod", "runtime_class": "kata", "storage_class": "ebs", "stateful": "true"},
		{cluster: "prod", "runtime_class": "none", "storage_class": "none", "stateful": "false"},
		{cluster: "staging", "runtime_class": "runc", "storage_class": "ebs", "stateful": "false"},
	}
	bounds := map[string][]float64{}
	var timeouts string
	for _, slo := range spec.SLOs {
		if l := slo.Latency; l != nil {
			bounds[l.Histogram] = append(bounds[l.Histogram], l.threshold.Seconds())
			for _, c := range l.classThresholds {
				bounds[l.Histogram] = append(bounds[l.Histogram], c.seconds)
			}
		} else {
			require.Equal(t, "podslo_sandbox_creation_duration_seconds_count", slo.Success.Successes, "the successes are a histogram's count")
			timeouts = slo.Success.Failures
		}
	}
	var in []counter
	with := func(labels map[string]string, more ...string) map[string]string {
		l := maps.Clone(labels)
		l["job"] = "podslo-exporter"
		for i := 0; i < len(more); i += 2 {
			l[more[i]] = more[i+1]
		}
		return l
	}
	for _, h := range slices.Sorted(maps.Keys(bounds)) {
		for i, kind := range kinds {
			count := 10 + 7*i
			in = append(in, counter{metric: h + "_count", labels: with(kind), inc: count})
			for _, b := range slices.Compact(slices.Sorted(slices.Values(bounds[h]))) {
				// Fewer slow events the higher the bound; many of
				// kata's.
				slow := min(count, count*[]int{1, 8, 2, 3}[i]/(slices.Index(Buckets, b)+1))
				in = append(in, counter{metric: h + "_bucket", labels: with(kind, "le", formatFloat(b)), inc: count - slow})
			}
		}
	}
	// kata times out now and then; gvisor always, and has no histograms.
	in = append(in,
		counter{metric: timeouts, labels: with(kinds[1]), inc: 1},
		counter{metric: timeouts, labels: with(map[string]string{cluster: "prod", "runtime_class": "gvisor", "storage_class": "none", "stateful": "false"}), inc: 2})
	return in
}

// wantRatios is an exported SLO's error ratio per cluster and class
// (keyed cluster/class) over the first minutes of input, computed in Go
// from the counts: bad over all events, of the series its matchers
// select, each held to its class's threshold.
func wantRatios(t *testing.T, spec *Spec, e exported, input []counter, minutes int) map[string]float64 {
	t.Helper()
	matchers, err := e.slo.ParsedMatchers()
	require.NoError(t, err)
	total, bad := map[string]float64{}, map[string]float64{}
	for _, c := range input {
		if !slices.ContainsFunc(matchers, func(m Matcher) bool { return !m.Matches(c.labels) }) {
			key := c.labels[spec.Config.ClusterLabel] + "/" + c.labels[e.class]
			n := float64(c.inc * minutes)
			switch l, s := e.slo.Latency, e.slo.Success; {
			case l != nil && c.metric == l.Histogram+"_count":
				total[key] += n
				bad[key] += n
			case l != nil && c.metric == l.Histogram+"_bucket" && c.labels["le"] == formatFloat(e.slo.ThresholdFor(c.labels)):
				bad[key] -= n
			case s != nil && c.metric == s.Successes:
				total[key] += n
			case s != nil && c.metric == s.Failures:
				total[key] += n
				bad[key] += n
			}
		}
	}
	want := map[string]float64{}
	for key, n := range total {
		want[key] = bad[key] / n
	}
	return want
}

// promtoolTest writes a promtool rule test of the input over minutes and the
// checks, all evaluated at its end, and runs it.
func promtoolTest(t *testing.T, ruleFiles map[string][]byte, input []counter, minutes int, checks []promCheck) {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("rule_files:\n")
	for _, name := range slices.Sorted(maps.Keys(ruleFiles)) {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), ruleFiles[name], 0o644))
		fmt.Fprintf(&b, "  - %s\n", name)
	}
	fmt.Fprintf(&b, "evaluation_interval: 1m\ntests:\n  - interval: 1m\n    input_series:\n")
	for _, c := range input {
		values := cmp.Or(c.values, fmt.Sprintf("0+%dx%d", c.inc, minutes))
		fmt.Fprintf(&b, "      - series: %s\n        values: %s\n", strconv.Quote(c.series()), values)
	}
	b.WriteString("    promql_expr_test:\n")
	for _, c := range checks {
		fmt.Fprintf(&b, "      - expr: %s\n        eval_time: %dm\n        exp_samples:\n", strconv.Quote(c.expr), cmp.Or(c.at, minutes))
		for _, s := range c.want {
			fmt.Fprintf(&b, "          - labels: %s\n            value: %s\n", strconv.Quote(s.labels), strconv.FormatFloat(s.value, 'g', -1, 64))
		}
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, "test.yaml"), []byte(b.String()), 0o644))
	runPromtool(t, "test", "rules", filepath.Join(dir, "test.yaml"))
}

// promCheck is a promql_expr_test: expr's samples at minute at (0: the
// input's end) must be want.
type promCheck struct {
	expr string
	at   int
	want []promSample
}

type promSample struct {
	labels string
	value  float64
}
