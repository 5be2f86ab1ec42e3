package alerts

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
)

// RuleFile is a Prometheus rule file.
type RuleFile struct {
	Groups []RuleGroup `json:"groups"`
}

// RuleGroup is a group of rules evaluated together.
type RuleGroup struct {
	Name     string `json:"name"`
	Interval string `json:"interval,omitempty"`
	Rules    []Rule `json:"rules"`

	// before and after are template text the chart writes around the
	// group (extraRange).
	before, after string
}

// Rule is a recording rule (Record set) or an alerting rule (Alert set).
type Rule struct {
	Record      string            `json:"record,omitempty"`
	Alert       string            `json:"alert,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`

	// cond is a template condition the chart writes the rule under.
	cond string
}

// BurnWindow is one multi-window, multi-burn-rate alert (Google SRE
// workbook, chapter 5): it fires when the error ratio over both windows
// exceeds Factor times what the objective allows. The short window makes
// the alert stop soon after the errors do.
type BurnWindow struct {
	Long, Short time.Duration
	// Budget is the share of the whole error budget that Long spends at the
	// alerting rate: the burn factor follows from it and the SLO window.
	Budget   float64
	Severity string
	For      time.Duration
}

// BurnWindows are the workbook's four alerts: two pages and two tickets.
var BurnWindows = []BurnWindow{
	{Long: time.Hour, Short: 5 * time.Minute, Budget: 0.02, Severity: "critical", For: 2 * time.Minute},
	{Long: 6 * time.Hour, Short: 30 * time.Minute, Budget: 0.05, Severity: "critical", For: 15 * time.Minute},
	{Long: 24 * time.Hour, Short: 2 * time.Hour, Budget: 0.10, Severity: "warning", For: time.Hour},
	{Long: 72 * time.Hour, Short: 6 * time.Hour, Budget: 0.10, Severity: "warning", For: 3 * time.Hour},
}

// Factor is the burn rate the window alerts on: 14.4, 6, 3 and 1 for a
// 30-day SLO. It is rounded so that it prints as a short decimal.
func (w BurnWindow) Factor(window time.Duration) float64 {
	return round3(w.Budget * window.Hours() / w.Long.Hours())
}

func longestAlertWindow() time.Duration {
	return slices.MaxFunc(BurnWindows, func(a, b BurnWindow) int { return int(a.Long - b.Long) }).Long
}

// RatioWindows are the windows of the recorded error ratios that the alerts
// read, shortest first.
func RatioWindows() []time.Duration {
	var ws []time.Duration
	for _, w := range BurnWindows {
		ws = append(ws, w.Long, w.Short)
	}
	slices.Sort(ws)
	return slices.Compact(ws)
}

// Level is the level part of a recorded metric's name (Prometheus'
// level:metric:operations convention): the labels it keeps.
func (s *Spec) Level(class string) string { return s.Config.ClusterLabel + "_" + class }

// ErrorRatio names the recorded share of bad events over window.
func (s *Spec) ErrorRatio(slo *SLO, class string, window time.Duration) string {
	return fmt.Sprintf("%s:podslo_%s_errors:ratio_rate%s", s.Level(class), slo.Name, model.Duration(window))
}

// Events names the recorded number of events over window.
func (s *Spec) Events(slo *SLO, class string, window time.Duration) string {
	return fmt.Sprintf("%s:podslo_%s_events:increase%s", s.Level(class), slo.Name, model.Duration(window))
}

// WindowDuration is the SLO period.
func (slo *SLO) WindowDuration() time.Duration { return slo.window }

// ThresholdDuration is a latency SLO's threshold.
func (l *Latency) ThresholdDuration() time.Duration { return l.threshold }

// Selector returns the exporter's selector with extra matchers, in braces.
func (s *Spec) Selector(matchers ...string) string {
	return "{" + strings.Join(append([]string{s.Config.ExporterSelector}, matchers...), ",") + "}"
}

// LeMatcher matches the bucket whose upper bound is seconds. Prometheus 3
// writes the bound of a classic bucket as a float ("5.0") where Prometheus
// 2 kept what the target exposed ("5"), so an integer bound matches both.
func LeMatcher(seconds float64) string {
	re := regexp.QuoteMeta(formatFloat(seconds))
	if seconds == math.Trunc(seconds) {
		re += `(\.0)?`
	}
	// Inside a PromQL string a regexp backslash is written twice.
	return `le=~"` + strings.ReplaceAll(re, `\`, `\\`) + `"`
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func modelDuration(d time.Duration) string { return model.Duration(d).String() }

func (s *Spec) by(class string) string {
	return fmt.Sprintf("sum by (%s, %s)", s.Config.ClusterLabel, class)
}

// errorRatio is the PromQL of the share of bad events over window. It is
// the ratio of two rates, but computed from increase(): rate() divides by
// the window in floating point, so its ratios miss round values by an ulp,
// while the increases of whole counts are whole and their ratios exact.
func (s *Spec) errorRatio(slo *SLO, class string, window time.Duration) string {
	w := model.Duration(window).String()
	if slo.Latency != nil {
		count := s.latencyEvents(slo, class, w)
		return fmt.Sprintf("(\n  %s\n  -\n  %s\n)\n/\n%s", count, s.latencyGood(slo, class, w), count)
	}
	ok, failed := s.successes(slo, class, w), s.failures(slo, class, w)
	// Either counter may be missing for a class: the exporter need not
	// export a class's failures before the first one, and a class whose
	// every pod failed has no successes. Without the fallbacks such a
	// class would have no ratio at all, and a broken class no alert.
	return fmt.Sprintf("(\n  %s\n  /\n  (\n    (%s + %s)\n    or\n    %s\n  )\n)\nor\n0 * %s", failed, failed, ok, failed, ok)
}

// events is the PromQL of the number of events over window.
func (s *Spec) events(slo *SLO, class string, window time.Duration) string {
	return s.eventsOver(slo, class, model.Duration(window).String())
}

// The SLI's PromQL over w, a PromQL duration or a template of one (Sloth's
// {{.window}}), summed by cluster and class: what the recording rules
// record and the exports (export.go) hand to other tools.

// eventsOver is the number of events over w.
func (s *Spec) eventsOver(slo *SLO, class, w string) string {
	if slo.Latency != nil {
		return s.latencyEvents(slo, class, w)
	}
	ok, failed := s.successes(slo, class, w), s.failures(slo, class, w)
	return fmt.Sprintf("(%s + %s)\nor\n%s\nor\n%s", ok, failed, ok, failed)
}

// latencyEvents is a latency SLO's events over w: the histogram's count.
func (s *Spec) latencyEvents(slo *SLO, class, w string) string {
	return fmt.Sprintf("%s (increase(%s_count%s[%s]))", s.by(class), slo.Latency.Histogram, s.Selector(slo.Matchers...), w)
}

// latencyGood is a latency SLO's good events over w: the buckets of its
// thresholds.
func (s *Spec) latencyGood(slo *SLO, class, w string) string {
	return fmt.Sprintf("%s (%s)", s.by(class), slo.GoodBuckets("increase", func(good ...string) string {
		return s.Selector(append(slices.Clone(slo.Matchers), good...)...)
	}, w))
}

// successes and failures are a success SLO's counters over w.
func (s *Spec) successes(slo *SLO, class, w string) string {
	return fmt.Sprintf("%s (increase(%s%s[%s]))", s.by(class), slo.Success.Successes, s.Selector(slo.Matchers...), w)
}

func (s *Spec) failures(slo *SLO, class, w string) string {
	return fmt.Sprintf("%s (increase(%s%s[%s]))", s.by(class), slo.Success.Failures, s.Selector(slo.Matchers...), w)
}

// The SLOs as data, one series per SLO (and class) with an slo label, as
// Sloth's slo:objective:ratio and slo:period_error_budget_remaining:ratio:
// the dashboards read the objective from them instead of constants, and
// one query lists every SLO by the budget it has left,
// sort(slo:podslo_period_error_budget_remaining:ratio).
const (
	ObjectiveRecord       = "slo:podslo_objective:ratio"
	ErrorBudgetRecord     = "slo:podslo_error_budget:ratio"
	BudgetRemainingRecord = "slo:podslo_period_error_budget_remaining:ratio"
)

// SLOMatcher selects an SLO's series of the records above.
func (slo *SLO) SLOMatcher() string { return `slo="` + slo.Name + `"` }

// RecordingRules are the error ratios and event counts the alerts and the
// dashboards read, and each SLO's objective and budget.
func (s *Spec) RecordingRules() RuleFile {
	var f RuleFile
	for i := range s.SLOs {
		f.Groups = append(f.Groups, s.recordingRules(&s.SLOs[i])...)
		if s.chart {
			f.Groups = append(f.Groups, extraRange(&s.SLOs[i], s.recordingRules(extraTemplate(s.SLOs[i])))...)
		}
	}
	return f
}

// recordingRules are one SLO's groups: the burn windows' ratios and
// counts, and the window's, with the SLO's objective and budget.
func (s *Spec) recordingRules(slo *SLO) []RuleGroup {
	burn := RuleGroup{Name: "podslo." + slo.Name + ".rules"}
	// Over the whole SLO window the ratio moves slowly and reads a
	// month of samples: a slower interval saves most of that work.
	period := RuleGroup{Name: "podslo." + slo.Name + ".rules." + model.Duration(slo.window).String(), Interval: "5m"}
	data := map[string]string{"slo": slo.Name}
	period.Rules = append(period.Rules,
		Rule{Record: ObjectiveRecord, Expr: "vector(" + slo.ObjectiveRatio() + ")", Labels: data},
		Rule{Record: ErrorBudgetRecord, Expr: "vector(" + slo.ErrorBudgetRatio() + ")", Labels: data})
	for _, class := range slo.GroupBy {
		for _, w := range RatioWindows() {
			burn.Rules = append(burn.Rules, Rule{Record: s.ErrorRatio(slo, class, w), Expr: s.errorRatio(slo, class, w)})
		}
		for _, w := range BurnWindows {
			burn.Rules = append(burn.Rules, Rule{Record: s.Events(slo, class, w.Long), Expr: s.events(slo, class, w.Long)})
		}
		period.Rules = append(period.Rules,
			Rule{Record: s.ErrorRatio(slo, class, slo.window), Expr: s.errorRatio(slo, class, slo.window)},
			Rule{Record: s.Events(slo, class, slo.window), Expr: s.events(slo, class, slo.window)},
			// After the ratio it reads: a group evaluates in order. Below
			// 0 once the budget is overspent.
			Rule{Record: BudgetRemainingRecord, Expr: fmt.Sprintf("1 - %s / %s", s.ErrorRatio(slo, class, slo.window), slo.ErrorBudgetRatio()), Labels: data})
	}
	return []RuleGroup{burn, period}
}

// Alerts are the burn-rate alerts of every SLO and the alerts on podslo's
// own health, less the disabled ones, with the configured extra labels.
// The chart writes both as template actions instead (yaml.go).
func (s *Spec) Alerts() RuleFile {
	f := s.allAlerts()
	if s.chart {
		return f
	}
	var out RuleFile
	for _, g := range f.Groups {
		g.Rules = slices.DeleteFunc(g.Rules, func(r Rule) bool { return slices.Contains(s.Config.DisabledAlerts, r.Alert) })
		if len(g.Rules) == 0 {
			continue
		}
		for _, r := range g.Rules {
			maps.Copy(r.Labels, s.Config.AlertLabels)
		}
		out.Groups = append(out.Groups, g)
	}
	return out
}

// alertNames lists every alert the configuration may produce, the agent's
// included.
func (s *Spec) alertNames() []string {
	var rules []Rule
	for _, g := range s.allAlerts().Groups {
		rules = append(rules, g.Rules...)
	}
	var out []string
	for _, r := range append(rules, s.agentAlerts()...) {
		if !slices.Contains(out, r.Alert) {
			out = append(out, r.Alert)
		}
	}
	return out
}

func (s *Spec) allAlerts() RuleFile {
	var f RuleFile
	group := func(slo *SLO) RuleGroup {
		g := RuleGroup{Name: "podslo." + slo.Name + ".alerts"}
		for _, class := range slo.GroupBy {
			for _, w := range BurnWindows {
				g.Rules = append(g.Rules, s.burnAlert(slo, class, w))
			}
		}
		return g
	}
	for i := range s.SLOs {
		f.Groups = append(f.Groups, group(&s.SLOs[i]))
		if s.chart {
			f.Groups = append(f.Groups, extraRange(&s.SLOs[i], []RuleGroup{group(extraTemplate(s.SLOs[i]))})...)
		}
	}
	f.Groups = append(f.Groups, RuleGroup{Name: "podslo.alerts", Rules: s.healthAlerts()})
	// The chart writes this label only when its value is set (yaml.go).
	if c := s.Config.Cluster; c != "" && !s.chart {
		for _, g := range f.Groups {
			for _, r := range g.Rules {
				r.Labels[s.Config.ClusterLabel] = c
			}
		}
	}
	return f
}

func (s *Spec) burnAlert(slo *SLO, class string, w BurnWindow) Rule {
	cluster := s.Config.ClusterLabel
	on := fmt.Sprintf("on (%s, %s)", cluster, class)
	factor := w.Factor(slo.window)
	threshold := fmt.Sprintf("(%s * %s)", formatFloat(factor), slo.ErrorBudgetExpr())
	long, short := model.Duration(w.Long).String(), model.Duration(w.Short).String()
	expr := fmt.Sprintf("(\n  %s > %s\nand %s\n  %s > %s\n)\nand %s\n%s >= %s",
		s.ErrorRatio(slo, class, w.Long), threshold, on,
		s.ErrorRatio(slo, class, w.Short), threshold, on,
		s.Events(slo, class, w.Long), slo.MinEventsText())

	var bad string
	if slo.Latency != nil {
		bad = "were slower than " + slo.ThresholdText()
	} else {
		bad = slo.Success.Failure
	}
	window := model.Duration(slo.window).String()
	return Rule{
		Alert: slo.Alert,
		Expr:  expr,
		For:   model.Duration(w.For).String(),
		// The class label is the expression's own; naming it here keeps the
		// runtime_class and storage_class rules apart for promtool's
		// duplicate-rule lint, and shows what to route on.
		Labels: map[string]string{"severity": w.Severity, "long": long, "short": short, class: "{{ $labels." + class + " }}"},
		Annotations: map[string]string{
			"summary": fmt.Sprintf("%s SLO of %s {{ $labels.%s }} burns its error budget %s times too fast.",
				slo.Title, class, class, formatFloat(factor)),
			"description": fmt.Sprintf("{{ $value | humanizePercentage }} of %s of %s {{ $labels.%s }} in %s {{ $labels.%s }} %s over the last %s, "+
				"and more than %s%% over the last %s too. The objective, %s%% per %s, allows %s%%; at %s times that rate the error budget is gone in %s.",
				slo.Events, class, class, cluster, cluster, bad, long,
				slo.BurnPercent(w), short, slo.ObjectiveText(), window,
				slo.ErrorBudgetPercent(), formatFloat(factor), model.Duration(time.Duration(float64(slo.window)/factor))),
			"runbook_url":   s.runbook(cmp.Or(slo.Runbook, slo.Alert)),
			"dashboard_url": s.dashboard(slo.Dashboard, true, class),
		},
	}
}

func (s *Spec) healthAlerts() []Rule {
	cluster := s.Config.ClusterLabel
	classes := fmt.Sprintf("%s, runtime_class, storage_class", cluster)
	rules := []Rule{{
		Alert: "PodsloSandboxCreationStuck",
		// timed_out="true": past the exporter's own --sandbox-creation-timeout,
		// whatever it is set to, and without per-pod series. Pending pods
		// blamed on their own spec (a missing Secret or ConfigMap,
		// KEP-3085's user errors) are no platform failure.
		Expr:   fmt.Sprintf("sum by (%s) (podslo_sandbox_creation_pending_pods%s) > 0", classes, s.Selector(`user_error="false"`, `timed_out="true"`)),
		For:    "5m",
		Labels: map[string]string{"severity": "warning"},
		Annotations: map[string]string{
			"summary": "Pods of runtime_class {{ $labels.runtime_class }} and storage_class {{ $labels.storage_class }} wait for their sandbox past the creation timeout.",
			"description": fmt.Sprintf("Pods of runtime_class {{ $labels.runtime_class }} with storage_class {{ $labels.storage_class }} in %s {{ $labels.%s }} "+
				"waiting for their first sandbox past the exporter's --sandbox-creation-timeout since they were scheduled: {{ $value }}.", cluster, cluster),
			"runbook_url":   s.runbook("PodsloSandboxCreationStuck"),
			"dashboard_url": s.dashboard("podslo-pod-startup", true, "runtime_class", "storage_class"),
		},
	}, {
		Alert: "PodsloTerminationStuck",
		// Past the grace period the kubelet kills what is left; a pod
		// still there 15 minutes on waits for a node that is gone, a
		// runtime that hangs, or a volume that does not detach.
		Expr:   fmt.Sprintf("sum by (%s) (podslo_terminations_pending_pods%s) > 0", classes, s.Selector(`over_grace="true"`)),
		For:    "15m",
		Labels: map[string]string{"severity": "warning"},
		Annotations: map[string]string{
			"summary": "Pods of runtime_class {{ $labels.runtime_class }} and storage_class {{ $labels.storage_class }} are stuck terminating.",
			"description": fmt.Sprintf("Pods of runtime_class {{ $labels.runtime_class }} with storage_class {{ $labels.storage_class }} in %s {{ $labels.%s }} "+
				"have been terminating for 15m past the end of their grace period, their sandbox not gone: {{ $value }}.", cluster, cluster),
			"runbook_url":   s.runbook("PodsloTerminationStuck"),
			"dashboard_url": s.dashboard("podslo-termination-readiness", true, "runtime_class", "storage_class"),
		},
	}, s.downAlert("PodsloExporterDown", "exporter", s.Config.ExporterSelector, "podslo-slo-overview"), s.exporterInstanceDown()}
	switch {
	case s.chart:
		// The chart leaves them out when the agent's selector is empty.
		for _, r := range s.agentAlerts() {
			r.cond = s.chartAgentSelector()
			rules = append(rules, r)
		}
	case s.Config.AgentSelector != "":
		rules = append(rules, s.agentAlerts()...)
	}
	return append(rules, Rule{
		Alert: "PodsloStoreErrors",
		Expr: fmt.Sprintf("sum without (operation, result) (rate(podslo_store_operations_total%s[5m]))\n/\nsum without (operation, result) (rate(podslo_store_operations_total%s[5m]))\n> 0.01",
			s.Selector(`result="error"`), s.Selector()),
		For:    "15m",
		Labels: map[string]string{"severity": "warning"},
		Annotations: map[string]string{
			"summary": "The podslo exporter fails to persist what it observes.",
			"description": fmt.Sprintf("{{ $value | humanizePercentage }} of the state store operations of {{ $labels.instance }} in %s {{ $labels.%s }} failed over the last 5m. "+
				"A failed apply is retried, but while it fails the exporter shows no new observation.", cluster, cluster),
			"runbook_url":   s.runbook("PodsloStoreErrors"),
			"dashboard_url": s.dashboard("podslo-slo-overview", true),
		},
	}, Rule{
		Alert: "PodsloStateNotWritable",
		// Its own alert, not PodsloStoreErrors: a full volume is the one
		// store fault with a known fix, and on a quiet cluster it refuses
		// too few writes for an error ratio to show.
		Expr:   fmt.Sprintf("podslo_store_writable%s == 0", s.Selector()),
		For:    "5m",
		Labels: map[string]string{"severity": "warning"},
		Annotations: map[string]string{
			"summary": "The podslo exporter's state volume is full: new observations wait.",
			"description": fmt.Sprintf("The state filesystem of {{ $labels.instance }} in %s {{ $labels.%s }} has less free space than --state-min-free. "+
				"The exporter keeps serving and records what it observes meanwhile once space returns, but shows nothing new until then.", cluster, cluster),
			"runbook_url":   s.runbook("PodsloStateNotWritable"),
			"dashboard_url": s.dashboard("podslo-slo-overview", true),
		},
	}, Rule{
		Alert: "PodsloPodWatchNotCurrent",
		// An exporter that is up but blind: up == 1 says nothing of its
		// watch. 15m: a relist of 100k pods, or a short API server
		// outage, is not worth a page; one that does not end is.
		Expr:   fmt.Sprintf("podslo_informer_pods_watch_current%s == 0", s.Selector()),
		For:    "15m",
		Labels: map[string]string{"severity": "warning"},
		Annotations: map[string]string{
			"summary": "The podslo exporter {{ $labels.instance }} has not had a current pod watch for 15m.",
			"description": fmt.Sprintf("The pod watch of {{ $labels.instance }} in %s {{ $labels.%s }} has not been current for 15m: the API server is unreachable, refuses its list or watch, or its relists do not finish. "+
				"Meanwhile SLI ends are timed in whole seconds, the creation-timeout check waits, and a pod created and deleted unseen is lost.", cluster, cluster),
			"runbook_url":   s.runbook("PodsloPodWatchNotCurrent"),
			"dashboard_url": s.dashboard("podslo-slo-overview", true),
		},
	}, Rule{
		Alert: "PodsloNetworkPolicyUnsupported",
		// A warning, not information: a policy the network plugin cannot
		// enforce, or may misread (reason Version), leaves open a door its
		// author believes closed (KEP-2136 Story 3).
		Expr:   fmt.Sprintf("podslo_networkpolicy_condition%s == 1", s.Selector(`type="Supported"`, `status="False"`)),
		For:    "5m",
		Labels: map[string]string{"severity": "warning"},
		Annotations: map[string]string{
			"summary": "NetworkPolicy {{ $labels.namespace }}/{{ $labels.networkpolicy }} uses what the network plugin does not support ({{ $labels.reason }}).",
			"description": fmt.Sprintf("NetworkPolicy {{ $labels.namespace }}/{{ $labels.networkpolicy }} in %s {{ $labels.%s }} is not supported by the network plugin of --network-plugin-profile: "+
				"{{ if eq $labels.reason \"Version\" }}it needs a newer NetworkPolicy version than the plugin knows, so the plugin may misread it{{ else }}it uses a feature the plugin does not implement, so the plugin may enforce only part of it{{ end }}. "+
				"Traffic the policy means to block may be let through.", cluster, cluster),
			"runbook_url":   s.runbook("PodsloNetworkPolicyUnsupported"),
			"dashboard_url": s.dashboard("podslo-slo-overview", true),
		},
	}, Rule{
		Alert:  "PodsloNetworkPolicyProblem",
		Expr:   fmt.Sprintf("podslo_networkpolicy_condition%s == 1", s.Selector(`type="Problem"`, `status="True"`)),
		For:    "5m",
		Labels: map[string]string{"severity": "info"},
		Annotations: map[string]string{
			"summary": "NetworkPolicy {{ $labels.namespace }}/{{ $labels.networkpolicy }} has a CIDR problem ({{ $labels.reason }}).",
			"description": fmt.Sprintf("NetworkPolicy {{ $labels.namespace }}/{{ $labels.networkpolicy }} in %s {{ $labels.%s }} has an ipBlock that network plugins may read otherwise than its author meant "+
				"({{ $labels.reason }}): a cidr or except with host bits set, one that does not parse, or an except outside its cidr. API servers before 1.36 stored such policies.", cluster, cluster),
			"runbook_url":   s.runbook("PodsloNetworkPolicyProblem"),
			"dashboard_url": s.dashboard("podslo-slo-overview", true),
		},
	})
}

func (s *Spec) agentAlerts() []Rule {
	return []Rule{s.downAlert("PodsloAgentDown", "agent", s.Config.AgentSelector, "podslo-agent"), s.agentDownOnNode()}
}

// agentDownOnNode fires for each agent target that is down: pods on its
// node that wait for the agent's readiness gate cannot become Ready. The
// node label comes from the scrape configuration (Config.AgentSelector).
// A target that disappears (its pod deleted, or pending without an IP) is
// not down: kube-state-metrics' DaemonSet alerts and PodsloAgentDown cover
// that.
func (s *Spec) agentDownOnNode() Rule {
	cluster := s.Config.ClusterLabel
	return Rule{
		Alert:  "PodsloAgentDownOnNode",
		Expr:   fmt.Sprintf("up{%s} == 0", s.Config.AgentSelector),
		For:    "10m",
		Labels: map[string]string{"severity": "warning"},
		Annotations: map[string]string{
			"summary": "The podslo agent on node {{ $labels.node }} is down.",
			"description": fmt.Sprintf("The podslo agent {{ $labels.instance }} on node {{ $labels.node }} in %s {{ $labels.%s }} has been down for 10m. "+
				"Pods on that node with a podslo readiness gate cannot become Ready, and the gate conditions of its Ready pods no longer follow their probes.", cluster, cluster),
			"runbook_url":   s.runbook("PodsloAgentDownOnNode"),
			"dashboard_url": s.dashboard("podslo-agent", true),
		},
	}
}

// exporterInstanceDown fires for each exporter target that is down: a
// shard of a sharded set, or the exporter of one node, whose pods' SLIs
// stop while the other exporters keep PodsloExporterDown quiet. A lone
// exporter that is down fires it too, before PodsloExporterDown. The node
// label comes from the per-node PodMonitor's relabeling, the pod label from
// the Prometheus Operator; without them the instance alone names it. As
// with the agent, a target that disappears is not down: kube-state-metrics'
// StatefulSet and DaemonSet alerts cover a pod that is gone or pending.
func (s *Spec) exporterInstanceDown() Rule {
	cluster := s.Config.ClusterLabel
	return Rule{
		Alert:  "PodsloExporterInstanceDown",
		Expr:   fmt.Sprintf("up%s == 0", s.Selector()),
		For:    "10m",
		Labels: map[string]string{"severity": "warning"},
		Annotations: map[string]string{
			"summary": "The podslo exporter {{ $labels.instance }}{{ with $labels.node }} on node {{ . }}{{ end }} is down.",
			"description": fmt.Sprintf("The podslo exporter {{ $labels.instance }}{{ with $labels.pod }} (pod {{ . }}){{ end }}{{ with $labels.node }} on node {{ . }}{{ end }} in %s {{ $labels.%s }} has been down for 10m. "+
				"The SLIs of the pods it owns ({{ if $labels.node }}those bound to node {{ $labels.node }}{{ else }}its shard's, or every pod for a lone exporter{{ end }}) stop until it is back; the other exporters' go on. "+
				"Nothing is counted twice: on its return it observes late what the pods' conditions still show, within --max-observation-age; what happened to pods deleted meanwhile is lost.", cluster, cluster),
			"runbook_url":   s.runbook("PodsloExporterInstanceDown"),
			"dashboard_url": s.dashboard("podslo-slo-overview", true),
		},
	}
}

// downAlert fires when no target of a job is up. absent() also covers a
// job that service discovery lost entirely, where up itself is gone. It is
// a warning: podslo going blind breaks no workload.
func (s *Spec) downAlert(name, what, selector, dashboard string) Rule {
	return Rule{
		Alert:  name,
		Expr:   fmt.Sprintf("absent(up{%s} == 1)", selector),
		For:    "15m",
		Labels: map[string]string{"severity": "warning"},
		Annotations: map[string]string{
			"summary":       fmt.Sprintf("No podslo %s is up.", what),
			"description":   fmt.Sprintf("No target of {%s} has been up for 15m, or Prometheus no longer discovers one.", selector),
			"runbook_url":   s.runbook(name),
			"dashboard_url": s.dashboard(dashboard, false),
		},
	}
}

// runbook links to the section of the alert: GitHub's anchor of a heading
// is the heading in lower case.
func (s *Spec) runbook(alert string) string {
	return s.Config.RunbookURL + "#" + strings.ToLower(alert)
}

// dashboard links to a dashboard with its variables set to the labels of
// the alert. The variable of the cluster is "cluster" whatever the label.
func (s *Spec) dashboard(uid string, cluster bool, classes ...string) string {
	var vars []string
	if cluster {
		vars = append(vars, fmt.Sprintf("var-cluster={{ $labels.%s | urlquery }}", s.Config.ClusterLabel))
	}
	for _, c := range classes {
		vars = append(vars, fmt.Sprintf("var-%s={{ $labels.%s | urlquery }}", c, c))
	}
	u := strings.TrimSuffix(s.Config.GrafanaURL, "/") + "/d/" + uid
	if len(vars) > 0 {
		u += "?" + strings.Join(vars, "&")
	}
	return u
}
