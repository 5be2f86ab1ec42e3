package dashboards

import (
	"fmt"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/heatmap"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"

	"github.com/podslo/podslo/alerts"
)

// datasource is the dashboards' Prometheus: the datasource variable, so
// that one import serves every Prometheus or Thanos.
var datasource = dashboard.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}

// Grafana's unit for a multiple of the sustainable burn rate.
const unitBurnRate = "suffix:×"

// query is one PromQL target; refIDs are assigned by the panel helpers.
type query struct {
	expr, legend string
	instant      bool
}

func q(expr, legend string) query       { return query{expr: expr, legend: legend} }
func instant(expr, legend string) query { return query{expr: expr, legend: legend, instant: true} }

func (qy query) build(i int, format prometheus.PromQueryFormat) *prometheus.DataqueryBuilder {
	b := prometheus.NewDataqueryBuilder().Expr(qy.expr).RefId(string(rune('A' + i))).Datasource(datasource).Format(format)
	if qy.legend != "" {
		b.LegendFormat(qy.legend)
	}
	if qy.instant {
		b.Instant()
	} else {
		b.Range()
	}
	return b
}

// panelSize is a panel's width of the 24-column grid and its height.
type panelSize struct{ w, h uint32 }

var (
	third   = panelSize{8, 8}
	half    = panelSize{12, 8}
	quarter = panelSize{6, 6}
	full    = panelSize{24, 9}
)

func timeseriesPanel(title, description, unit string, size panelSize, queries ...query) *timeseries.PanelBuilder {
	p := timeseries.NewPanelBuilder().Title(title).Description(description).Unit(unit).Datasource(datasource).
		Span(size.w).Height(size.h).Min(0).FillOpacity(10).
		Legend(common.NewVizLegendOptionsBuilder().ShowLegend(true).DisplayMode(common.LegendDisplayModeList).Placement(common.LegendPlacementBottom))
	for i, qy := range queries {
		p.WithTarget(qy.build(i, prometheus.PromQueryFormatTimeSeries))
	}
	return p
}

func stacked(p *timeseries.PanelBuilder) *timeseries.PanelBuilder {
	return p.Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal)).FillOpacity(60)
}

// quantiles plots p50, p90 and p99 of a histogram of seconds.
func quantiles(title, description, histogram, filter string, size panelSize) *timeseries.PanelBuilder {
	var qs []query
	for _, p := range []struct{ q, name string }{{"0.5", "p50"}, {"0.9", "p90"}, {"0.99", "p99"}} {
		qs = append(qs, q(fmt.Sprintf("histogram_quantile(%s, sum by (le) (rate(%s_bucket%s[$__rate_interval])))", p.q, histogram, filter), p.name))
	}
	return timeseriesPanel(title, description, "s", size, qs...)
}

// withinThreshold plots, per class, the share of events within an SLO's
// threshold, with the objective as a threshold line.
func withinThreshold(slo *alerts.SLO, filter func(...string) string, size panelSize) *timeseries.PanelBuilder {
	l := slo.Latency
	expr := fmt.Sprintf("sum by (runtime_class, storage_class) (%s)\n/\nsum by (runtime_class, storage_class) (rate(%s_count%s[$__rate_interval]))",
		slo.GoodBuckets("rate", filter, "$__rate_interval"), l.Histogram, filter())
	return timeseriesPanel(fmt.Sprintf("%s within %s", slo.Events, slo.ThresholdText()),
		fmt.Sprintf("Share of %s within %s, the threshold of the %s SLO, per runtime and storage class. The red line is its objective, %s%%.", slo.Events, slo.ThresholdText(), slo.Title, slo.ObjectiveText()),
		"percentunit", size, q(expr, "{{runtime_class}} / {{storage_class}}")).
		Max(1).
		Thresholds(dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps([]dashboard.Threshold{
			{Color: "red"}, {Value: cog.ToPtr(slo.ObjectiveValue()), Color: "transparent"},
		})).
		ThresholdsStyle(common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeDashed))
}

// latencyHeatmap shows a histogram's buckets over time.
func latencyHeatmap(title, description, histogram, filter string, size panelSize) *heatmap.PanelBuilder {
	return heatmap.NewPanelBuilder().Title(title).Description(description).Unit("s").Datasource(datasource).
		Span(size.w).Height(size.h).
		Calculate(false).
		YAxis(heatmap.NewYAxisConfigBuilder().Unit("s")).
		Color(heatmap.NewHeatmapColorOptionsBuilder().Mode(heatmap.HeatmapColorModeScheme).Scheme("Oranges").Scale(heatmap.HeatmapColorScaleExponential).Exponent(0.5).Steps(64)).
		CellGap(1).
		Tooltip(heatmap.NewHeatmapTooltipBuilder().Mode(common.TooltipDisplayModeSingle).YHistogram(true)).
		WithTarget(q(fmt.Sprintf("sum by (le) (increase(%s_bucket%s[$__rate_interval]))", histogram, filter), "{{le}}").
			build(0, prometheus.PromQueryFormatHeatmap))
}

// podTable lists per-pod series, largest value first.
func podTable(title, description, unit, valueName string, size panelSize, qy query) *table.PanelBuilder {
	return table.NewPanelBuilder().Title(title).Description(description).Unit(unit).Datasource(datasource).
		Span(size.w).Height(size.h).
		WithTarget(qy.build(0, prometheus.PromQueryFormatTable)).
		WithTransformation(dashboard.DataTransformerConfig{Id: "organize", Options: map[string]any{
			"excludeByName": map[string]bool{"Time": true, "__name__": true, "job": true, "instance": true, "uid": true},
			"renameByName":  map[string]string{"Value": valueName},
		}}).
		SortBy([]cog.Builder[common.TableSortByFieldState]{common.NewTableSortByFieldStateBuilder().DisplayName(valueName).Desc(true)})
}

// policyTable lists NetworkPolicy condition series, one row per policy
// and condition: their labels say it all, the value is always 1.
func policyTable(title, description string, size panelSize, qy query) *table.PanelBuilder {
	return table.NewPanelBuilder().Title(title).Description(description).Unit("short").Datasource(datasource).
		Span(size.w).Height(size.h).
		WithTarget(qy.build(0, prometheus.PromQueryFormatTable)).
		WithTransformation(dashboard.DataTransformerConfig{Id: "organize", Options: map[string]any{
			"excludeByName": map[string]bool{"Time": true, "__name__": true, "job": true, "instance": true, "Value": true},
			"indexByName":   map[string]int{"namespace": 0, "networkpolicy": 1, "type": 2, "status": 3, "reason": 4},
		}}).
		SortBy([]cog.Builder[common.TableSortByFieldState]{common.NewTableSortByFieldStateBuilder().DisplayName("namespace")})
}

// sloTable is one row per class of an SLO: attainment, remaining budget and
// burn rate, from the recording rules.
func sloTable(spec *alerts.Spec, slo *alerts.SLO, class string, size panelSize) *table.PanelBuilder {
	window := slo.WindowDuration()
	ratio := func(w string) string {
		return fmt.Sprintf(`%s:podslo_%s_errors:ratio_rate%s{%s=~"$cluster", %s=~"$%s"}`, spec.Level(class), slo.Name, w, spec.Config.ClusterLabel, class, class)
	}
	period := modelDuration(window)
	attainment, remaining, burn := period+" attainment", "Error budget left", "Burn rate (1h)"
	p := table.NewPanelBuilder().Title(fmt.Sprintf("%s per %s", slo.Title, class)).
		Description(fmt.Sprintf("Per %s: the share of good %s over the last %s, the share of the %s error budget (%s%%) not yet spent, and how many times faster than sustainable the last hour spent it.",
			class, slo.Events, period, period, slo.ErrorBudgetPercent())).
		Unit("percentunit").Datasource(datasource).Span(size.w).Height(size.h).
		WithTarget(instant("1 - "+ratio(period), "").build(0, prometheus.PromQueryFormatTable)).
		// class!="": the record holds both classes' series, and "All" (.*)
		// also matches the other class's, which lack the label.
		WithTarget(instant(fmt.Sprintf(`max without (slo) (%s{%s, %s=~"$cluster", %s=~"$%s", %s!=""})`, alerts.BudgetRemainingRecord, slo.SLOMatcher(), spec.Config.ClusterLabel, class, class, class), "").
			build(1, prometheus.PromQueryFormatTable)).
		WithTarget(instant(fmt.Sprintf("%s / %s", ratio("1h"), errorBudget(slo)), "").build(2, prometheus.PromQueryFormatTable)).
		WithTransformation(dashboard.DataTransformerConfig{Id: "merge", Options: map[string]any{}}).
		WithTransformation(dashboard.DataTransformerConfig{Id: "organize", Options: map[string]any{
			"excludeByName": map[string]bool{"Time": true},
			"renameByName":  map[string]string{"Value #A": attainment, "Value #B": remaining, "Value #C": burn},
		}}).
		Thresholds(dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps([]dashboard.Threshold{
			{Color: "red"}, {Value: cog.ToPtr(0.0), Color: "orange"}, {Value: cog.ToPtr(0.25), Color: "green"},
		})).
		OverrideByName(attainment, []dashboard.DynamicConfigValue{
			{Id: "thresholds", Value: dashboard.ThresholdsConfig{Mode: dashboard.ThresholdsModeAbsolute, Steps: []dashboard.Threshold{
				{Color: "red"}, {Value: cog.ToPtr(slo.ObjectiveValue()), Color: "green"}}}},
			{Id: "custom.cellOptions", Value: map[string]string{"type": "color-text"}},
		}).
		OverrideByName(remaining, []dashboard.DynamicConfigValue{{Id: "custom.cellOptions", Value: map[string]string{"type": "color-text"}}}).
		OverrideByName(burn, []dashboard.DynamicConfigValue{
			{Id: "unit", Value: unitBurnRate},
			{Id: "thresholds", Value: burnThresholds(slo)},
			{Id: "custom.cellOptions", Value: map[string]string{"type": "color-text"}},
		})
	return p
}

// burnThresholds colour burn rates by the alerts they would raise.
func burnThresholds(slo *alerts.SLO) dashboard.ThresholdsConfig {
	steps := []dashboard.Threshold{{Color: "green"}}
	colors := map[string]string{"warning": "orange", "critical": "red"}
	for i := len(alerts.BurnWindows) - 1; i >= 0; i-- {
		w := alerts.BurnWindows[i]
		// 1x is sustainable: a ticket at 1x over 3d is the budget running
		// out exactly at the end of the window.
		if factor := w.Factor(slo.WindowDuration()); factor > 1 {
			steps = append(steps, dashboard.Threshold{Value: cog.ToPtr(factor), Color: colors[w.Severity]})
		}
	}
	return dashboard.ThresholdsConfig{Mode: dashboard.ThresholdsModeAbsolute, Steps: steps}
}

func objectiveStat(slo *alerts.SLO, size panelSize) *stat.PanelBuilder {
	return stat.NewPanelBuilder().Title("Objective").
		Description(fmt.Sprintf("The %s SLO of alerts/slos.yaml: %s%% of %s %s over %s, per runtime class and per storage class.",
			slo.Title, slo.ObjectiveText(), slo.Events, goodPhrase(slo), modelDuration(slo.WindowDuration()))).
		Unit("percentunit").Decimals(2).Datasource(datasource).Span(size.w).Height(size.h).
		ColorMode(common.BigValueColorModeNone).GraphMode(common.BigValueGraphModeNone).
		ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"})).
		WithTarget(instant(fmt.Sprintf("max(%s{%s})", alerts.ObjectiveRecord, slo.SLOMatcher()), "objective").build(0, prometheus.PromQueryFormatTimeSeries))
}

// errorBudget is an SLO's error budget as recorded by its rules, a scalar
// to divide by: the dashboards read what the rules were given, not a copy.
func errorBudget(slo *alerts.SLO) string {
	return fmt.Sprintf("scalar(max(%s{%s}))", alerts.ErrorBudgetRecord, slo.SLOMatcher())
}

func goodPhrase(slo *alerts.SLO) string {
	if slo.Latency != nil {
		return "within " + slo.ThresholdText()
	}
	return "not " + slo.Success.Failure
}
