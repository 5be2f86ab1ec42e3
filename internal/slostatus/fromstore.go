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

// Window membership: a slot counts in a window when its middle lies within
// it, so that a window of W holds W of slots on average (W ± 2.5m while the
// slots are five minutes, W ± 30m for the hours beyond store.FineKeep). The
// current slot, still filling, counts in every window.
func within(sl store.Slot, now time.Time, w time.Duration) bool {
	mid := sl.Start.Add(sl.Length / 2)
	return mid.After(now.Add(-w)) || !sl.End().Before(now)
}

// FromStore reads st's windowed counts at now into a Report.
func (e *Evaluator) FromStore(st *store.Store, now time.Time, src Source) Report {
	rep := Report{Generated: now, Sources: []Source{src}}
	bounds := st.Buckets()
	longest := time.Duration(0)
	for _, r := range e.slos {
		longest = max(longest, r.spec.WindowDuration())
	}
	type key struct {
		slo   int
		label string
	}
	classes := map[key]map[string]*Class{}
	durations := map[string]time.Duration{}
	class := func(i int, label, value string, labels map[string]string) *Class {
		k := key{i, label}
		m, ok := classes[k]
		if !ok {
			m = map[string]*Class{}
			classes[k] = m
		}
		c, ok := m[value]
		if !ok {
			r := e.slos[i]
			c = &Class{Class: value, Windows: map[string]Counts{}, Days: make([]Counts, days(r.spec.WindowDuration()))}
			if r.spec.Latency != nil {
				c.ThresholdSeconds = r.spec.ThresholdFor(labels)
				c.Distribution = make([]uint64, len(bounds)+1)
			}
			m[value] = c
		}
		return c
	}
	windowsOf := make([][]string, len(e.slos))
	for i, r := range e.slos {
		s := SLO{Window: model.Duration(r.spec.WindowDuration()).String()}
		windowsOf[i] = Windows(&s)
		for _, w := range windowsOf[i] {
			d, _ := model.ParseDuration(w)
			durations[w] = time.Duration(d)
		}
	}
	labels := map[string]string{}
	st.Windows(now.Add(-longest), func(family string, values []string, sl store.Slot, sc *store.SlotCounts) {
		for i, r := range e.slos {
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
			clear(labels)
			for j, n := range names {
				labels[n] = values[j]
			}
			if !matches(r.matchers, labels) {
				continue
			}
			var got Counts
			switch {
			case failures:
				got = Counts{Total: sc.Value}
			case r.spec.Latency != nil:
				got = Counts{Total: float64(sc.Count), Good: float64(goodEvents(sc.Classic, bounds, r.spec.ThresholdFor(labels)))}
			default:
				got = Counts{Total: float64(sc.Count), Good: float64(sc.Count)}
			}
			window := r.spec.WindowDuration()
			for _, label := range r.spec.GroupBy {
				c := class(i, label, labels[label], labels)
				for _, w := range windowsOf[i] {
					if within(sl, now, durations[w]) {
						v := c.Windows[w]
						v.add(got)
						c.Windows[w] = v
					}
				}
				if within(sl, now, window) {
					mid := sl.Start.Add(sl.Length / 2)
					d := int(mid.Sub(now.Add(-window)) / (24 * time.Hour))
					d = min(max(d, 0), len(c.Days)-1)
					c.Days[d].add(got)
					if c.Distribution != nil && !failures {
						for b := range min(len(c.Distribution), len(sc.Classic)) {
							c.Distribution[b] += sc.Classic[b]
						}
						c.Precise += sc.Precise
					}
				}
			}
		}
	})
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
			for _, c := range classes[key{i, label}] {
				for _, w := range windowsOf[i] {
					if _, ok := c.Windows[w]; !ok {
						c.Windows[w] = Counts{}
					}
				}
				s.Classes = append(s.Classes, *c)
			}
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
