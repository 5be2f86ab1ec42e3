package dashboards

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/prometheus/common/model"

	"github.com/podslo/podslo/alerts"
)

// The UIDs are stable: the alerts' dashboard_url annotations and people's
// bookmarks point at them.
const (
	SLOOverviewUID          = "podslo-slo-overview"
	PodStartupUID           = "podslo-pod-startup"
	TerminationReadinessUID = "podslo-termination-readiness"
	AgentUID                = "podslo-agent"
)

// Generate renders every dashboard as classic dashboard JSON, by file name.
func Generate(spec *alerts.Spec) (map[string][]byte, error) {
	g := &generator{spec: spec}
	out := map[string][]byte{}
	for _, b := range []*dashboard.DashboardBuilder{g.sloOverview(), g.podStartup(), g.terminationReadiness(), g.agent()} {
		d, err := b.Build()
		if err != nil {
			return nil, err
		}
		numberPanels(d.Panels)
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetIndent("", "  ")
		// PromQL's <, > and & stay readable.
		enc.SetEscapeHTML(false)
		if err := enc.Encode(d); err != nil {
			return nil, err
		}
		out[*d.Uid+".json"] = buf.Bytes()
	}
	return out, nil
}

// numberPanels gives every panel a stable id: Grafana otherwise assigns
// them on import, and links to a single panel (viewPanel=) break.
func numberPanels(panels []dashboard.PanelOrRowPanel) {
	id := uint32(1)
	for _, p := range panels {
		switch {
		case p.Panel != nil:
			p.Panel.Id = cog.ToPtr(id)
		case p.RowPanel != nil:
			p.RowPanel.Id = id
		}
		id++
	}
}

type generator struct{ spec *alerts.Spec }

func (g *generator) newDashboard(uid, title, description string) *dashboard.DashboardBuilder {
	cluster := g.spec.Config.ClusterLabel
	exporter := g.spec.Selector()
	return dashboard.NewDashboardBuilder(title).
		Uid(uid).
		Description(description).
		Tags([]string{"podslo"}).
		Readonly().
		Time("now-6h", "now").
		Timezone(common.TimeZoneUtc).
		Refresh("1m").
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Link(dashboard.NewDashboardLinkBuilder("podslo").Type(dashboard.DashboardLinkTypeDashboards).
			Tags([]string{"podslo"}).AsDropdown(true).IncludeVars(true).KeepTime(true)).
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Data source").Type("prometheus")).
		WithVariable(labelVariable("cluster", fmt.Sprintf("label_values(podslo_build_info%s, %s)", exporter, cluster))).
		WithVariable(labelVariable("runtime_class", fmt.Sprintf(`label_values(podslo_sandbox_creation_duration_seconds_count%s, runtime_class)`,
			g.spec.Selector(cluster+`=~"$cluster"`)))).
		WithVariable(labelVariable("storage_class", fmt.Sprintf(`label_values(podslo_sandbox_creation_duration_seconds_count%s, storage_class)`,
			g.spec.Selector(cluster+`=~"$cluster"`, `runtime_class=~"$runtime_class"`))))
}

// labelVariable lists a label's values; All matches every value, also
// values that appear after the dashboard loaded.
func labelVariable(name, query string) *dashboard.QueryVariableBuilder {
	return dashboard.NewQueryVariableBuilder(name).Label(name).Datasource(datasource).
		Query(dashboard.StringOrMap{String: cog.ToPtr(query)}).Definition(query).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).Sort(dashboard.VariableSortAlphabeticalAsc).
		Multi(true).IncludeAll(true).AllValue(".*").
		Current(dashboard.VariableOption{Text: dashboard.StringOrArrayOfString{String: cog.ToPtr("All")}, Value: dashboard.StringOrArrayOfString{String: cog.ToPtr("$__all")}})
}

// filter selects the exporter's series of the chosen cluster and classes.
func (g *generator) filter(matchers ...string) string {
	return g.spec.Selector(append([]string{
		g.spec.Config.ClusterLabel + `=~"$cluster"`, `runtime_class=~"$runtime_class"`, `storage_class=~"$storage_class"`,
	}, matchers...)...)
}

func (g *generator) slo(name string) *alerts.SLO {
	for i := range g.spec.SLOs {
		if g.spec.SLOs[i].Name == name {
			return &g.spec.SLOs[i]
		}
	}
	return nil
}

func (g *generator) sloOverview() *dashboard.DashboardBuilder {
	d := g.newDashboard(SLOOverviewUID, "podslo / SLO overview",
		"Objectives of alerts/slos.yaml per runtime class and per storage class: attainment, error budget and burn rate, from the recording rules.")
	cluster := g.spec.Config.ClusterLabel
	for i := range g.spec.SLOs {
		slo := &g.spec.SLOs[i]
		d.WithRow(dashboard.NewRowBuilder(fmt.Sprintf("%s: %s%% %s over %s", slo.Title, slo.ObjectiveText(), goodPhrase(slo), modelDuration(slo.WindowDuration())))).
			WithPanel(objectiveStat(slo, panelSize{4, 8}))
		var burns []query
		for _, class := range slo.GroupBy {
			d.WithPanel(sloTable(g.spec, slo, class, panelSize{20 / uint32(len(slo.GroupBy)), 8}))
			burns = append(burns, q(fmt.Sprintf(`%s:podslo_%s_errors:ratio_rate1h{%s=~"$cluster", %s=~"$%s"} / %s`,
				g.spec.Level(class), slo.Name, cluster, class, class, errorBudget(slo)),
				fmt.Sprintf("%s={{%s}}", class, class)))
		}
		d.WithPanel(timeseriesPanel("Burn rate over 1h",
			fmt.Sprintf("How many times faster than sustainable each class spent its %s error budget over the last hour. 1× spends it exactly in %s; the alerts page at %s× over 1h and %s× over 6h.",
				slo.Title, modelDuration(slo.WindowDuration()), formatFloat(alerts.BurnWindows[0].Factor(slo.WindowDuration())), formatFloat(alerts.BurnWindows[1].Factor(slo.WindowDuration()))),
			unitBurnRate, panelSize{24, 7}, burns...).
			Thresholds(dashboard.NewThresholdsConfigBuilder().Mode(dashboard.ThresholdsModeAbsolute).Steps(burnThresholds(slo).Steps)).
			ThresholdsStyle(common.NewGraphThresholdsStyleConfigBuilder().Mode(common.GraphThresholdsStyleModeDashed)))
	}
	self := g.spec.Selector(cluster + `=~"$cluster"`)
	return d.WithRow(dashboard.NewRowBuilder("Exporter")).
		WithPanel(timeseriesPanel("Store errors", "Failed state store operations per second, by operation. A failed apply is retried; while it fails, new observations are not shown.", "ops", quarter,
			q(fmt.Sprintf(`sum by (%s, operation) (rate(podslo_store_operations_total%s[$__rate_interval]))`, cluster, g.spec.Selector(cluster+`=~"$cluster"`, `result="error"`)), "{{operation}}"))).
		WithPanel(timeseriesPanel("Tracked pods", "Pods whose state the exporter's store holds.", "short", quarter,
			q(fmt.Sprintf(`sum by (%s) (podslo_store_tracked_pods%s)`, cluster, self), "{{"+cluster+"}}"))).
		WithPanel(timeseriesPanel("Skipped observations", "Observations not made, per second, by SLI and reason: too old when first seen, clock skew, or a malformed condition.", "ops", quarter,
			q(fmt.Sprintf(`sum by (sli, reason) (rate(podslo_observations_skipped_total%s[$__rate_interval]))`, self), "{{sli}}: {{reason}}"))).
		WithPanel(timeseriesPanel("Observations by precision", "Observations made per second, by SLI and precision: millisecond when both ends were timed by the exporter's watch while it was current, second when either end is a one-second condition time (an outage, a relist, an exporter restart). A sub-second objective needs the first.", "ops", quarter,
			q(fmt.Sprintf(`sum by (sli, precision) (rate(podslo_observations_total%s[$__rate_interval]))`, self), "{{sli}}: {{precision}}"))).
		WithPanel(timeseriesPanel("Excluded sandbox creations", "Creations and timeouts left out of the SLIs because the pod's own spec was at fault (a missing Secret or ConfigMap), per second.", "ops", quarter,
			q(fmt.Sprintf(`sum by (runtime_class, storage_class) (rate(podslo_sandbox_creations_excluded_total%s[$__rate_interval]))`, g.filter()), "{{runtime_class}} / {{storage_class}}"))).
		WithRow(dashboard.NewRowBuilder("NetworkPolicies (KEP-2136)")).
		WithPanel(stacked(timeseriesPanel("NetworkPolicies by minVersion and support",
			"NetworkPolicies by the newest NetworkPolicy version they need (minVersion) and by whether the network plugin supports them, as judged against --network-plugin-profile: unknown without one (docs/networkpolicy.md).", "short", half,
			q(fmt.Sprintf(`sum by (min_version, supported) (podslo_networkpolicies%s)`, self), "{{min_version}} supported={{supported}}")))).
		WithPanel(policyTable("Unsupported or problematic NetworkPolicies",
			"Policies the network plugin does not support (Supported=False: it may misread the policy, or enforce only part of it) or with a CIDR problem (Problem=True), with the condition's reason. The alerts PodsloNetworkPolicyUnsupported and PodsloNetworkPolicyProblem fire on them.", half,
			instant(fmt.Sprintf(`podslo_networkpolicy_condition%s == 1 or podslo_networkpolicy_condition%s == 1`,
				g.spec.Selector(cluster+`=~"$cluster"`, `type="Supported"`, `status="False"`), g.spec.Selector(cluster+`=~"$cluster"`, `type="Problem"`, `status="True"`)), "")))
}

func (g *generator) podStartup() *dashboard.DashboardBuilder {
	f := g.filter()
	latency := g.slo("sandbox_creation_latency")
	h := latency.Latency.Histogram
	startup := g.slo("pod_startup_latency")
	return g.newDashboard(PodStartupUID, "podslo / Pod start-up",
		"Sandbox creation (KEP-3085) and the start-up phases of pods, per runtime class and storage class.").
		WithRow(dashboard.NewRowBuilder("Sandbox creation")).
		WithPanel(timeseriesPanel("Sandbox creations", "First sandboxes that became ready, per second.", "ops", third,
			q(fmt.Sprintf("sum by (runtime_class, storage_class) (rate(%s_count%s[$__rate_interval]))", h, f), "{{runtime_class}} / {{storage_class}}"))).
		WithPanel(quantiles("Sandbox creation latency", "From PodScheduled to the first PodReadyToStartContainers=True, over the selected classes. Quantiles are interpolated within the histogram's buckets.", h, f, third)).
		WithPanel(withinThreshold(latency, g.filter, third)).
		WithPanel(latencyHeatmap("Sandbox creation latency distribution", "Sandbox creations per latency bucket and interval, over the selected classes.", h, f, half)).
		WithPanel(timeseriesPanel("Sandbox creation timeouts",
			"Pods whose sandbox was not ready within the exporter's creation timeout (--sandbox-creation-timeout), per second. Pods blamed on their own spec are excluded.", "ops", half,
			q(fmt.Sprintf("sum by (runtime_class, storage_class) (rate(podslo_sandbox_creation_timeouts_total%s[$__rate_interval]))", f), "{{runtime_class}} / {{storage_class}}"))).
		WithRow(dashboard.NewRowBuilder("Start-up phases")).
		WithPanel(stacked(timeseriesPanel("Start-up phases (mean)", "Mean duration of each start-up phase, stacked: scheduling, sandbox, init containers, containers, readiness. A phase only counts the pods that have it (init: pods with init containers).", "s", half,
			q(fmt.Sprintf("sum by (phase) (rate(podslo_startup_phase_duration_seconds_sum%s[$__rate_interval]))\n/\nsum by (phase) (rate(podslo_startup_phase_duration_seconds_count%s[$__rate_interval]))",
				g.filter(`phase!="total"`), g.filter(`phase!="total"`)), "{{phase}}")))).
		WithPanel(timeseriesPanel("Start-up phases (p90)", "90th percentile of each start-up phase, and of the whole start-up (total).", "s", half,
			q(fmt.Sprintf("histogram_quantile(0.9, sum by (phase, le) (rate(podslo_startup_phase_duration_seconds_bucket%s[$__rate_interval])))", f), "{{phase}}"))).
		WithRow(dashboard.NewRowBuilder("Pod start-up SLI (sig-scalability)")).
		WithPanel(timeseriesPanel("Pod start-ups", "Pods whose start-up SLI was measured, per second; stateful=true: pods with a volume other than Secret, ConfigMap, downward API, EmptyDir or projected (a PVC, hostPath, NFS...), which the upstream SLO leaves out.", "ops", third,
			q(fmt.Sprintf("sum by (runtime_class, stateful) (rate(%s_count%s[$__rate_interval]))", startup.Latency.Histogram, f), "{{runtime_class}} stateful={{stateful}}"))).
		WithPanel(quantiles("Pod start-up latency (stateless)", "Creation to every container running and seen by the watch, minus image pulls and the init phase (kubelet_pod_start_sli_duration_seconds, cluster-wide), over the selected classes' stateless pods.", startup.Latency.Histogram, g.filter(startup.Matchers...), third)).
		WithPanel(withinThreshold(startup, func(m ...string) string { return g.filter(append(m, startup.Matchers...)...) }, third)).
		WithRow(dashboard.NewRowBuilder("Image pulls")).
		WithPanel(timeseriesPanel("Image pulls (mean per pod)", "Mean of each pod's image pulls (the sum over its containers, from the kubelet's Pulled events), by cache: hit when every image was already on the node.", "s", third,
			q("sum by (cache) (rate(podslo_image_pull_duration_seconds_sum"+f+"[$__rate_interval]))\n/\nsum by (cache) (rate(podslo_image_pull_duration_seconds_count"+f+"[$__rate_interval]))", "{{cache}}"))).
		WithPanel(quantiles("Image pull latency (pulled)", "Each pod's image pulls, for pods with at least one image pulled (cache=miss).", "podslo_image_pull_duration_seconds", g.filter(`cache="miss"`), third)).
		WithPanel(timeseriesPanel("Pods with a failed pull", "Pods with a failed image pull (ErrImagePull) during their start-up, per minute: a missing image or tag, a refused pull secret, or the registry.", "opm", third,
			q(fmt.Sprintf("60 * sum by (runtime_class, storage_class) (rate(podslo_image_pulls_failed_total%s[$__rate_interval]))", f), "{{runtime_class}} / {{storage_class}}"))).
		WithRow(dashboard.NewRowBuilder("Re-creations")).
		WithPanel(timeseriesPanel("Sandbox re-creations", "Sandboxes that became ready again after the first one was lost (a node or VM crash, KEP-3085 story 4), per minute.", "opm", half,
			q(fmt.Sprintf("60 * sum by (runtime_class, storage_class) (rate(podslo_sandbox_recreations_total%s[$__rate_interval]))", f), "{{runtime_class}} / {{storage_class}}"))).
		WithPanel(podTable("Pods with the most re-creations", "Existing pods whose sandbox was re-created, most re-creations first.", "short", "re-creations", half,
			instant(fmt.Sprintf("topk(20, podslo_pod_sandbox_recreations_total%s > 0)", f), ""))).
		WithRow(dashboard.NewRowBuilder("Pending and stuck")).
		WithPanel(timeseriesPanel("Pods waiting for a sandbox", "Scheduled pods whose first sandbox is not ready yet; user_error=true when the exporter blamed the pod's own spec, timed_out=true past the exporter's --sandbox-creation-timeout (stuck).", "short", half,
			q(fmt.Sprintf("sum by (runtime_class, storage_class, user_error, timed_out) (podslo_sandbox_creation_pending_pods%s)", f), "{{runtime_class}} / {{storage_class}} user_error={{user_error}} timed_out={{timed_out}}"))).
		WithPanel(podTable("Longest-waiting pods", "The pods waiting longest for their first sandbox, from the per-pod series: past the exporter's --sandbox-creation-timeout they are stuck.", "s", "waiting", half,
			instant(fmt.Sprintf("topk(20, podslo_pod_sandbox_pending_seconds%s)", f), ""))).
		WithRow(dashboard.NewRowBuilder("Slowest pods")).
		WithPanel(podTable("Slowest sandbox creations", "The existing pods with the slowest first sandbox, from the per-pod series.", "s", "sandbox creation", full,
			instant(fmt.Sprintf("topk(20, podslo_pod_sandbox_creation_seconds%s)", f), "")))
}

func (g *generator) terminationReadiness() *dashboard.DashboardBuilder {
	f := g.filter()
	termination, readiness := g.slo("termination_latency"), g.slo("readiness_latency")
	th, rh := termination.Latency.Histogram, readiness.Latency.Histogram
	return g.newDashboard(TerminationReadinessUID, "podslo / Termination and readiness",
		"Termination (KEP-3085 story 5) and readiness latencies, per runtime class and storage class.").
		WithRow(dashboard.NewRowBuilder("Termination")).
		WithPanel(timeseriesPanel("Terminations", "Pod terminations measured, per second: from the deletion request to the sandbox going down.", "ops", third,
			q(fmt.Sprintf("sum by (runtime_class, storage_class) (rate(%s_count%s[$__rate_interval]))", th, f), "{{runtime_class}} / {{storage_class}}"))).
		WithPanel(quantiles("Termination latency", "From the deletion request to the sandbox going down, over the selected classes.", th, f, third)).
		WithPanel(withinThreshold(termination, g.filter, third)).
		WithPanel(latencyHeatmap("Termination latency distribution", "Terminations per latency bucket and interval, over the selected classes.", th, f, half)).
		WithPanel(timeseriesPanel("Terminations over the grace period", "Terminations that took longer than the pod's grace period, per second: the kubelet or runtime did not stop the pod in time.", "ops", half,
			q(fmt.Sprintf("sum by (runtime_class, storage_class) (rate(podslo_terminations_over_grace_total%s[$__rate_interval]))", f), "{{runtime_class}} / {{storage_class}}"))).
		WithPanel(podTable("Slowest terminations", "The pods with the slowest termination, from the per-pod series (while the pods still exist).", "s", "termination", full,
			instant(fmt.Sprintf("topk(20, podslo_pod_termination_seconds%s)", f), ""))).
		WithRow(dashboard.NewRowBuilder("Readiness")).
		WithPanel(timeseriesPanel("Pods becoming ready", "First Ready of pods, per second.", "ops", third,
			q(fmt.Sprintf("sum by (runtime_class, storage_class) (rate(%s_count%s[$__rate_interval]))", rh, f), "{{runtime_class}} / {{storage_class}}"))).
		WithPanel(quantiles("Readiness latency", "From the newest container start to the first Ready: the time readiness probes add.", rh, f, third)).
		WithPanel(withinThreshold(readiness, g.filter, third)).
		WithPanel(latencyHeatmap("Readiness latency distribution", "Pods becoming ready per latency bucket and interval, over the selected classes.", rh, f, half)).
		WithPanel(podTable("Slowest readiness", "The existing pods that took longest from container start to Ready, from the per-pod series.", "s", "readiness", half,
			instant(fmt.Sprintf("topk(20, podslo_pod_readiness_seconds%s)", f), "")))
}

func (g *generator) agent() *dashboard.DashboardBuilder {
	agent := g.spec.AgentSelector(g.spec.Config.ClusterLabel + `=~"$cluster"`)
	f := g.filter()
	return g.newDashboard(AgentUID, "podslo / Agent",
		"The podslo agent's probes and condition writes, and the pod stabilization the exporter derives from them.").
		WithRow(dashboard.NewRowBuilder("Probes")).
		WithPanel(timeseriesPanel("Probes", "Probes run by the agents, per second, by result.", "ops", half,
			q(fmt.Sprintf("sum by (result) (rate(podslo_agent_probe_total%s[$__rate_interval]))", agent), "{{result}}"))).
		WithPanel(timeseriesPanel("Probe latency", "50th and 99th percentile of a probe's duration, by probe type.", "s", half,
			q(fmt.Sprintf("histogram_quantile(0.5, sum by (probe_type, le) (rate(podslo_agent_probe_duration_seconds_bucket%s[$__rate_interval])))", agent), "p50 {{probe_type}}"),
			q(fmt.Sprintf("histogram_quantile(0.99, sum by (probe_type, le) (rate(podslo_agent_probe_duration_seconds_bucket%s[$__rate_interval])))", agent), "p99 {{probe_type}}"))).
		WithPanel(timeseriesPanel("Probe to condition latency", "From a probe's result to the pod condition that reports it, 50th and 99th percentile.", "s", half,
			q(fmt.Sprintf("histogram_quantile(0.5, sum by (le) (rate(podslo_agent_probe_to_condition_seconds_bucket%s[$__rate_interval])))", agent), "p50"),
			q(fmt.Sprintf("histogram_quantile(0.99, sum by (le) (rate(podslo_agent_probe_to_condition_seconds_bucket%s[$__rate_interval])))", agent), "p99"))).
		WithPanel(timeseriesPanel("Probe workers", "Probe workers per agent: one per probed container.", "short", half,
			q(fmt.Sprintf("sum by (instance) (podslo_agent_probe_workers%s)", agent), "{{instance}}"))).
		WithRow(dashboard.NewRowBuilder("Condition writes")).
		WithPanel(timeseriesPanel("Condition writes", "Pod status patches of the conditions the agent owns, per second, by condition type and result.", "ops", half,
			q(fmt.Sprintf("sum by (condition_type, result) (rate(podslo_agent_condition_writes_total%s[$__rate_interval]))", agent), "{{condition_type}} {{result}}"))).
		WithPanel(timeseriesPanel("Condition write latency", "50th and 99th percentile of a condition patch's duration.", "s", half,
			q(fmt.Sprintf("histogram_quantile(0.5, sum by (le) (rate(podslo_agent_condition_write_duration_seconds_bucket%s[$__rate_interval])))", agent), "p50"),
			q(fmt.Sprintf("histogram_quantile(0.99, sum by (le) (rate(podslo_agent_condition_write_duration_seconds_bucket%s[$__rate_interval])))", agent), "p99"))).
		WithRow(dashboard.NewRowBuilder("Stabilization")).
		WithPanel(quantiles("Stabilization latency", "Time for a pod to become stable, as the exporter sees it from the agent's conditions, over the selected classes.", "podslo_stabilization_duration_seconds", f, third)).
		WithPanel(timeseriesPanel("Stability transitions", "Pods turning stable or unstable, per second, by the state they turned to.", "ops", third,
			q(fmt.Sprintf("sum by (to) (rate(podslo_stable_transitions_total%s[$__rate_interval]))", f), "to {{to}}"))).
		WithPanel(timeseriesPanel("Unstable pods", "Existing pods that are not stable now, from the per-pod series.", "short", third,
			q(fmt.Sprintf("count by (runtime_class, storage_class) (podslo_pod_stable%s == 0)", f), "{{runtime_class}} / {{storage_class}}")))
}

func modelDuration(d time.Duration) string { return model.Duration(d).String() }

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }
