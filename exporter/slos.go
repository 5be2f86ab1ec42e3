package exporter

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/podslo/podslo/alerts"
	"github.com/podslo/podslo/internal/classtable"
	"github.com/podslo/podslo/internal/slostatus"
	"github.com/podslo/podslo/scope"
	"github.com/podslo/podslo/store"
)

// windowsSinceSetting is when this state began keeping windowed counts: a
// window reaching further back holds less than its length, and the page
// says so.
const windowsSinceSetting = "windows-since"

// windowsSince reads the state's windowsSinceSetting, or records now as it
// when the state has none (a new state, or one of a release without
// windows). A failed write is logged by the caller and tried again at the
// next start: until then the page dates the windows from now.
func windowsSince(st *store.Store, now time.Time) (time.Time, error) {
	if b, ok := st.Setting(windowsSinceSetting); ok {
		if sec, err := strconv.ParseInt(string(b), 10, 64); err == nil {
			return time.Unix(sec, 0), nil
		}
	}
	return now, st.SetSetting(windowsSinceSetting, []byte(strconv.FormatInt(now.Unix(), 10)))
}

// source describes this exporter in its report: which pods it watches.
func source(sc scope.Scope, since time.Time) slostatus.Source {
	var parts []string
	if len(sc.Namespaces) > 0 {
		parts = append(parts, "namespaces "+strings.Join(sc.Namespaces, ", "))
	}
	if len(sc.NamespacesDenylist) > 0 {
		parts = append(parts, "all namespaces but "+strings.Join(sc.NamespacesDenylist, ", "))
	}
	if sc.Node != "" {
		parts = append(parts, "the pods of node "+sc.Node)
	}
	if sc.Sharded() {
		parts = append(parts, fmt.Sprintf("shard %d of %d (0-based)", sc.Shard, sc.TotalShards))
	}
	src := slostatus.Source{Scope: "all pods", Since: since}
	if len(parts) > 0 {
		src.Scope, src.Partial = strings.Join(parts, "; "), true
	}
	return src
}

// sloPage is the SLO section of the landing page, ready to render: every
// number formatted, every chart laid out.
type sloPage struct {
	Rows        []sloRow
	Windows     []string // the long alert windows shown as burn rates
	Source      slostatus.Source
	Since       string
	Definitions map[string]string
	Breached    int
}

type sloRow struct {
	Title, Name, Label, Class string
	Objective                 string
	Window                    string
	Attainment                string
	Events                    uint64
	Budget                    string
	BudgetClass               string // "ok", "low" or "out", for the cell's colour
	Burn                      []string
	Firing                    string
	Threshold                 string
	Quantiles                 string
	Precision                 string
	BudgetChart               *lineChart
	Distribution              *barChart
}

// Chart geometry, in SVG user units.
const (
	chartWidth  = 150
	chartHeight = 28
)

type lineChart struct {
	Points string
	// LastX and LastY mark today's budget, the line's end.
	LastX, LastY float64
	// Zero is the y of budget 0: under it the budget is overspent.
	Zero  float64
	Label string
}

type barChart struct {
	Bars []bar
	// Threshold is the x of the class's threshold, where good events end.
	Threshold float64
	Label     string
}

type bar struct {
	X, Y, W, H float64
	Good       bool
}

// newSLOPage evaluates the report and lays out the section.
func newSLOPage(r slostatus.Report) sloPage {
	p := sloPage{Definitions: slostatus.Definitions}
	if len(r.Sources) > 0 {
		p.Source = r.Sources[0]
		p.Since = p.Source.Since.UTC().Format(time.RFC3339)
	}
	for _, bw := range alerts.BurnWindows {
		p.Windows = append(p.Windows, model.Duration(bw.Long).String())
	}
	for _, st := range slostatus.Evaluate(&r) {
		row := sloRow{
			Title: st.Title, Name: st.Name, Label: st.Label, Class: st.ClassName,
			Objective: formatPercent(st.Objective), Window: st.Window,
			Attainment: formatPercent(st.Attainment), Events: st.Events,
			Budget: formatPercent(st.BudgetLeft), BudgetClass: budgetClass(st.BudgetLeft),
			Firing: strings.Join(st.Firing, ", "),
		}
		if row.Firing == "" {
			row.Firing = "none"
		}
		if st.Breached {
			p.Breached++
		}
		for _, w := range p.Windows {
			burn, ok := st.Burn[w]
			if !ok {
				burn = math.NaN()
			}
			row.Burn = append(row.Burn, formatBurn(burn))
		}
		row.BudgetChart = budgetChart(st.BudgetByDay)
		if st.SLO.Bounds != nil {
			row.Threshold = classtable.FormatSeconds(st.Threshold)
			row.Quantiles = quantiles(st.SLO.Bounds, st.Class.Distribution)
			row.Distribution = distributionChart(st.SLO.Bounds, st.Class.Distribution, st.Threshold)
			row.Precision = precision(st.Class.Precise, st.Events)
		}
		p.Rows = append(p.Rows, row)
	}
	return p
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
		lo, hi, ok := slostatus.Quantile(bounds, dist, q.q)
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

func precision(precise, events uint64) string {
	switch {
	case events == 0:
		return ""
	case precise == events:
		return "all measured in milliseconds"
	case precise == 0:
		return "all measured in whole seconds"
	}
	return fmt.Sprintf("%d of %d measured in milliseconds, the rest in whole seconds", precise, events)
}

// budgetChart draws the budget left at the end of each day of the window,
// from -100% (bottom) to 100% (top); days before the first event are left
// out.
func budgetChart(days []float64) *lineChart {
	y := func(v float64) float64 {
		v = min(max(v, -100), 100)
		return round1(chartHeight / 2 * (1 - v/100))
	}
	var pts []string
	c := &lineChart{Zero: y(0), Label: fmt.Sprintf("Error budget left at the end of each of the last %d days, from -100%% to 100%%", len(days))}
	// Inset by the marker's radius, so that it shows whole at either end.
	const inset = 3
	step := float64(chartWidth-2*inset) / float64(max(len(days)-1, 1))
	for i, v := range days {
		if math.IsNaN(v) {
			continue
		}
		c.LastX, c.LastY = round1(inset+float64(i)*step), min(max(y(v), inset), chartHeight-inset)
		pts = append(pts, strconv.FormatFloat(c.LastX, 'f', -1, 64)+","+strconv.FormatFloat(c.LastY, 'f', -1, 64))
	}
	if len(pts) == 0 {
		return nil
	}
	c.Points = strings.Join(pts, " ")
	return c
}

// distributionChart draws the events per classic bucket, one bar each, the
// buckets within the threshold apart from those beyond it.
func distributionChart(bounds []float64, dist []uint64, threshold float64) *barChart {
	var most uint64
	for _, n := range dist {
		most = max(most, n)
	}
	if most == 0 {
		return nil
	}
	w := float64(chartWidth) / float64(len(dist))
	c := &barChart{Label: "Events per latency bucket over the window; the line is the threshold"}
	for i, n := range dist {
		good := i < len(bounds) && bounds[i] <= threshold
		if good {
			c.Threshold = round1(float64(i+1) * w)
		}
		if n == 0 {
			continue
		}
		h := round1(math.Max(1, float64(n)/float64(most)*chartHeight))
		c.Bars = append(c.Bars, bar{X: round1(float64(i) * w), Y: round1(chartHeight - h), W: round1(w - 1), H: h, Good: good})
	}
	return c
}

func round1(v float64) float64 { return math.Round(v*10) / 10 }
