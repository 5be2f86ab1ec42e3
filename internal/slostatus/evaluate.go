package slostatus

import (
	"cmp"
	"math"
	"slices"
	"time"

	"github.com/prometheus/common/model"

	"github.com/podslo/podslo/alerts"
)

// Definitions are the one-line meanings of the numbers, shown beside or
// over them wherever they are shown: "error budget" is misread more than
// any other word of an SLO.
var Definitions = map[string]string{
	"objective":  "The share of events the SLO promises will be good, over its window.",
	"attainment": "The share of the window's events that were good: the SLO is met while attainment ≥ objective.",
	"events":     "How many events the window holds, good and bad.",
	"budget":     "Error budget left: the share of the bad events the objective allows over the window that are not yet spent. 100% = no bad event; 0% = exactly as many as allowed; below 0 = the SLO is missed.",
	"burn":       "Burn rate: how fast the budget is spent over that window; 1 spends exactly the budget in the SLO window, 14.4 spends 2% of a 30-day budget in one hour.",
	"alert":      "The burn-rate alerts that would fire now, by their long and short windows (a page is critical, a ticket a warning): both windows burn faster than the alert's rate and the long one holds at least minEvents events (its `for` aside).",
	"quantile":   "Read from the classic buckets: an event between two bounds is known only to lie between them, so a quantile is given as the bounds it lies between; \"measured in ms\" counts the events timed to the millisecond, the others to the second.",
}

// Status is one row of the view: an SLO for one class, evaluated.
type Status struct {
	SLO   *SLO   `json:"-"`
	Class *Class `json:"-"`
	// Name, Label and ClassName repeat the SLO's name, its label and the
	// class for the JSON output.
	Name      string  `json:"slo"`
	Title     string  `json:"title"`
	Label     string  `json:"label"`
	ClassName string  `json:"class"`
	Cluster   string  `json:"cluster,omitempty"`
	Objective float64 `json:"objective"`
	Window    string  `json:"window"`
	Threshold float64 `json:"thresholdSeconds,omitempty"`
	// Events, Good: over the SLO window.
	Events float64 `json:"events"`
	Good   float64 `json:"good"`
	// Attainment is Good/Events, in percent; NaN without events.
	Attainment float64 `json:"-"`
	// BudgetLeft is the share of the error budget not spent, in percent:
	// 100 without bad events, below 0 once the SLO is missed; NaN without
	// events.
	BudgetLeft float64 `json:"-"`
	// Burn is the burn rate over each alert window; NaN without events.
	Burn map[string]float64 `json:"-"`
	// Firing are the alerts that would fire, as "severity long/short".
	Firing []string `json:"firing"`
	// Breached: events in the window, and the budget is overspent.
	Breached bool `json:"breached"`
	// BudgetByDay is the budget left at the end of each day of the window,
	// counting only the window's events up to then (NaN before the first).
	BudgetByDay []float64 `json:"-"`
}

// Evaluate derives the status of every SLO and class of r, sorted by
// budget left, worst first; classes without events last, by name.
func Evaluate(r *Report) []Status {
	var out []Status
	for i := range r.SLOs {
		slo := &r.SLOs[i]
		spec := slo.alertSpec()
		for j := range slo.Classes {
			c := &slo.Classes[j]
			total := c.Windows[slo.Window]
			// In percent: 100 - 99 is exactly 1, where 1 - 0.99 is not
			// exactly 0.01.
			allowed := 100 - slo.Objective
			st := Status{
				SLO: slo, Class: c, Name: slo.Name, Title: slo.Title, Label: slo.Label, ClassName: c.Class, Cluster: c.Cluster,
				Objective: slo.Objective, Window: slo.Window, Threshold: c.ThresholdSeconds,
				Events: total.Total, Good: total.Good,
				Attainment: percent(total),
				BudgetLeft: budgetLeft(total, allowed),
				Burn:       map[string]float64{},
			}
			for w := range c.Windows {
				st.Burn[w] = 100 * c.errorRatio(w) / allowed
			}
			for w := range c.Ratios {
				st.Burn[w] = 100 * c.errorRatio(w) / allowed
			}
			for _, bw := range alerts.BurnWindows {
				long, short := model.Duration(bw.Long).String(), model.Duration(bw.Short).String()
				if spec.Fires(bw, c.errorRatio(long), c.errorRatio(short), c.Windows[long].Total) {
					st.Firing = append(st.Firing, bw.Severity+" "+model.Duration(bw.Long).String()+"/"+model.Duration(bw.Short).String())
				}
			}
			var sofar Counts
			for _, d := range c.Days {
				sofar.add(d)
				st.BudgetByDay = append(st.BudgetByDay, budgetLeft(sofar, allowed))
			}
			st.Breached = total.Total > 0 && st.BudgetLeft < 0
			out = append(out, st)
		}
	}
	slices.SortStableFunc(out, func(a, b Status) int {
		an, bn := math.IsNaN(a.BudgetLeft), math.IsNaN(b.BudgetLeft)
		switch {
		case an != bn:
			if an {
				return 1
			}
			return -1
		case !an && a.BudgetLeft != b.BudgetLeft:
			return cmp.Compare(a.BudgetLeft, b.BudgetLeft)
		}
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Label, b.Label), cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.ClassName, b.ClassName))
	})
	return out
}

// alertSpec is an alerts.SLO with what Fires reads.
func (slo *SLO) alertSpec() *alerts.SLO {
	if slo.spec != nil {
		return slo.spec
	}
	return alerts.EvaluatedSLO(slo.Objective, slo.windowDuration(), slo.MinEvents)
}

func (slo *SLO) windowDuration() time.Duration {
	d, err := model.ParseDuration(slo.Window)
	if err != nil {
		return 0
	}
	return time.Duration(d)
}

func percent(c Counts) float64 {
	if c.Total == 0 {
		return math.NaN()
	}
	return 100 * c.Good / c.Total
}

// errorRatio is the share of bad events over window w: from its counts,
// or the ratio the source gave without them; NaN without either.
func (c *Class) errorRatio(w string) float64 {
	if n, ok := c.Windows[w]; ok && n.Total > 0 {
		return n.errorRatio()
	}
	if r, ok := c.Ratios[w]; ok {
		return r
	}
	return math.NaN()
}

// budgetLeft is in percent; allowed is the error budget, in percent of
// events.
func budgetLeft(c Counts, allowed float64) float64 {
	if c.Total == 0 {
		return math.NaN()
	}
	return 100 * (1 - 100*c.errorRatio()/allowed)
}

// Breached tells whether any status is breached: `podslo report` exits
// non-zero then.
func Breached(st []Status) bool {
	return slices.ContainsFunc(st, func(s Status) bool { return s.Breached })
}

// Quantile is where the q-quantile of a class's distribution lies: between
// the bounds Lower and Upper (seconds; Upper +Inf in the last bucket). It
// is not interpolated: a classic bucket says nothing of where within it
// its events fell. ok is false without events.
func Quantile(bounds []float64, dist []uint64, q float64) (lower, upper float64, ok bool) {
	var total uint64
	for _, n := range dist {
		total += n
	}
	if total == 0 {
		return 0, 0, false
	}
	rank := uint64(math.Ceil(q * float64(total)))
	rank = max(rank, 1)
	var cum uint64
	for i, n := range dist {
		cum += n
		if cum >= rank {
			if i > 0 {
				lower = bounds[i-1]
			}
			upper = math.Inf(1)
			if i < len(bounds) {
				upper = bounds[i]
			}
			return lower, upper, true
		}
	}
	return 0, 0, false
}
