package collectors

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/sli"
	"github.com/podslo/podslo/store"
)

// skippedFamilies are declared in sli, next to the label values the
// pipeline writes their series with.
var skippedFamilies = []*sli.MetricFamily{sli.Skipped, sli.Observations}

// Skipped exports the persisted counts of what became of observations:
// skipped, by reason, and made, by precision.
type Skipped struct {
	store     *store.Store
	log       *slog.Logger
	desc      *prometheus.Desc
	precision *prometheus.Desc
	// measured maps the store family ID of each histogram (under the
	// configured histogram labels) to its SLI.
	measured map[string]lifecycle.SLI
}

// NewSkipped returns the observation-accounting collector over s; labels
// are the configured histogram label names, which the store family IDs
// carry.
func NewSkipped(s *store.Store, labels Labels, log *slog.Logger) *Skipped {
	measured := map[string]lifecycle.SLI{}
	for _, a := range sli.Aggregates() {
		if m, ok := a.Kind.SLI(); ok && a.Type == sli.Histogram {
			measured[a.ID(labels.Histogram)] = m
		}
	}
	return &Skipped{store: s, log: log, desc: desc(sli.Skipped, Labels{}), precision: desc(sli.Observations, Labels{}), measured: measured}
}

// Describe implements prometheus.Collector.
func (c *Skipped) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc; ch <- c.precision }

// Collect implements prometheus.Collector.
func (c *Skipped) Collect(ch chan<- prometheus.Metric) {
	exists := map[string]bool{}
	// Each histogram series counts its observations in milliseconds: the
	// rest of its count was measured in seconds.
	precise, seconds := map[lifecycle.SLI]uint64{}, map[lifecycle.SLI]uint64{}
	c.store.Aggregates(func(family string, labels []string, agg *store.Aggregate) {
		if m, ok := c.measured[family]; ok && agg.Histogram != nil {
			precise[m] += agg.Histogram.Precise
			seconds[m] += agg.Histogram.Count - agg.Histogram.Precise
			return
		}
		if family != sli.FamilySkipped {
			return
		}
		exists[seriesKey(family, labels)] = true
		m, err := prometheus.NewConstMetricWithCreatedTimestamp(c.desc, prometheus.CounterValue, agg.Value, createdTime(agg), labels...)
		if err != nil {
			c.log.Error("Dropping malformed series", "family", family, "labels", labels, "err", err)
			return
		}
		ch <- m
	})
	// Every SLI and reason starts at 0, so that increase() sees a first
	// skip (issue 26): 40 series. Every measured SLI has both precisions,
	// summed over its histogram's series: 10 series.
	for _, sk := range lifecycle.Skips() {
		labels := sli.SkipLabelValues(sk)
		if !exists[seriesKey(sli.FamilySkipped, labels)] {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, 0, labels...)
		}
	}
	for _, s := range lifecycle.MeasuredSLIs() {
		ch <- prometheus.MustNewConstMetric(c.precision, prometheus.CounterValue, float64(precise[s]), sli.PrecisionLabelValues(s, true)...)
		ch <- prometheus.MustNewConstMetric(c.precision, prometheus.CounterValue, float64(seconds[s]), sli.PrecisionLabelValues(s, false)...)
	}
}

func createdTime(agg *store.Aggregate) time.Time { return time.Unix(agg.Created, 0) }
