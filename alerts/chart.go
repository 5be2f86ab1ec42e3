package alerts

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The Helm chart (charts/podslo) carries the same rules and dashboards as
// templates, so that a chart user changes the monitoring config through
// values, without Go. They are generated from the same code: ForChart
// turns every value a chart user may set into a hole, a placeholder that
// HelmTemplate writes as a template action reading that value. The holes
// read $m, the values that podslo.monitoring (MonitoringTemplate) checked
// and derived from .Values.monitoring.
//
// A hole is ⟦expr⟧ when the value needs no escaping anywhere (a label
// name, a number), and ⟪expr⟫ when it is any string, which a YAML or JSON
// string must escape. expr is a template pipeline without quotes, so that
// the YAML and JSON encoders leave it alone.

var holeExpr = regexp.MustCompile(`^[$.\w]+$`)

func safeHole(expr string) string { return "⟦" + checkHole(expr) + "⟧" }
func textHole(expr string) string { return "⟪" + checkHole(expr) + "⟫" }

// rawAction is a template action of the generator's own (a range over a
// list of the values, its end), which HelmTemplate writes as it is.
func rawAction(action string) string {
	if !rawActionExpr.MatchString(action) {
		panic(fmt.Sprintf("action %q: names, variables and := only", action))
	}
	return "⟨" + action + "⟩"
}

var rawActionExpr = regexp.MustCompile(`^[$.\w :=,]+$`)

func checkHole(expr string) string {
	if !holeExpr.MatchString(expr) {
		panic(fmt.Sprintf("hole %q: a template pipeline of names only", expr))
	}
	return expr
}

// ForChart returns a copy of s whose configurable parts are holes.
func (s *Spec) ForChart() *Spec {
	c := *s
	c.chart = true
	c.Config.ClusterLabel = safeHole("$m.clusterLabel")
	c.Config.Cluster = textHole("$m.cluster")
	c.Config.ExporterSelector = textHole("$m.exporterSelector")
	c.Config.AgentSelector = textHole("$m.agentSelector")
	c.Config.RunbookURL = textHole("$m.runbookURL")
	c.Config.GrafanaURL = textHole("$m.grafanaURL")
	c.SLOs = slices.Clone(s.SLOs)
	for i := range c.SLOs {
		c.SLOs[i].chart = true
		c.SLOs[i].sentinel = -float64(1001 + i)
		c.SLOs[i].keys = "$m.slos." + c.SLOs[i].Name
	}
	return &c
}

// The chart's extra SLOs (monitoring.extraSLOs) are each made from an SLO
// of slos.yaml: its SLI, classes, window and dashboard, narrowed by
// matchers of their own, with their own name, alert, title and numbers.
// Their rules are that SLO's, written once more with holes for what an
// extra SLO sets, in a range over the extra SLOs made from it.

// extraTemplate is the SLO whose rules the chart writes for every extra
// SLO made from slo, reading it as $x.
func extraTemplate(slo SLO) *SLO {
	x := slo
	x.Name = safeHole("$x.name")
	x.Alert = safeHole("$x.alert")
	x.Title = textHole("$x.title")
	x.Matchers = append(slices.Clone(slo.Matchers), textHole("$x.matchers"))
	x.Runbook = cmp.Or(slo.Runbook, slo.Alert)
	x.keys = "$x"
	return &x
}

// extraRange opens and closes the range of the extra SLOs made from slo
// around groups.
func extraRange(slo *SLO, groups []RuleGroup) []RuleGroup {
	if len(groups) == 0 {
		return groups
	}
	groups = slices.Clone(groups)
	groups[0].before = fmt.Sprintf("{{- range $_, $x := $m.extraSLOs }}\n{{- if eq $x.from %q }}\n", slo.Name)
	groups[len(groups)-1].after = "{{- end }}\n{{- end }}\n"
	return groups
}

// chartAgentSelector is the chart's condition for the agent's alerts.
func (s *Spec) chartAgentSelector() string { return "$m.agentSelector" }

// AgentSelector returns the agent's selector with extra matchers, in
// braces; without an agent selector, the matchers alone.
func (s *Spec) AgentSelector(matchers ...string) string {
	if s.chart {
		// agentMatchers is the selector and a comma, or nothing.
		return "{" + textHole("$m.agentMatchers") + strings.Join(matchers, ", ") + "}"
	}
	if s.Config.AgentSelector != "" {
		matchers = append([]string{s.Config.AgentSelector}, matchers...)
	}
	return "{" + strings.Join(matchers, ", ") + "}"
}

var (
	hole = regexp.MustCompile(`⟦([^⟧]*)⟧|⟪([^⟫]*)⟫|⟨([^⟩]*)⟩`)
	// A Prometheus or Grafana template of the text ({{ $labels.pod }},
	// {{runtime_class}}), which Helm must print as it is.
	foreignTemplate = regexp.MustCompile("\\{\\{[^{}`]*\\}\\}")
	braces          = regexp.MustCompile(`\{\{+|\}\}+`)
)

// HelmTemplate turns text with holes into Helm template text that renders
// the text with the values in place of the holes. quoted says that the
// text is inside a JSON or YAML double-quoted string, whose escapes
// (JSON's, which YAML shares) a ⟪⟫ value then gets. Template delimiters
// in the text itself are printed by actions of raw strings.
func HelmTemplate(text string, quoted bool) string {
	var t templateWriter
	last := 0
	for _, m := range hole.FindAllStringSubmatchIndex(text, -1) {
		t.literal(text[last:m[0]])
		switch {
		case m[2] >= 0:
			t.action(text[m[2]:m[3]])
		case m[6] >= 0:
			t.action(text[m[6]:m[7]])
		case quoted:
			t.action(text[m[4]:m[5]] + ` | toJson | trimPrefix "\"" | trimSuffix "\""`)
		default:
			t.action(text[m[4]:m[5]])
		}
		last = m[1]
	}
	t.literal(text[last:])
	return t.b.String()
}

type templateWriter struct{ b strings.Builder }

func (t *templateWriter) literal(s string) {
	last := 0
	for _, m := range foreignTemplate.FindAllStringIndex(s, -1) {
		t.unpaired(s[last:m[0]])
		t.action("`" + s[m[0]:m[1]] + "`")
		last = m[1]
	}
	t.unpaired(s[last:])
}

// unpaired prints the delimiters of a foreign template that a hole splits,
// as in {{ $labels.⟦$m.clusterLabel⟧ }}.
func (t *templateWriter) unpaired(s string) {
	last := 0
	for _, m := range braces.FindAllStringIndex(s, -1) {
		t.b.WriteString(s[last:m[0]])
		t.action("`" + s[m[0]:m[1]] + "`")
		last = m[1]
	}
	t.b.WriteString(s[last:])
}

func (t *templateWriter) action(pipeline string) {
	// After a brace, "{{" would open the action one character early: "{ "
	// and a left trim marker print the brace alone.
	if strings.HasSuffix(t.b.String(), "{") {
		t.b.WriteString(" {{- ")
	} else {
		t.b.WriteString("{{ ")
	}
	t.b.WriteString(pipeline)
	t.b.WriteString(" }}")
}

// chartHeader opens a generated template: a template comment, as a YAML
// comment would end up in the rendered manifests.
func chartHeader(generator, source string) string {
	return fmt.Sprintf("{{- /* Code generated by go generate %s from %s. DO NOT EDIT. */}}\n", generator, source)
}

// ChartRules renders the chart's templates of the PrometheusRule objects
// of the recording rules and of the alerts.
func (s *Spec) ChartRules(source string) (rules, alerts []byte) {
	c := s.ForChart()
	return promRule(c.RecordingRules(), "rules", "rules", source), promRule(c.Alerts(), "alerts", "alerts", source)
}

func promRule(f RuleFile, name, toggle, source string) []byte {
	var b bytes.Buffer
	b.WriteString(chartHeader("./alerts", source))
	fmt.Fprintf(&b, `{{- if and .Values.monitoring.%s.enabled (include "podslo.operatorAPI" (dict "root" . "kind" "PrometheusRule")) }}
{{- $m := include "podslo.monitoring" . | fromYaml }}
apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata:
  name: {{ include "podslo.fullname" . }}-%s
  namespace: {{ .Release.Namespace }}
  labels:
    {{- include "podslo.labels" . | nindent 4 }}
    {{- with .Values.monitoring.prometheusRule.labels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with .Values.monitoring.prometheusRule.annotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  groups:
`, toggle, name)
	f.writeGroups(&b, "  ", true)
	b.WriteString("{{- end }}\n")
	return b.Bytes()
}

// MonitoringTemplate renders templates/_monitoring.tpl: podslo.monitoring
// checks .Values.monitoring as Validate checks slos.yaml, and derives from
// each SLO's objective and threshold what the holes of its SLO read
// (numbers.go), computed and printed as Go computes and prints them.
func (s *Spec) MonitoringTemplate(source string) []byte {
	var b strings.Builder
	b.WriteString(chartHeader("./alerts", source))
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w(`
{{- /*
podslo.monitoring checks .Values.monitoring and returns it as YAML, with
what the rules and dashboards derive from it: the numbers each SLO's
objective implies and the bucket matcher of each latency threshold. A bad
value fails the rendering with its path. The templates read it as
  $m := include "podslo.monitoring" . | fromYaml
*/}}
{{- define "podslo.monitoring" -}}
{{- $v := .Values.monitoring }}
{{- $numbers := list "float64" "float32" "int64" "int" }}
{{- if not (and (kindIs "string" $v.clusterLabel) (regexMatch "^[a-zA-Z_][a-zA-Z0-9_]*$" $v.clusterLabel)) }}
{{- fail (printf "monitoring.clusterLabel: %%s is not a label name" (toJson $v.clusterLabel)) }}
{{- end }}
{{- if has $v.clusterLabel (list %s) }}
{{- fail (printf "monitoring.clusterLabel: %%s is a label the alerts set themselves" (toJson $v.clusterLabel)) }}
{{- end }}
{{- if not (kindIs "string" $v.cluster) }}
{{- fail (printf "monitoring.cluster: %%s is not a string" (toJson $v.cluster)) }}
{{- end }}
{{- range $field := list "exporterSelector" "agentSelector" }}
{{- $matchers := get $v $field }}
{{- if not (kindIs "string" $matchers) }}
{{- fail (printf "monitoring.%%s: %%s is not a string" $field (toJson $matchers)) }}
{{- end }}
{{- if regexMatch "[{}\n]" $matchers }}
{{- fail (printf "monitoring.%%s: %%s holds a brace or a line break; give the matchers alone, e.g. job=\"podslo-exporter\"" $field (toJson $matchers)) }}
{{- end }}
{{- end }}
{{- if not $v.exporterSelector }}
{{- fail "monitoring.exporterSelector: must not be empty" }}
{{- end }}
{{- range $field := list "runbookURL" "grafanaURL" }}
{{- $url := get $v $field }}
{{- if not (kindIs "string" $url) }}
{{- fail (printf "monitoring.%%s: %%s is not a string" $field (toJson $url)) }}
{{- end }}
{{- if not $url }}
{{- fail (printf "monitoring.%%s: must not be empty" $field) }}
{{- end }}
{{- end }}
{{- /* Without the agent (agent.enabled false), its alerts would fire forever. */}}
{{- $agentSelector := "" }}
{{- if and .Values.agent .Values.agent.enabled }}
{{- $agentSelector = $v.agentSelector }}
{{- end }}
{{- if not (kindIs "map" $v.alertLabels) }}
{{- fail (printf "monitoring.alertLabels: %%s is not a map of label names to values" (toJson $v.alertLabels)) }}
{{- end }}
{{- range $k, $val := $v.alertLabels }}
{{- if not (regexMatch "^[a-zA-Z_][a-zA-Z0-9_]*$" $k) }}
{{- fail (printf "monitoring.alertLabels: %%s is not a label name" (toJson $k)) }}
{{- end }}
{{- if or (has $k (list %s)) (eq $k $v.clusterLabel) }}
{{- fail (printf "monitoring.alertLabels: %%s is a label the alerts set themselves" (toJson $k)) }}
{{- end }}
{{- if has $k (list %s) }}
{{- fail (printf "monitoring.alertLabels: %%s is a label alerts carry from their series" (toJson $k)) }}
{{- end }}
{{- if not (kindIs "string" $val) }}
{{- fail (printf "monitoring.alertLabels.%%s: %%s is not a string" $k (toJson $val)) }}
{{- end }}
{{- end }}
{{- if not (kindIs "slice" $v.disabledAlerts) }}
{{- fail (printf "monitoring.disabledAlerts: %%s is not a list of alert names" (toJson $v.disabledAlerts)) }}
{{- end }}
{{- range $a := $v.disabledAlerts }}
{{- if not (has $a (list %s)) }}
{{- fail (printf "monitoring.disabledAlerts: %%s is no alert; the alerts are %s" (toJson $a)) }}
{{- end }}
{{- end }}
{{- $m := dict "longestWindow" %q "clusterLabel" $v.clusterLabel "cluster" $v.cluster "exporterSelector" $v.exporterSelector "agentSelector" $agentSelector "agentMatchers" "" "runbookURL" $v.runbookURL "grafanaURL" (trimSuffix "/" $v.grafanaURL) "alertLabels" $v.alertLabels "disabledAlerts" $v.disabledAlerts }}
{{- if $agentSelector }}
{{- $_ := set $m "agentMatchers" (printf "%%s, " $agentSelector) }}
{{- end }}`, quotedList(AlertLabels), quotedList(AlertLabels), quotedList(SeriesLabels), quotedList(s.alertNames()), strings.Join(s.alertNames(), ", "), s.longestWindow())

	var names []string
	for _, slo := range s.SLOs {
		names = append(names, slo.Name)
	}
	w(`{{- /* The latency thresholds a classic histogram can tell: its bucket bounds. */}}
{{- $le := dict %s }}
{{- $slos := dict }}
{{- $_ := set $m "slos" $slos }}
{{- if not (kindIs "map" $v.slos) }}
{{- fail "monitoring.slos: must map the name of each SLO of alerts/slos.yaml to its objective" }}
{{- end }}
{{- range $name, $_ := $v.slos }}
{{- if not (has $name (list %s)) }}
{{- fail (printf "monitoring.slos.%%s: alerts/slos.yaml has no such SLO; it has %s" $name) }}
{{- end }}
{{- end }}
{{- $s := dict }}
{{- $o := 0.0 }}
{{- $n := 0.0 }}
{{- $allowed := 0.0 }}
{{- $d := dict }}
{{- $classes := dict }}
{{- $default := "" }}
{{- $own := list }}
{{- $ownText := list }}
{{- $path := "" }}`, leTable(), quotedList(names), strings.Join(names, ", "))

	for i := range s.SLOs {
		slo := &s.SLOs[i]
		fields, allowed, what := sloFields(slo)
		w(`{{- /* %s: %s, %s, over %s */}}
{{- $path = %q }}
{{- $s = get $v.slos %q }}
{{- if not (kindIs "map" $s) }}
{{- fail (printf "%%s: must hold %s" $path) }}
{{- end }}
{{- range $field, $_ := $s }}
{{- if not (has $field (list %s)) }}
{{- fail (printf "%%s.%%s: no such field; it has %s" $path $field) }}
{{- end }}
{{- end }}`, slo.Name, slo.Title, what, modelDuration(slo.window), "monitoring.slos."+slo.Name, slo.Name,
			englishList(fields), quotedList(allowed), englishList(allowed))
		sloBlock(w, slo)
		w(`{{- $_ = set $slos %q $d }}`, slo.Name)
	}

	// The extra SLOs, each checked as the SLO it is made from, whose
	// numbers it takes where it sets none of its own.
	builtin := make([]string, len(s.SLOs))
	for i, slo := range s.SLOs {
		builtin[i] = slo.Name
	}
	w(`{{- $extras := dict }}
{{- $_ = set $m "extraSLOs" $extras }}
{{- if not (kindIs "map" $v.extraSLOs) }}
{{- fail "monitoring.extraSLOs: must map the name of each extra SLO to its definition" }}
{{- end }}
{{- $alerts := list %s }}
{{- range $name, $x := $v.extraSLOs }}
{{- $path = printf "monitoring.extraSLOs.%%s" $name }}
{{- if not (regexMatch %s $name) }}
{{- fail (printf "%%s: the name is not snake_case" $path) }}
{{- end }}
{{- if has $name (list %s) }}
{{- fail (printf "%%s: alerts/slos.yaml has an SLO of that name" $path) }}
{{- end }}
{{- if not (kindIs "map" $x) }}
{{- fail (printf "%%s: must hold from, alert, title and matchers" $path) }}
{{- end }}
{{- if not (and (kindIs "string" $x.alert) (regexMatch %s $x.alert) (hasPrefix "Podslo" $x.alert)) }}
{{- fail (printf "%%s.alert: %%s is not a CamelCase name starting with Podslo" $path (toJson $x.alert)) }}
{{- end }}
{{- if has $x.alert $alerts }}
{{- fail (printf "%%s.alert: %%s is already an alert's name" $path $x.alert) }}
{{- end }}
{{- $alerts = append $alerts $x.alert }}
{{- if not (and (kindIs "string" $x.title) $x.title) }}
{{- fail (printf "%%s.title: must be a string, the SLO's name on dashboards and in alert summaries" $path) }}
{{- end }}
{{- if not (and (kindIs "slice" $x.matchers) $x.matchers) }}
{{- fail (printf "%%s.matchers: give the PromQL label matchers that narrow it, e.g. [runtime_class=\"kata\"]" $path) }}
{{- end }}
{{- range $x.matchers }}
{{- if not (and (kindIs "string" .) (regexMatch %s .)) }}
{{- fail (printf "%%s.matchers: %%s is not a PromQL label matcher such as runtime_class=\"runc\"" $path (toJson .)) }}
{{- end }}
{{- end }}`, quotedList(s.alertNames()), "`"+sloName.String()+"`", quotedList(builtin), "`"+alertName.String()+"`", "`"+labelMatcher.String()+"`")
	for i := range s.SLOs {
		slo := &s.SLOs[i]
		_, allowed, _ := sloFields(slo)
		cond := "else if"
		if i == 0 {
			cond = "if"
		}
		w(`{{- %s eq $x.from %q }}
{{- $s = merge (omit $x "from" "alert" "title" "matchers") (deepCopy (get $v.slos %q)) }}
{{- range $field, $_ := $s }}
{{- if not (has $field (list %s)) }}
{{- fail (printf "%%s.%%s: no such field; it has from, alert, title, matchers and %s" $path $field) }}
{{- end }}
{{- end }}`, cond, slo.Name, slo.Name, quotedList(allowed), englishList(allowed))
		sloBlock(w, slo)
	}
	w(`{{- else }}
{{- fail (printf "%%s.from: %%s is not an SLO of alerts/slos.yaml; they are %s" $path (toJson $x.from)) }}
{{- end }}
{{- $_ = set $d "name" $name }}
{{- $_ = set $d "alert" $x.alert }}
{{- $_ = set $d "title" $x.title }}
{{- $_ = set $d "from" $x.from }}
{{- $_ = set $d "matchers" (join "," $x.matchers) }}
{{- $_ = set $extras $name $d }}
{{- end }}`, strings.Join(builtin, ", "))
	w(`{{- toYaml $m }}
{{- end }}`)
	return []byte(b.String())
}

// longestWindow is the longest SLO window: the retention the rules need.
func (s *Spec) longestWindow() string {
	var longest time.Duration
	for _, slo := range s.SLOs {
		longest = max(longest, slo.window)
	}
	return modelDuration(longest)
}

// sloFields are the values an SLO must hold, those it may, and what it
// measures.
func sloFields(slo *SLO) (fields, allowed []string, what string) {
	if slo.Latency != nil {
		fields = []string{"objective", "threshold", "minEvents"}
		return fields, append(slices.Clone(fields), "classThresholds"), "of " + slo.Latency.Histogram
	}
	fields = []string{"objective", "minEvents"}
	return fields, fields, "of " + slo.Success.Successes + " and " + slo.Success.Failures
}

// sloBlock writes the template that checks the values $s of an SLO like
// slo (its kind, its window), named $path in messages, and derives $d
// from them: what the holes of its rules read.
func sloBlock(w func(string, ...any), slo *SLO) {
	w(`{{- if not (has (kindOf $s.objective) $numbers) }}
{{- fail (printf "%%s.objective: %%s is not a number" $path (toJson $s.objective)) }}
{{- end }}
{{- $o = float64 $s.objective }}
{{- if not (and (gt $o 0.0) (lt $o 100.0)) }}
{{- fail (printf "%%s.objective: %%v is not a percentage strictly between 0 and 100" $path $o) }}
{{- end }}
{{- if not (has (kindOf $s.minEvents) $numbers) }}
{{- fail (printf "%%s.minEvents: %%s is not a number" $path (toJson $s.minEvents)) }}
{{- end }}
{{- $n = float64 $s.minEvents }}
{{- if or (lt $n 1.0) (ne $n (floor $n)) }}
{{- fail (printf "%%s.minEvents: %%s is not a positive integer" $path (toJson $s.minEvents)) }}
{{- end }}`)
	for _, bw := range BurnWindows {
		if bw.Severity != "critical" {
			continue
		}
		// Validate's check: one bad event among minEvents must stay
		// below every paging threshold.
		w(`{{- $allowed = mulf %s (divf (subf 100 $o) 100) }}
{{- if gt (divf 1 $n) $allowed }}
{{- fail (printf "%%s.minEvents: %%v lets one bad event page through the %s/%s alert (1/%%v > %%.4g); use at least %%v" $path $n $n $allowed (ceil (divf 1 $allowed))) }}
{{- end }}`, formatFloat(bw.Factor(slo.window)), modelDuration(bw.Long), modelDuration(bw.Short))
	}
	w(`{{- $d = dict "objective" (printf "%%v" $o) "objectiveRatio" (printf "%%v" (divf $o 100)) "errorBudgetPercent" (printf "%%v" (round (subf 100 $o) 3)) "errorBudgetRatio" (printf "%%v" (divf (subf 100 $o) 100)) "minEvents" (printf "%%v" $n) }}`)
	for _, bw := range BurnWindows {
		w(`{{- $_ = set $d %q (printf "%%v" (round (mulf %s (subf 100 $o)) 3)) }}`, burnPercentKey(bw), formatFloat(bw.Factor(slo.window)))
	}
	if slo.Latency == nil {
		return
	}
	w(`{{- if not (and (kindIs "string" $s.threshold) (hasKey $le $s.threshold)) }}
{{- fail (printf "%%s.threshold: %%s is not a bucket bound of %s; the bounds are %s" $path (toJson $s.threshold)) }}
{{- end }}
{{- $_ = set $d "threshold" $s.threshold }}
{{- /* Classes of one label with a threshold of their own: a selector of the good buckets each, after that of every other class. */}}
{{- $classes = $s.classThresholds | default dict }}
{{- if not (kindIs "map" $classes) }}
{{- fail (printf "%%s.classThresholds: %%s is not a map of a class label to its classes' thresholds" $path (toJson $classes)) }}
{{- end }}
{{- if gt (len $classes) 1 }}
{{- fail (printf "%%s.classThresholds: %%s: give the classes of one label only, so that every pod has one threshold" $path (keys $classes | sortAlpha | join ", ")) }}
{{- end }}
{{- $default = get $le $s.threshold }}
{{- $own = list }}
{{- $ownText = list }}
{{- range $label, $byClass := $classes }}
{{- if not (has $label (list %s)) }}
{{- fail (printf "%%s.classThresholds: %%s is not one of %s" $path (toJson $label)) }}
{{- end }}
{{- if not (and (kindIs "map" $byClass) $byClass) }}
{{- fail (printf "%%s.classThresholds.%%s: give at least one class and its threshold" $path $label) }}
{{- end }}
{{- range $class, $t := $byClass }}
{{- if not (regexMatch %s $class) }}
{{- fail (printf "%%s.classThresholds.%%s.%%s: %%s is not the name of a class (a DNS subdomain name, or none)" $path $label $class (toJson $class)) }}
{{- end }}
{{- if not (and (kindIs "string" $t) (hasKey $le $t)) }}
{{- fail (printf "%%s.classThresholds.%%s.%%s: %%s is not a bucket bound of %s" $path $label $class (toJson $t)) }}
{{- end }}
{{- $default = printf "%%s,%%s!=%%s" $default $label (quote $class) }}
{{- $own = append $own (printf "%%s=%%s,%%s" $label (quote $class) (get $le $t)) }}
{{- $ownText = append $ownText (printf "%%s for %%s %%s" $t $label $class) }}
{{- end }}
{{- end }}
{{- $_ = set $d "good" (prepend $own $default) }}
{{- $_ = set $d "thresholdText" $s.threshold }}
{{- if $ownText }}
{{- $_ = set $d "thresholdText" (printf "%%s (%%s)" $s.threshold (join ", " $ownText)) }}
{{- end }}`, slo.Latency.Histogram, strings.Join(bucketDurations(), ", "),
		quotedList(ClassLabels), strings.Join(ClassLabels, ", "),
		"`"+className.String()+"`", slo.Latency.Histogram)
}

// leTable is the template dict of each threshold a chart user may write
// (500ms, 5s, 1m, 60s, ...) to the matcher of its bucket.
func leTable() string {
	var entries []string
	seen := map[string]bool{}
	for _, bound := range Buckets {
		d := time.Duration(bound * float64(time.Second))
		spellings := []string{modelDuration(d)}
		if d >= time.Second && d%time.Second == 0 {
			spellings = append(spellings, strconv.Itoa(int(d/time.Second))+"s")
		}
		if d >= time.Minute && d%time.Minute == 0 {
			spellings = append(spellings, strconv.Itoa(int(d/time.Minute))+"m")
		}
		for _, sp := range spellings {
			if !seen[sp] {
				seen[sp] = true
				entries = append(entries, strconv.Quote(sp)+" `"+LeMatcher(bound)+"`")
			}
		}
	}
	return strings.Join(entries, " ")
}

func bucketDurations() []string {
	var out []string
	for _, bound := range Buckets {
		out = append(out, modelDuration(time.Duration(bound*float64(time.Second))))
	}
	return out
}

func quotedList(items []string) string {
	var q []string
	for _, it := range items {
		q = append(q, strconv.Quote(it))
	}
	return strings.Join(q, " ")
}

func englishList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// The generated monitoring section of the chart's values.yaml lies
// between these lines; the rest of the file is the chart's own.
const (
	valuesBegin = "# BEGIN monitoring: generated by go generate ./alerts from alerts/slos.yaml; edit slos.yaml and run make mixin."
	valuesEnd   = "# END monitoring"
)

// ErrNoValuesSection is returned by ReplaceValuesSection for a values.yaml
// without the marker lines of the generated section.
var ErrNoValuesSection = errors.New("no generated monitoring section: add the lines " + strconv.Quote(valuesBegin) + " and " + strconv.Quote(valuesEnd))

// ReplaceValuesSection puts section between the marker lines of values.
func ReplaceValuesSection(values, section []byte) ([]byte, error) {
	begin := bytes.Index(values, []byte(valuesBegin+"\n"))
	end := bytes.Index(values, []byte(valuesEnd+"\n"))
	if begin < 0 || end < begin {
		return nil, ErrNoValuesSection
	}
	var b bytes.Buffer
	b.Write(values[:begin])
	b.Write(section)
	b.Write(values[end+len(valuesEnd)+1:])
	return b.Bytes(), nil
}

// ValuesSection renders the monitoring section of the chart's values.yaml,
// markers included: the defaults are those of s.
func (s *Spec) ValuesSection() []byte {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	c := s.Config
	w("%s", valuesBegin)
	w(`# The monitoring mixin: the rules and alerts as PrometheusRule objects (they
# need the Prometheus Operator's CRDs), the Grafana dashboards as ConfigMaps.
# Set any of it at install time; a bad value fails the rendering by name.
monitoring:
  rules:
    # The PrometheusRule of the recording rules: error ratios and event
    # counts per class, which the alerts and the dashboards read.
    enabled: true
  alerts:
    # The PrometheusRule of the burn-rate and health alerts.
    enabled: true
  # Extra metadata of both PrometheusRule objects. A Prometheus picks rules
  # by label (its ruleSelector): kube-prometheus-stack's wants
  # release: <its release name>.
  prometheusRule:
    labels: {}
    annotations: {}
  dashboards:
    # One ConfigMap per dashboard, for the Grafana sidecar.
    enabled: true
    # The label the sidecar watches, and its value (kube-prometheus-stack:
    # grafana.sidecar.dashboards.label and labelValue).
    label: grafana_dashboard
    labelValue: "1"
    # The ConfigMaps' namespace, where the sidecar searches; empty: the
    # release's.
    namespace: ""
    labels: {}
    # e.g. grafana_folder: podslo, with the sidecar's folderAnnotation.
    annotations: {}
  # From here on, the defaults are those of alerts/slos.yaml.
  #
  # The label that tells clusters apart where one Prometheus or Thanos sees
  # several; every rule keeps it, and the dashboards filter on it.
  clusterLabel: %s
  # When set, every alert carries clusterLabel with this value: for a
  # Prometheus whose series carry no cluster label, sending alerts to an
  # Alertmanager that other clusters share. It overrides the series' own
  # label: leave it empty where they carry one (Thanos, external labels of
  # a remote-write receiver).
  cluster: %s
  # Label matchers, without braces, of the exporter's and the agent's scrape
  # jobs; a cluster matcher may join them (job="podslo-exporter",cluster="a").
  # An empty agentSelector, or agent.enabled false, leaves out the agent's
  # alerts. PodsloAgentDownOnNode, and PodsloExporterInstanceDown per node,
  # name the node from the targets' node label (a relabeling of
  # __meta_kubernetes_pod_node_name, as the chart's PodMonitors do).
  exporterSelector: %s
  agentSelector: %s
  # docs/runbooks.md as served to whoever is paged; each alert links to its
  # section.
  runbookURL: %s
  # Your Grafana: the alerts' dashboard_url annotations start with it.
  grafanaURL: %s
  # Labels added to every alert, for your Alertmanager to route on (e.g.
  # team: platform). Refused: clusterLabel, the labels the alerts set
  # themselves:
  #   %s;
  # and those some alerts carry from their series:
  #   %s.
  alertLabels: %s
  # Alerts to leave out, by name, e.g. [PodsloPodWatchNotCurrent]. The
  # alerts:
  #   %s.
  disabledAlerts: %s
  # Each SLO of alerts/slos.yaml by name: its objective (percent of good
  # events); the threshold of a latency SLO, which must be a bucket bound:
  #   %s;
  # minEvents, the events an alert's long window must hold before it
  # may fire (the rendering fails when one bad event would page); and
  # classThresholds, the thresholds of the classes of one label that have
  # one of their own, e.g. {runtime_class: {kata: 20s}}: a kata sandbox is
  # good within 20s, any other within the threshold.
  slos:`, yamlString(c.ClusterLabel), yamlString(c.Cluster), yamlString(c.ExporterSelector), yamlString(c.AgentSelector),
		yamlString(c.RunbookURL), yamlString(c.GrafanaURL), strings.Join(AlertLabels, ", "), strings.Join(SeriesLabels, ", "), flowMap(c.AlertLabels),
		wrapAlertNames(s.alertNames()), flowList(c.DisabledAlerts), wrapList(bucketDurations()))
	for i := range s.SLOs {
		slo := &s.SLOs[i]
		w("    # %s: %s%% %s per %s.", slo.Title, printNumber(slo.Objective), goodPhrase(slo), modelDuration(slo.window))
		w("    %s:", slo.Name)
		w("      objective: %s", printNumber(slo.Objective))
		if slo.Latency != nil {
			w("      threshold: %s", yamlString(slo.Latency.Threshold))
		}
		w("      minEvents: %d", slo.MinEvents)
		if slo.Latency != nil {
			w("      classThresholds: %s", classThresholdsYAML(slo.Latency.ClassThresholds))
		}
	}
	w(`  # More SLOs, each made from one of the above (from): its SLI, classes,
  # window and dashboard, narrowed by PromQL label matchers of its own, with
  # its own alert (a Podslo... name), title, and numbers (those not given
  # are the ones of the SLO it is made from). E.g. a looser objective for
  # kata, beside sandbox_creation_latency (whose classThresholds can hold
  # kata to 20s):
  #   kata_sandbox_creation_latency:
  #     from: sandbox_creation_latency
  #     alert: PodsloKataSandboxCreationLatencyBudgetBurn
  #     title: kata sandbox creation latency
  #     matchers: ['runtime_class="kata"']
  #     objective: 95
  #     threshold: 20s
  # Its recording rules and alerts are those of the SLO it is made from;
  # the dashboards show the SLOs above only, and
  # sort(slo:podslo_period_error_budget_remaining:ratio) lists them all.
  extraSLOs: {}`)
	w("%s", valuesEnd)
	return []byte(b.String())
}

// classThresholdsYAML prints an SLO's classThresholds as a YAML flow map.
func classThresholdsYAML(m map[string]map[string]string) string {
	var labels []string
	for _, label := range slices.Sorted(maps.Keys(m)) {
		var classes []string
		for _, class := range slices.Sorted(maps.Keys(m[label])) {
			classes = append(classes, yamlString(class)+": "+yamlString(m[label][class]))
		}
		labels = append(labels, label+": {"+strings.Join(classes, ", ")+"}")
	}
	return "{" + strings.Join(labels, ", ") + "}"
}

func goodPhrase(slo *SLO) string {
	if slo.Latency != nil {
		return slo.Events + " within " + slo.ThresholdText()
	}
	return slo.Events + " not " + slo.Success.Failure
}

// wrapList joins the bucket bounds, breaking the line of the comment they
// are in now and then.
func wrapList(items []string) string {
	var lines []string
	for i := 0; i < len(items); i += 9 {
		lines = append(lines, strings.Join(items[i:min(i+9, len(items))], ", "))
	}
	return strings.Join(lines, ",\n  #   ")
}

var plainValue = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_./:-]*$`)

// yamlString writes s as a YAML string: plain when that reads back as the
// same string, else in quotes.
func yamlString(s string) string {
	switch strings.ToLower(s) {
	case "":
		return `""`
	case "y", "n", "yes", "no", "on", "off", "true", "false", "null":
		return "'" + s + "'"
	}
	// Not a number, nor YAML 1.1's 1_000 or 1:30 (sexagesimal).
	_, isNumber := strconv.ParseFloat(strings.NewReplacer("_", "", ":", "").Replace(s), 64)
	if plainValue.MatchString(s) && isNumber != nil {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// ChartFiles renders every chart file the alerts generate, by path under
// chartDir: the rule templates, templates/_monitoring.tpl, and values.yaml
// with its monitoring section regenerated.
func ChartFiles(spec *Spec, source, chartDir string) (map[string][]byte, error) {
	valuesPath := filepath.Join(chartDir, "values.yaml")
	values, err := os.ReadFile(valuesPath)
	if err != nil {
		return nil, err
	}
	values, err = ReplaceValuesSection(values, spec.ValuesSection())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", valuesPath, err)
	}
	rules, alerts := spec.ChartRules(source)
	templates := filepath.Join(chartDir, "templates")
	return map[string][]byte{
		valuesPath: values,
		filepath.Join(templates, "_monitoring.tpl"):            spec.MonitoringTemplate(source),
		filepath.Join(templates, "prometheusrule-rules.yaml"):  rules,
		filepath.Join(templates, "prometheusrule-alerts.yaml"): alerts,
	}, nil
}

// flowMap writes m as a YAML flow mapping, keys sorted.
func flowMap(m map[string]string) string {
	var entries []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		entries = append(entries, yamlString(k)+": "+yamlString(m[k]))
	}
	return "{" + strings.Join(entries, ", ") + "}"
}

// flowList writes items as a YAML flow sequence.
func flowList(items []string) string {
	var q []string
	for _, it := range items {
		q = append(q, yamlString(it))
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// wrapAlertNames lists alert names two to a comment line.
func wrapAlertNames(names []string) string {
	var lines []string
	for i := 0; i < len(names); i += 2 {
		lines = append(lines, strings.Join(names[i:min(i+2, len(names))], ", "))
	}
	return strings.Join(lines, ",\n  #   ")
}
