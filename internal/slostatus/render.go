package slostatus

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/prometheus/common/model"

	"github.com/podslo/podslo/alerts"
	"github.com/podslo/podslo/internal/classtable"
)

// Row is a Status as the page and the report show it: every number
// formatted once, here.
type Row struct {
	Title, Name, Label, Class string
	// Cluster is the cluster label's value, from a Prometheus of several.
	Cluster string
	// Objective is "99.00% in 30d".
	Objective  string
	Attainment string
	Events     string
	Budget     string
	// BudgetClass is "ok", "low" (under 25% left), "out" (overspent) or
	// "none" (no events).
	BudgetClass string
	// Burn are the burn rates over BurnWindows' long windows, in order.
	Burn []string
	// Firing names the alerts that would fire, or "none".
	Firing string
	// Threshold, Quantiles and Precision are a latency SLO's; empty for a
	// success SLO.
	Threshold, Quantiles, Precision string
}

// BurnWindows are the windows whose burn rates a Row shows: the alerts'
// long ones.
func BurnWindows() []string {
	var out []string
	for _, bw := range alerts.BurnWindows {
		out = append(out, model.Duration(bw.Long).String())
	}
	return out
}

// NewRow formats st.
func NewRow(st Status) Row {
	r := Row{
		Title: st.Title, Name: st.Name, Label: st.Label, Class: st.ClassName, Cluster: st.Cluster,
		Objective:  formatPercent(st.Objective) + " in " + st.Window,
		Attainment: formatPercent(st.Attainment), Events: formatCount(st.Events),
		Budget: formatPercent(st.BudgetLeft), BudgetClass: budgetClass(st.BudgetLeft),
		Firing: firingText(st.Firing),
	}
	for _, w := range BurnWindows() {
		burn, ok := st.Burn[w]
		if !ok {
			burn = math.NaN()
		}
		r.Burn = append(r.Burn, formatBurn(burn))
	}
	if st.SLO.Bounds != nil {
		r.Threshold = classtable.FormatSeconds(st.Threshold)
		r.Quantiles = quantiles(st.SLO.Bounds, st.Class.Distribution)
		r.Precision = precision(st.Class.Precise, st.Events)
	}
	return r
}

// firingText names the alerts that would fire, shortly: the pages and the
// tickets, by their windows ("page 1h/5m, 6h/30m; ticket 1d/2h").
func firingText(firing []string) string {
	var pages, tickets []string
	for _, f := range firing {
		severity, windows, _ := strings.Cut(f, " ")
		if severity == "critical" {
			pages = append(pages, windows)
		} else {
			tickets = append(tickets, windows)
		}
	}
	var out []string
	if len(pages) > 0 {
		out = append(out, "page "+strings.Join(pages, ", "))
	}
	if len(tickets) > 0 {
		out = append(out, "ticket "+strings.Join(tickets, ", "))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, "; ")
}

// Latency is a latency SLO's threshold, quantiles and precision in one
// phrase; empty for a success SLO.
func (r Row) Latency() string {
	if r.Threshold == "" {
		return ""
	}
	parts := []string{"threshold " + r.Threshold, r.Quantiles}
	if r.Precision != "" {
		parts = append(parts, r.Precision)
	}
	return strings.Join(parts, "; ")
}

// formatCount writes a count of events: whole from an exporter, and a
// Prometheus' extrapolated increase to a tenth.
func formatCount(v float64) string {
	if v == math.Trunc(v) {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 1, 64)
}

// ClassText is the class as the report names it: its label, its value and,
// from a Prometheus of several clusters, its cluster.
func (r Row) ClassText() string {
	if r.Cluster == "" {
		return r.Label + " " + r.Class
	}
	return r.Label + " " + r.Class + " (cluster " + r.Cluster + ")"
}

func formatPercent(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 2, 64) + "%"
}

func formatBurn(v float64) string {
	if math.IsNaN(v) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func budgetClass(v float64) string {
	switch {
	case math.IsNaN(v):
		return "none"
	case v < 0:
		return "out"
	case v < 25:
		return "low"
	}
	return "ok"
}

// quantiles names the bounds the median and the 99th percentile lie
// between: the precision the classic buckets have.
func quantiles(bounds []float64, dist []uint64) string {
	var out []string
	for _, q := range []struct {
		name string
		q    float64
	}{{"p50", 0.5}, {"p99", 0.99}} {
		lo, hi, ok := Quantile(bounds, dist, q.q)
		if !ok {
			return "-"
		}
		switch {
		case math.IsInf(hi, 1):
			out = append(out, q.name+" > "+classtable.FormatSeconds(lo))
		case lo == 0:
			out = append(out, q.name+" ≤ "+classtable.FormatSeconds(hi))
		default:
			out = append(out, q.name+" in ("+classtable.FormatSeconds(lo)+", "+classtable.FormatSeconds(hi)+"]")
		}
	}
	return strings.Join(out, ", ")
}

func precision(precise uint64, events float64) string {
	switch {
	case events == 0:
		return ""
	case float64(precise) == events:
		return "all measured in ms"
	case precise == 0:
		return "all in whole seconds"
	}
	return fmt.Sprintf("%d of %s measured in ms", precise, formatCount(events))
}

// Summary is the report's one-line answer.
func Summary(st []Status) string {
	n := 0
	for _, s := range st {
		if s.Breached {
			n++
		}
	}
	switch n {
	case 0:
		return "No SLO has spent its error budget."
	case 1:
		return "1 SLO and class pair has spent its error budget."
	}
	return fmt.Sprintf("%d SLO and class pairs have spent their error budget.", n)
}

// DefinitionOrder lists Definitions in the order they are printed.
var DefinitionOrder = []struct{ Key, Name string }{
	{"objective", "objective"}, {"attainment", "attainment"}, {"events", "events"},
	{"budget", "budget left"}, {"burn", "burn"}, {"alert", "alerts firing"}, {"quantile", "latency"},
}

func sourcesText(r *Report) string {
	var scopes []string
	var since time.Time
	for _, s := range r.Sources {
		scope := s.Scope
		if s.URL != "" {
			scope += " at " + s.URL
		}
		scopes = append(scopes, scope)
		if s.Since.After(since) {
			// The latest start bounds what every window of the sum holds.
			since = s.Since
		}
	}
	exporters := "1 exporter"
	if len(r.Sources) != 1 {
		exporters = fmt.Sprintf("%d exporters", len(r.Sources))
	}
	return fmt.Sprintf("%s (%s), counting since %s, read at %s", exporters, strings.Join(scopes, "; "),
		since.UTC().Format(time.RFC3339), r.Generated.UTC().Format(time.RFC3339))
}

// WriteTable writes the report for a terminal: the answer, a table, the
// definitions.
func WriteTable(w io.Writer, r *Report, st []Status) error {
	fmt.Fprintf(w, "%s\n%s\n\n", Summary(st), sourcesText(r))
	if err := writeRows(w, st); err != nil {
		return err
	}
	fmt.Fprintln(w)
	for _, d := range DefinitionOrder {
		fmt.Fprintf(w, "%s: %s\n", d.Name, Definitions[d.Key])
	}
	return nil
}

// WriteWorst writes the answer and the n worst rows, for a screen that
// has room for no more (`podslo demo`'s live view).
func WriteWorst(w io.Writer, st []Status, n int) error {
	fmt.Fprintln(w, Summary(st))
	if len(st) > n {
		if err := writeRows(w, st[:n]); err != nil {
			return err
		}
		_, err := fmt.Fprintf(w, "... and %d more rows\n", len(st)-n)
		return err
	}
	return writeRows(w, st)
}

// writeRows writes the table of the statuses, aligned.
func writeRows(w io.Writer, st []Status) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := []string{"SLO", "CLASS", "OBJECTIVE", "ATTAINMENT", "EVENTS", "BUDGET LEFT"}
	for _, b := range BurnWindows() {
		header = append(header, "BURN "+b)
	}
	header = append(header, "ALERTS FIRING", "LATENCY")
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, s := range st {
		row := NewRow(s)
		cells := []string{row.Title, row.ClassText(), row.Objective, row.Attainment, row.Events, row.Budget}
		cells = append(cells, row.Burn...)
		cells = append(cells, row.Firing, row.Latency())
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write the report: %w", err)
	}
	return nil
}

// WriteMarkdown writes the report for a weekly review or a ticket.
func WriteMarkdown(w io.Writer, r *Report, st []Status) error {
	fmt.Fprintf(w, "## Pod lifecycle SLOs\n\n**%s** %s.\n\n", Summary(st), sourcesText(r))
	header := []string{"SLO", "class", "objective", "attainment", "events", "budget left"}
	for _, b := range BurnWindows() {
		header = append(header, "burn "+b)
	}
	header = append(header, "alerts firing", "latency")
	fmt.Fprintf(w, "| %s |\n|%s\n", strings.Join(header, " | "), strings.Repeat("---|", len(header)))
	cell := func(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ") }
	for _, s := range st {
		row := NewRow(s)
		budget := row.Budget
		if row.BudgetClass == "out" {
			budget = "**" + budget + "**"
		}
		cells := []string{cell(row.Title), "`" + cell(row.Label) + "` " + cell(strings.TrimPrefix(row.ClassText(), row.Label+" ")), row.Objective, row.Attainment, row.Events, budget}
		cells = append(cells, row.Burn...)
		cells = append(cells, row.Firing, cell(row.Latency()))
		fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | "))
	}
	fmt.Fprintln(w)
	for _, d := range DefinitionOrder {
		fmt.Fprintf(w, "- **%s**: %s\n", d.Name, Definitions[d.Key])
	}
	return nil
}

// statusJSON is a Status in the report's JSON: a number without data is
// null, and a quantile the pair of bounds it lies between.
type statusJSON struct {
	Status
	Attainment *float64            `json:"attainment"`
	BudgetLeft *float64            `json:"budgetLeft"`
	Burn       map[string]*float64 `json:"burn"`
	P50        *bounds             `json:"p50,omitempty"`
	P99        *bounds             `json:"p99,omitempty"`
}

type bounds struct {
	// Upper is null for the +Inf bucket.
	Lower float64  `json:"lowerSeconds"`
	Upper *float64 `json:"upperSeconds"`
}

// WriteJSON writes the report for scripts: the sources, whether any SLO is
// breached, and every status, worst first.
func WriteJSON(w io.Writer, r *Report, st []Status) error {
	out := struct {
		Generated time.Time    `json:"generated"`
		Sources   []Source     `json:"sources"`
		Breached  bool         `json:"breached"`
		Statuses  []statusJSON `json:"statuses"`
	}{Generated: r.Generated, Sources: r.Sources, Breached: Breached(st), Statuses: []statusJSON{}}
	number := func(v float64) *float64 {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
		return &v
	}
	for _, s := range st {
		j := statusJSON{Status: s, Attainment: number(s.Attainment), BudgetLeft: number(s.BudgetLeft), Burn: map[string]*float64{}}
		if j.Firing == nil {
			j.Firing = []string{}
		}
		for k, v := range s.Burn {
			j.Burn[k] = number(v)
		}
		if s.SLO.Bounds != nil {
			for _, q := range []struct {
				q    float64
				into **bounds
			}{{0.5, &j.P50}, {0.99, &j.P99}} {
				if lo, hi, ok := Quantile(s.SLO.Bounds, s.Class.Distribution, q.q); ok {
					*q.into = &bounds{Lower: lo, Upper: number(hi)}
				}
			}
		}
		out.Statuses = append(out.Statuses, j)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("write the report: %w", err)
	}
	return nil
}
