// Package slostatus answers one question without Prometheus: are the pod
// start-up and tear-down SLOs met, and for which class not? It computes,
// from the exporter's windowed counts (store.Windows), the good and total
// events of every SLO of alerts/slos.yaml per class over its window, the
// alert windows and each day of the window (FromStore), merges the reports
// of several replicas by adding their counts (Merge), and derives what a
// person reads (Evaluate): attainment, error budget left, burn rates and
// the alerts that would fire. The landing page and `podslo report` show
// exactly this.
package slostatus

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/podslo/podslo/alerts"
)

// Counts are good and total events: whole numbers from an exporter, and
// Prometheus' extrapolated increases from a Prometheus.
type Counts struct {
	Good  float64 `json:"good"`
	Total float64 `json:"total"`
}

func (c *Counts) add(o Counts) { c.Good += o.Good; c.Total += o.Total }

// Report is what one or more exporters counted, before evaluation: counts
// only, so that the reports of shards add up (Merge).
type Report struct {
	// Generated is when the counts were read.
	Generated time.Time `json:"generated"`
	// Sources are the exporters the counts come from.
	Sources []Source `json:"sources"`
	SLOs    []SLO    `json:"slos"`
}

// Source is one exporter whose counts a report holds.
type Source struct {
	// Scope says which pods it watches: "all pods", "shard 1 of 3",
	// "node worker-1", namespaces.
	Scope string `json:"scope"`
	// Partial is true when Scope is less than the cluster: the report of
	// this exporter alone does not cover every pod.
	Partial bool `json:"partial"`
	// Since is when its windowed counts begin (the oldest slot it keeps,
	// or when it started counting); a window reaching further back holds
	// less than its length.
	Since   time.Time `json:"since"`
	Version string    `json:"version,omitempty"`
	URL     string    `json:"url,omitempty"`
}

// SLO is one SLO of the spec, per class of one label.
type SLO struct {
	Name      string  `json:"name"`
	Title     string  `json:"title"`
	Alert     string  `json:"alert"`
	Events    string  `json:"events"`
	Objective float64 `json:"objective"`
	// Window is the SLO period, e.g. "30d".
	Window string `json:"window"`
	// Label is the class label the SLO holds per value of.
	Label     string `json:"label"`
	Threshold string `json:"threshold,omitempty"`
	MinEvents int    `json:"minEvents"`
	// Bounds are the classic bucket bounds of a latency SLO's histogram, in
	// seconds; Distribution counts are per bucket of them, and one more
	// for +Inf.
	Bounds  []float64 `json:"bounds,omitempty"`
	Classes []Class   `json:"classes"`

	window time.Duration
	spec   *alerts.SLO
}

// Class is an SLO's counts for one value of its label.
type Class struct {
	Class string `json:"class"`
	// Cluster is the value of the cluster label, from a Prometheus that
	// sees several clusters; empty from an exporter.
	Cluster string `json:"cluster,omitempty"`
	// ThresholdSeconds is the latency a good event stays within, the
	// class's own where it has one.
	ThresholdSeconds float64 `json:"thresholdSeconds,omitempty"`
	// Windows are the counts over each of Windows(), keyed by its
	// Prometheus duration ("5m", "30d").
	Windows map[string]Counts `json:"windows"`
	// Ratios are the error ratios of windows whose events the source does
	// not count: a Prometheus records no events over the alerts' short
	// windows, only their ratios.
	Ratios map[string]float64 `json:"ratios,omitempty"`
	// Days are the counts of each day of the SLO window, oldest first.
	Days []Counts `json:"days"`
	// Distribution counts a latency SLO's events over its window per
	// classic bucket (non-cumulative, the last +Inf); Precise of them were
	// measured in milliseconds, the others in whole seconds.
	Distribution []uint64 `json:"distribution,omitempty"`
	Precise      uint64   `json:"precise"`
}

// Windows are the windows every class is counted over: the alerts' long
// and short ones, shortest first, then the SLO's own.
func Windows(slo *SLO) []string {
	var out []string
	for _, w := range alerts.RatioWindows() {
		out = append(out, model.Duration(w).String())
	}
	if !slices.Contains(out, slo.Window) {
		out = append(out, slo.Window)
	}
	return out
}

// Merge adds up the reports of several exporters (shards, per-node
// replicas) of one cluster, or of clusters, SLO by SLO and class by class.
// Their SLOs must agree: a report of another spec is an error, not a sum
// of unlike things.
func Merge(reports ...Report) (Report, error) {
	if len(reports) == 0 {
		return Report{}, fmt.Errorf("no report to merge")
	}
	out := Report{Generated: reports[0].Generated}
	index := map[string]int{}
	for _, r := range reports {
		if r.Generated.After(out.Generated) {
			out.Generated = r.Generated
		}
		out.Sources = append(out.Sources, r.Sources...)
		for _, slo := range r.SLOs {
			key := slo.Name + "/" + slo.Label
			i, ok := index[key]
			if !ok {
				c := slo
				c.Classes = make([]Class, len(slo.Classes))
				for j := range slo.Classes {
					c.Classes[j] = slo.Classes[j].clone()
				}
				index[key] = len(out.SLOs)
				out.SLOs = append(out.SLOs, c)
				continue
			}
			into := &out.SLOs[i]
			if into.Objective != slo.Objective || into.Window != slo.Window || into.Threshold != slo.Threshold || into.MinEvents != slo.MinEvents || !slices.Equal(into.Bounds, slo.Bounds) {
				return Report{}, fmt.Errorf("slo %s: the reports disagree on its objective, window, threshold, minEvents or buckets", slo.Name)
			}
			for _, c := range slo.Classes {
				j := slices.IndexFunc(into.Classes, func(x Class) bool { return x.Class == c.Class && x.Cluster == c.Cluster })
				if j < 0 {
					into.Classes = append(into.Classes, c.clone())
					continue
				}
				if err := into.Classes[j].add(c); err != nil {
					return Report{}, fmt.Errorf("slo %s, %s %s: %w", slo.Name, slo.Label, c.Class, err)
				}
			}
		}
	}
	for i := range out.SLOs {
		slices.SortFunc(out.SLOs[i].Classes, func(a, b Class) int {
			return cmp.Or(strings.Compare(a.Cluster, b.Cluster), strings.Compare(a.Class, b.Class))
		})
	}
	return out, nil
}

func (c Class) clone() Class {
	c.Windows = cloneMap(c.Windows)
	c.Days = slices.Clone(c.Days)
	c.Distribution = slices.Clone(c.Distribution)
	return c
}

func cloneMap(m map[string]Counts) map[string]Counts {
	out := make(map[string]Counts, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func (c *Class) add(o Class) error {
	if c.ThresholdSeconds != o.ThresholdSeconds || len(c.Days) != len(o.Days) || len(c.Distribution) != len(o.Distribution) {
		return fmt.Errorf("the reports disagree on its threshold or its shape")
	}
	if len(c.Ratios) > 0 || len(o.Ratios) > 0 {
		return fmt.Errorf("ratios do not add up: two reports of one class of a Prometheus")
	}
	for k, v := range o.Windows {
		w := c.Windows[k]
		w.add(v)
		c.Windows[k] = w
	}
	for i := range o.Days {
		c.Days[i].add(o.Days[i])
	}
	for i := range o.Distribution {
		c.Distribution[i] += o.Distribution[i]
	}
	c.Precise += o.Precise
	return nil
}

// ratio is bad/total; NaN without events.
func (c Counts) errorRatio() float64 {
	if c.Total == 0 {
		return math.NaN()
	}
	return (c.Total - min(c.Good, c.Total)) / c.Total
}
