package exporter

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

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
	// In whole seconds, as it is kept: this start says what later ones do.
	now = time.Unix(now.Unix(), 0)
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
	// Summary is the one-line answer, as `podslo report` gives it.
	Summary string
}

type sloRow struct {
	slostatus.Row
	BudgetChart  *lineChart
	Distribution *barChart
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
	p.Windows = slostatus.BurnWindows()
	statuses := slostatus.Evaluate(&r)
	p.Summary = slostatus.Summary(statuses)
	for _, st := range statuses {
		row := sloRow{Row: slostatus.NewRow(st), BudgetChart: budgetChart(st.BudgetByDay)}
		if st.Breached {
			p.Breached++
		}
		if st.SLO.Bounds != nil {
			row.Distribution = distributionChart(st.SLO.Bounds, st.Class.Distribution, st.Threshold)
		}
		p.Rows = append(p.Rows, row)
	}
	return p
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
