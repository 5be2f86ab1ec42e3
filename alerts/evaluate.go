package alerts

import (
	_ "embed"
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// The SLOs as the exporter evaluates them itself, from its windowed counts
// (the landing page, `podslo report`), where no Prometheus runs the rules:
// the same objectives, thresholds, matchers and alert conditions as the
// generated rules, read from the same Spec.

//go:embed slos.yaml
var defaultSpec []byte

// Default is alerts/slos.yaml as this release ships it.
func Default() (*Spec, error) {
	spec, err := Parse(defaultSpec)
	if err != nil {
		return nil, fmt.Errorf("the embedded slos.yaml: %w", err)
	}
	return spec, nil
}

// ThresholdFor is a latency SLO's threshold in seconds for a series with
// these labels: its class's own (classThresholds), or the SLO's.
func (slo *SLO) ThresholdFor(labels map[string]string) float64 {
	l := slo.Latency
	for _, c := range l.classThresholds {
		if labels[c.label] == c.class {
			return c.seconds
		}
	}
	return l.threshold.Seconds()
}

// Matcher is one parsed label matcher of an SLO.
type Matcher struct {
	Name, Op, Value string
	re              *regexp.Regexp
}

// Matches tells whether a series with these labels is one the SLO holds
// for, as PromQL would select it (a missing label is the empty string; a
// regular expression is anchored at both ends).
func (m Matcher) Matches(labels map[string]string) bool {
	v := labels[m.Name]
	switch m.Op {
	case "=":
		return v == m.Value
	case "!=":
		return v != m.Value
	case "=~":
		return m.re.MatchString(v)
	default:
		return !m.re.MatchString(v)
	}
}

// ParsedMatchers parses the SLO's matchers, which Validate has checked.
func (slo *SLO) ParsedMatchers() ([]Matcher, error) {
	out := make([]Matcher, 0, len(slo.Matchers))
	for _, s := range slo.Matchers {
		m := labelMatcher.FindStringSubmatchIndex(s)
		if m == nil {
			return nil, fmt.Errorf("slo %s: %q is not a label matcher", slo.Name, s)
		}
		op := s[m[2]:m[3]]
		value, err := strconv.Unquote(s[m[3]:])
		if err != nil {
			return nil, fmt.Errorf("slo %s: matcher %q: %w", slo.Name, s, err)
		}
		mt := Matcher{Name: s[:m[2]], Op: op, Value: value}
		if op == "=~" || op == "!~" {
			if mt.re, err = regexp.Compile("^(?s:" + value + ")$"); err != nil {
				return nil, fmt.Errorf("slo %s: matcher %q: %w", slo.Name, s, err)
			}
		}
		out = append(out, mt)
	}
	return out, nil
}

// Fires tells whether the SLO's burn-rate alert for window w would fire
// (its `for` aside), given the error ratios over w's long and short windows
// and the events over the long one: the rule's own condition.
func (slo *SLO) Fires(w BurnWindow, longRatio, shortRatio float64, longEvents float64) bool {
	threshold := w.Factor(slo.window) * (1 - slo.Objective/100)
	return longRatio > threshold && shortRatio > threshold && longEvents >= float64(slo.MinEvents)
}

// EvaluatedSLO is an SLO with only what Fires reads: for a reader of an
// exporter's report, which carries the numbers and not the spec.
func EvaluatedSLO(objective float64, window time.Duration, minEvents int) *SLO {
	return &SLO{Objective: objective, window: window, MinEvents: minEvents}
}
