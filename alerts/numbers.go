package alerts

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// The numbers the rules and dashboards print from an SLO's objective are
// computed the way the chart computes them at install time (Helm's sprig:
// subf, mulf and divf in exact decimals, round), and printed the way a Helm
// template prints a float, so that the chart's defaults render exactly the
// committed rule files. Exact decimals also keep float noise out of them:
// 100 - 99.9 is 0.1, not 0.09999999999999432.

// decimal is f as sprig reads it: the shortest decimal that reads back as f.
func decimal(f float64) *big.Rat {
	r, ok := new(big.Rat).SetString(strconv.FormatFloat(f, 'g', -1, 64))
	if !ok {
		panic(fmt.Sprintf("not a finite number: %v", f))
	}
	return r
}

func nearest(r *big.Rat) float64 {
	f, _ := r.Float64()
	return f
}

// subf, mulf and quo100 are sprig's subf, mulf and divf by 100.
func subf(a, b float64) float64 { return nearest(new(big.Rat).Sub(decimal(a), decimal(b))) }
func mulf(a, b float64) float64 { return nearest(new(big.Rat).Mul(decimal(a), decimal(b))) }
func quo100(a float64) float64  { return nearest(new(big.Rat).Quo(decimal(a), big.NewRat(100, 1))) }

// round3 is sprig's round to 3 places: half rounds up.
func round3(f float64) float64 {
	digit := 1000 * f
	if _, frac := math.Modf(digit); frac >= 0.5 {
		return math.Ceil(digit) / 1000
	}
	return math.Floor(digit) / 1000
}

// printNumber prints f as a Helm template prints a float64.
func printNumber(f float64) string { return fmt.Sprint(f) }

// slosKey is where the chart keeps an SLO's values, checked and derived by
// podslo.monitoring (templates/_monitoring.tpl).
func (slo *SLO) slosKey(field string) string { return slo.keys + "." + field }

// ObjectiveText is the objective as a percentage, e.g. 99.
func (slo *SLO) ObjectiveText() string {
	if slo.chart {
		return safeHole(slo.slosKey("objective"))
	}
	return printNumber(slo.Objective)
}

// ObjectiveRatio is the objective as a ratio for PromQL, e.g. 0.99.
func (slo *SLO) ObjectiveRatio() string {
	if slo.chart {
		return safeHole(slo.slosKey("objectiveRatio"))
	}
	return printNumber(quo100(slo.Objective))
}

// ObjectiveValue is the objective as a ratio, for the dashboards' JSON
// numbers. For the chart it is a sentinel, negative as no threshold is,
// that the dashboards replace with ObjectiveRatio.
func (slo *SLO) ObjectiveValue() float64 {
	if slo.chart {
		return slo.sentinel
	}
	return quo100(slo.Objective)
}

// ErrorBudgetExpr is the error budget in PromQL, "(1 - 0.99)": printed as
// a float, 1 - 0.99 would be 0.010000000000000009.
func (slo *SLO) ErrorBudgetExpr() string { return "(1 - " + slo.ObjectiveRatio() + ")" }

// ErrorBudgetRatio is the error budget as a ratio, e.g. 0.01: an exact
// decimal, as the recorded slo:podslo_error_budget:ratio.
func (slo *SLO) ErrorBudgetRatio() string {
	if slo.chart {
		return safeHole(slo.slosKey("errorBudgetRatio"))
	}
	return printNumber(quo100(subf(100, slo.Objective)))
}

// ErrorBudgetPercent is the share of bad events the objective allows, as a
// percentage: 1 for 99.
func (slo *SLO) ErrorBudgetPercent() string {
	if slo.chart {
		return safeHole(slo.slosKey("errorBudgetPercent"))
	}
	return printNumber(round3(subf(100, slo.Objective)))
}

// BurnPercent is the error ratio, as a percentage, at which the alert of
// window w fires: 14.4 for 1h at 99% over 30d.
func (slo *SLO) BurnPercent(w BurnWindow) string {
	if slo.chart {
		return safeHole(slo.slosKey(burnPercentKey(w)))
	}
	return printNumber(round3(mulf(w.Factor(slo.window), subf(100, slo.Objective))))
}

func burnPercentKey(w BurnWindow) string { return "burnPercent" + modelDuration(w.Long) }

// MinEventsText is MinEvents.
func (slo *SLO) MinEventsText() string {
	if slo.chart {
		return safeHole(slo.slosKey("minEvents"))
	}
	return strconv.Itoa(slo.MinEvents)
}

// ThresholdText is a latency SLO's threshold as written, e.g. 5s, and the
// classes' own: 5s (20s for runtime_class kata).
func (slo *SLO) ThresholdText() string {
	if slo.chart {
		return textHole(slo.slosKey("thresholdText"))
	}
	l := slo.Latency
	if len(l.classThresholds) == 0 {
		return l.Threshold
	}
	own := make([]string, len(l.classThresholds))
	for i, c := range l.classThresholds {
		own[i] = c.threshold + " for " + c.label + " " + c.class
	}
	return l.Threshold + " (" + strings.Join(own, ", ") + ")"
}

// goodMatchers are the bucket matchers of a latency SLO's good events, each
// the matchers of one selector, joined by commas: the threshold's bucket of
// every class without a threshold of its own, then each class's own.
func (slo *SLO) goodMatchers() []string {
	l := slo.Latency
	def := []string{LeMatcher(l.threshold.Seconds())}
	var own []string
	for _, c := range l.classThresholds {
		def = append(def, fmt.Sprintf("%s!=%q", c.label, c.class))
		own = append(own, fmt.Sprintf("%s=%q,%s", c.label, c.class, LeMatcher(c.seconds)))
	}
	return append([]string{strings.Join(def, ",")}, own...)
}

// GoodBuckets is the PromQL of a latency SLO's good events: fn (increase,
// rate) over window of the buckets of its thresholds, one selector each,
// joined by or, which a sum by class adds up. selector makes the selector
// of extra matchers. Each class label value selects one of them, so no
// event is counted twice.
func (slo *SLO) GoodBuckets(fn string, selector func(...string) string, window string) string {
	term := func(good string) string {
		return fmt.Sprintf("%s(%s_bucket%s[%s])", fn, slo.Latency.Histogram, selector(good), window)
	}
	if slo.chart {
		return rawAction("range $i, $good := "+slo.slosKey("good")) + rawAction("if $i") + " or " + rawAction("end") +
			term(textHole("$good")) + rawAction("end")
	}
	terms := []string{}
	for _, g := range slo.goodMatchers() {
		terms = append(terms, term(g))
	}
	return strings.Join(terms, " or ")
}
