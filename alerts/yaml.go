package alerts

import (
	"bytes"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// YAML renders the rule file under a comment header. It is written by hand
// rather than by a YAML library so that every expression is a readable
// block scalar and map keys come out sorted; TestYAMLRoundTrip decodes the
// output back and compares it with f.
func (f RuleFile) YAML(header string) []byte {
	var b bytes.Buffer
	for _, line := range strings.Split(strings.TrimSpace(header), "\n") {
		fmt.Fprintln(&b, strings.TrimRight("# "+line, " "))
	}
	b.WriteString("groups:\n")
	f.writeGroups(&b, "", false)
	return b.Bytes()
}

// writeGroups writes the groups, each line prefixed by indent. For the
// chart (ForChart) the holes become template actions (HelmTemplate), and
// every alert carries the cluster label while the chart's cluster value is
// set.
func (f RuleFile) writeGroups(b *bytes.Buffer, indent string, chart bool) {
	raw, quoted := func(s string) string { return s }, quote
	if chart {
		raw = func(s string) string { return HelmTemplate(s, false) }
		quoted = func(s string) string { return HelmTemplate(quote(s), true) }
	}
	for _, g := range f.Groups {
		b.WriteString(g.before)
		gcond := ""
		if chart {
			gcond = groupPresent(g)
		}
		if gcond != "" {
			fmt.Fprintf(b, "{{- if %s }}\n", gcond)
		}
		fmt.Fprintf(b, "%s  - name: %s\n", indent, quoted(g.Name))
		if g.Interval != "" {
			fmt.Fprintf(b, "%s    interval: %s\n", indent, g.Interval)
		}
		fmt.Fprintf(b, "%s    rules:\n", indent)
		for _, r := range g.Rules {
			cond := r.cond
			if chart && r.Alert != "" {
				cond = rulePresent(r)
			}
			if cond != "" {
				fmt.Fprintf(b, "{{- if %s }}\n", cond)
			}
			if r.Record != "" {
				fmt.Fprintf(b, "%s      - record: %s\n", indent, raw(r.Record))
			} else {
				fmt.Fprintf(b, "%s      - alert: %s\n", indent, raw(r.Alert))
			}
			fmt.Fprintf(b, "%s        expr: |-\n", indent)
			for _, line := range strings.Split(r.Expr, "\n") {
				fmt.Fprintf(b, "%s          %s\n", indent, raw(line))
			}
			if r.For != "" {
				fmt.Fprintf(b, "%s        for: %s\n", indent, r.For)
			}
			writeMap(b, indent, "labels", r.Labels, quoted)
			if chart && r.Alert != "" {
				fmt.Fprintf(b, "{{- if $m.cluster }}\n%s          {{ $m.clusterLabel }}: {{ $m.cluster | toJson }}\n{{- end }}\n", indent)
				fmt.Fprintf(b, "{{- range $k, $v := $m.alertLabels }}\n%s          {{ $k }}: {{ $v | toJson }}\n{{- end }}\n", indent)
			}
			writeMap(b, indent, "annotations", r.Annotations, quoted)
			if cond != "" {
				b.WriteString("{{- end }}\n")
			}
		}
		if gcond != "" {
			b.WriteString("{{- end }}\n")
		}
		b.WriteString(g.after)
	}
}

// rulePresent is the chart's condition for an alert: not disabled
// (monitoring.disabledAlerts), and its own condition.
func rulePresent(r Rule) string {
	if hole.MatchString(r.Alert) {
		// An extra SLO's alert: the values that define it can drop it.
		return r.cond
	}
	c := fmt.Sprintf("not (has %q $m.disabledAlerts)", r.Alert)
	if r.cond != "" {
		c = fmt.Sprintf("and %s (%s)", r.cond, c)
	}
	return c
}

// groupPresent is the chart's condition for a group of alerts: one of
// them is present, since a group without rules is not one. Empty for a
// group of recording rules.
func groupPresent(g RuleGroup) string {
	var conds []string
	for _, r := range g.Rules {
		if r.Alert == "" || rulePresent(r) == "" {
			return ""
		}
		if c := "(" + rulePresent(r) + ")"; !slices.Contains(conds, c) {
			conds = append(conds, c)
		}
	}
	if len(conds) == 1 {
		return conds[0][1 : len(conds[0])-1]
	}
	return "or " + strings.Join(conds, " ")
}

func writeMap(b *bytes.Buffer, indent, name string, m map[string]string, quoted func(string) string) {
	if len(m) == 0 {
		return
	}
	fmt.Fprintf(b, "%s        %s:\n", indent, name)
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(b, "%s          %s: %s\n", indent, key(k), quoted(m[k]))
	}
}

var plainKey = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// key leaves a label name plain unless YAML 1.1, which Prometheus 2 parses
// with, would read it as a boolean or a null.
func key(k string) string {
	switch strings.ToLower(k) {
	case "y", "n", "yes", "no", "on", "off", "true", "false", "null":
		return quote(k)
	}
	if !plainKey.MatchString(k) {
		return quote(k)
	}
	return k
}

// quote writes s as a double-quoted YAML scalar. Go's escapes (\n, \t, \",
// \\, \xNN, \uNNNN) are all valid YAML escapes too.
func quote(s string) string { return strconv.Quote(s) }
