package slostatus

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/podslo/podslo/alerts"
	"github.com/podslo/podslo/sli"
	"github.com/podslo/podslo/store"
)

// Evaluator computes Reports from a store for one spec. New resolves
// each SLO's store families once.
type Evaluator struct {
	slos            []resolved
	histogramLabels []string
}

// resolved is an SLO with the store families it reads.
type resolved struct {
	spec     *alerts.SLO
	matchers []alerts.Matcher
	// events is the histogram family whose observations are the events
	// (a latency SLO's, or a success SLO's successes); failures is a
	// success SLO's counter family.
	events, failures   *sli.AggregateSpec
	eventsID, failsID  string
	eventsN, failuresN []string // label names of the series
}

// New resolves spec's SLOs against the SLI table. histogramLabels are the
// exporter's --histogram-label names: its series carry them after the
// class labels. An SLO of a metric podslo does not export is an error.
func New(spec *alerts.Spec, histogramLabels []string) (*Evaluator, error) {
	byName := map[string]*sli.AggregateSpec{}
	for _, a := range sli.Aggregates() {
		byName[a.Name] = a
	}
	e := &Evaluator{histogramLabels: histogramLabels}
	for i := range spec.SLOs {
		slo := &spec.SLOs[i]
		r := resolved{spec: slo}
		var err error
		if r.matchers, err = slo.ParsedMatchers(); err != nil {
			return nil, err
		}
		var events, failures string
		if slo.Latency != nil {
			events = slo.Latency.Histogram
		} else {
			events, failures = strings.TrimSuffix(slo.Success.Successes, "_count"), slo.Success.Failures
		}
		if r.events = byName[events]; r.events == nil || r.events.Type != sli.Histogram {
			return nil, fmt.Errorf("slo %s: %s is not a podslo histogram", slo.Name, events)
		}
		r.eventsID = r.events.ID(histogramLabels)
		r.eventsN = labelNames(r.events, histogramLabels)
		if failures != "" {
			if r.failures = byName[failures]; r.failures == nil || r.failures.Type != sli.Counter {
				return nil, fmt.Errorf("slo %s: %s is not a podslo counter", slo.Name, failures)
			}
			r.failsID = r.failures.ID(histogramLabels)
			r.failuresN = labelNames(r.failures, histogramLabels)
		}
		e.slos = append(e.slos, r)
	}
	return e, nil
}

// Families tells whether the evaluator reads a store family: the store
// keeps the windowed counts of those only (store.Options.WindowFamilies).
func (e *Evaluator) Families() func(family string) bool {
	read := map[string]bool{}
	for _, r := range e.slos {
		read[r.eventsID] = true
		if r.failsID != "" {
			read[r.failsID] = true
		}
	}
	return func(family string) bool { return read[family] }
}

func labelNames(a *sli.AggregateSpec, histogramLabels []string) []string {
	for _, f := range sli.Families() {
		if f.Name == a.Name {
			return f.LabelNames(histogramLabels, nil)
		}
	}
	return nil
}

// target is one SLO class a series counts in, resolved once per series.
type target struct {
	slo      int
	failures bool
	// threshold is a latency SLO's for the series' labels.
	threshold float64
	accs      []*acc // one per groupBy label
}

// acc accumulates one class while the slots are read: its windows by
// index, as windowsOf lists them.
type acc struct {
	c       *Class
	windows []Counts
}

// FromStore reads st's windowed counts at now into a Report. It holds the
// store's read lock while it reads, so the work per slot is kept small:
// what depends on a series alone (its labels, the SLOs it counts in, their
// classes and thresholds) is worked out once per series.
func (e *Evaluator) FromStore(st *store.Store, now time.Time, src Source) Report {
	rep := Report{Generated: now, Sources: []Source{src}}
	bounds := st.Buckets()
	longest := time.Duration(0)
	for _, r := range e.slos {
		longest = max(longest, r.spec.WindowDuration())
	}
	type key struct {
		slo          int
		label, class string
	}
	accs := map[key]*acc{}
	windowsOf := make([][]string, len(e.slos))
	// A window of d holds the slots whose middle is after now-d, and the
	// slot still filling: d of slots on average (d ± 2.5m while they are
	// five minutes long, d ± 30m for the hours beyond store.FineKeep).
	cutoffsOf := make([][]time.Time, len(e.slos))
	for i, r := range e.slos {
		s := SLO{Window: model.Duration(r.spec.WindowDuration()).String()}
		windowsOf[i] = Windows(&s)
		for _, w := range windowsOf[i] {
			d, _ := model.ParseDuration(w)
			cutoffsOf[i] = append(cutoffsOf[i], now.Add(-time.Duration(d)))
		}
	}
	accOf := func(i int, label string, labels map[string]string) *acc {
		k := key{i, label, labels[label]}
		a, ok := accs[k]
		if !ok {
			r := e.slos[i]
			c := &Class{Class: k.class, Windows: map[string]Counts{}, Days: make([]Counts, days(r.spec.WindowDuration()))}
			if r.spec.Latency != nil {
				c.ThresholdSeconds = r.spec.ThresholdFor(labels)
				c.Distribution = make([]uint64, len(bounds)+1)
			}
			a = &acc{c: c, windows: make([]Counts, len(windowsOf[i]))}
			accs[k] = a
		}
		return a
	}
	// targetsOf resolves the SLO classes a series counts in.
	targetsOf := func(family string, values []string) []target {
		var out []target
		for i := range e.slos {
			r := &e.slos[i]
			var names []string
			failures := false
			switch family {
			case r.eventsID:
				names = r.eventsN
			case r.failsID:
				names, failures = r.failuresN, true
			default:
				continue
			}
			if len(names) != len(values) {
				continue
			}
			labels := make(map[string]string, len(names))
			for j, n := range names {
				labels[n] = values[j]
			}
			if !matches(r.matchers, labels) {
				continue
			}
			t := target{slo: i, failures: failures}
			if r.spec.Latency != nil {
				t.threshold = r.spec.ThresholdFor(labels)
			}
			for _, label := range r.spec.GroupBy {
				t.accs = append(t.accs, accOf(i, label, labels))
			}
			out = append(out, t)
		}
		return out
	}
	var (
		lastFamily string
		lastValues []string
		targets    []target
	)
	st.Windows(now.Add(-longest), func(family string, values []string, sl store.Slot, sc *store.SlotCounts) {
		// The store hands over each series' slots one after the other,
		// with the same label slice.
		if family != lastFamily || len(values) != len(lastValues) || (len(values) > 0 && &values[0] != &lastValues[0]) {
			lastFamily, lastValues, targets = family, values, targetsOf(family, values)
		}
		mid := sl.Start.Add(sl.Length / 2)
		current := !sl.End().Before(now)
		for _, t := range targets {
			r := &e.slos[t.slo]
			var got Counts
			switch {
			case t.failures:
				got = Counts{Total: sc.Value}
			case r.spec.Latency != nil:
				got = Counts{Total: float64(sc.Count), Good: float64(goodEvents(sc.Classic, bounds, t.threshold))}
			default:
				got = Counts{Total: float64(sc.Count), Good: float64(sc.Count)}
			}
			window := r.spec.WindowDuration()
			inWindow := current || mid.After(now.Add(-window))
			day := 0
			if inWindow {
				day = int(mid.Sub(now.Add(-window)) / (24 * time.Hour))
			}
			for _, a := range t.accs {
				for j, cutoff := range cutoffsOf[t.slo] {
					if current || mid.After(cutoff) {
						a.windows[j].add(got)
					}
				}
				if !inWindow {
					continue
				}
				c := a.c
				c.Days[min(max(day, 0), len(c.Days)-1)].add(got)
				if c.Distribution != nil && !t.failures {
					for b := range min(len(c.Distribution), len(sc.Classic)) {
						c.Distribution[b] += sc.Classic[b]
					}
					c.Precise += sc.Precise
				}
			}
		}
	})
	classes := map[int]map[string][]Class{}
	for k, a := range accs {
		for j, w := range windowsOf[k.slo] {
			a.c.Windows[w] = a.windows[j]
		}
		if classes[k.slo] == nil {
			classes[k.slo] = map[string][]Class{}
		}
		classes[k.slo][k.label] = append(classes[k.slo][k.label], *a.c)
	}
	for i, r := range e.slos {
		for _, label := range r.spec.GroupBy {
			s := SLO{
				Name: r.spec.Name, Title: r.spec.Title, Alert: r.spec.Alert, Events: r.spec.Events,
				Objective: r.spec.Objective, Window: model.Duration(r.spec.WindowDuration()).String(),
				Label: label, MinEvents: r.spec.MinEvents, Classes: []Class{},
				spec: r.spec,
			}
			if r.spec.Latency != nil {
				s.Threshold = r.spec.ThresholdText()
				s.Bounds = slices.Clone(bounds)
			}
			s.Classes = append(s.Classes, classes[i][label]...)
			slices.SortFunc(s.Classes, func(a, b Class) int { return strings.Compare(a.Class, b.Class) })
			rep.SLOs = append(rep.SLOs, s)
		}
	}
	return rep
}

func days(w time.Duration) int { return max(1, int((w+24*time.Hour-1)/(24*time.Hour))) }

func matches(ms []alerts.Matcher, labels map[string]string) bool {
	for _, m := range ms {
		if !m.Matches(labels) {
			return false
		}
	}
	return true
}

// goodEvents are the events within threshold: the classic buckets up to
// the one whose bound it is (alerts.Spec.Validate makes every threshold a
// bound).
func goodEvents(classic []uint64, bounds []float64, threshold float64) uint64 {
	var n uint64
	for i, b := range bounds {
		if b > threshold || i >= len(classic) {
			break
		}
		n += classic[i]
	}
	return n
}
