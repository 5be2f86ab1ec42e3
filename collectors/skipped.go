package collectors

import (
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podslo/podslo/sli"
	"github.com/podslo/podslo/store"
)

var (
	observationsSkipped = &sli.MetricFamily{
		Name: "podslo_observations_skipped_total", Type: sli.Counter, Stability: sli.Alpha,
		Help:   "Observations not made, by SLI and reason. Each pod counts at most once per SLI and reason.",
		Labels: labelList("sli", "reason"),
	}
	skippedFamilies = []*sli.MetricFamily{observationsSkipped}
)

// Skipped exports the persisted count of skipped observations.
type Skipped struct {
	store *store.Store
	log   *slog.Logger
	desc  *prometheus.Desc
}

// NewSkipped returns the skipped-observations collector over s.
func NewSkipped(s *store.Store, log *slog.Logger) *Skipped {
	return &Skipped{store: s, log: log, desc: desc(observationsSkipped, Labels{})}
}

// Describe implements prometheus.Collector.
func (c *Skipped) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector.
func (c *Skipped) Collect(ch chan<- prometheus.Metric) {
	c.store.Aggregates(func(family string, labels []string, agg *store.Aggregate) {
		if family != sli.FamilySkipped {
			return
		}
		m, err := prometheus.NewConstMetricWithCreatedTimestamp(c.desc, prometheus.CounterValue, agg.Value, createdTime(agg), labels...)
		if err != nil {
			c.log.Error("Dropping malformed series", "family", family, "labels", labels, "err", err)
			return
		}
		ch <- m
	})
}

func createdTime(agg *store.Aggregate) time.Time { return time.Unix(agg.Created, 0) }
