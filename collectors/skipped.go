package collectors

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/sli"
	"github.com/podslo/podslo/store"
)

var (
	observationsSkipped = &sli.MetricFamily{
		Name: "podslo_observations_skipped_total", Type: sli.Counter, Stability: sli.Alpha,
		Help:   "Observations not made, by SLI and reason. Each pod counts at most once per SLI and reason.",
		Labels: labelList("sli", "reason"),
	}
	observationsByPrecision = &sli.MetricFamily{
		Name: "podslo_observations_total", Type: sli.Counter, Stability: sli.Alpha,
		Help:   "Observations made into podslo's histograms, by SLI and precision: millisecond when both ends were timed by the watch while it was current, second when either end is a one-second condition time.",
		Labels: labelList("sli", "precision"),
	}
	skippedFamilies = []*sli.MetricFamily{observationsSkipped, observationsByPrecision}
)

// Skipped exports the persisted counts of what became of observations:
// skipped, by reason, and made, by precision.
type Skipped struct {
	store     *store.Store
	log       *slog.Logger
	desc      *prometheus.Desc
	precision *prometheus.Desc
}

// NewSkipped returns the observation-accounting collector over s.
func NewSkipped(s *store.Store, log *slog.Logger) *Skipped {
	return &Skipped{store: s, log: log, desc: desc(observationsSkipped, Labels{}), precision: desc(observationsByPrecision, Labels{})}
}

// Describe implements prometheus.Collector.
func (c *Skipped) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc; ch <- c.precision }

// Collect implements prometheus.Collector.
func (c *Skipped) Collect(ch chan<- prometheus.Metric) {
	exists := map[string]bool{}
	c.store.Aggregates(func(family string, labels []string, agg *store.Aggregate) {
		var d *prometheus.Desc
		switch family {
		case sli.FamilySkipped:
			d = c.desc
		case sli.FamilyPrecision:
			d = c.precision
		default:
			return
		}
		exists[seriesKey(family, labels)] = true
		m, err := prometheus.NewConstMetricWithCreatedTimestamp(d, prometheus.CounterValue, agg.Value, createdTime(agg), labels...)
		if err != nil {
			c.log.Error("Dropping malformed series", "family", family, "labels", labels, "err", err)
			return
		}
		ch <- m
	})
	// Every SLI and reason, and every measured SLI and precision, starts
	// at 0, so that increase() sees a first skip (issue 26) or a first
	// observation in seconds: 40 and 10 series.
	for _, sk := range lifecycle.Skips() {
		labels := []string{sk.SLI.String(), sk.Reason.String()}
		if !exists[seriesKey(sli.FamilySkipped, labels)] {
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, 0, labels...)
		}
	}
	for _, s := range lifecycle.MeasuredSLIs() {
		for _, p := range sli.Precisions {
			labels := []string{s.String(), p}
			if !exists[seriesKey(sli.FamilyPrecision, labels)] {
				ch <- prometheus.MustNewConstMetric(c.precision, prometheus.CounterValue, 0, labels...)
			}
		}
	}
}

func createdTime(agg *store.Aggregate) time.Time { return time.Unix(agg.Created, 0) }
