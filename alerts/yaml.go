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
	for _, g := range f.Groups {
		fmt.Fprintf(&b, "  - name: %s\n", quote(g.Name))
		if g.Interval != "" {
			fmt.Fprintf(&b, "    interval: %s\n", g.Interval)
		}
		b.WriteString("    rules:\n")
		for _, r := range g.Rules {
			if r.Record != "" {
				fmt.Fprintf(&b, "      - record: %s\n", r.Record)
			} else {
				fmt.Fprintf(&b, "      - alert: %s\n", r.Alert)
			}
			b.WriteString("        expr: |-\n")
			for _, line := range strings.Split(r.Expr, "\n") {
				fmt.Fprintf(&b, "          %s\n", line)
			}
			if r.For != "" {
				fmt.Fprintf(&b, "        for: %s\n", r.For)
			}
			writeMap(&b, "labels", r.Labels)
			writeMap(&b, "annotations", r.Annotations)
		}
	}
	return b.Bytes()
}

func writeMap(b *bytes.Buffer, name string, m map[string]string) {
	if len(m) == 0 {
		return
	}
	fmt.Fprintf(b, "        %s:\n", name)
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(b, "          %s: %s\n", key(k), quote(m[k]))
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
