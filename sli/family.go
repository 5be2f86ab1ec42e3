package sli

// Type is a metric family's type.
type Type uint8

const (
	Counter Type = iota + 1
	Gauge
	Histogram
)

// String is the type as the text exposition and docs/metrics.md write it.
func (t Type) String() string {
	switch t {
	case Counter:
		return "counter"
	case Gauge:
		return "gauge"
	case Histogram:
		return "histogram"
	}
	return "untyped"
}

// Stability is a family's stability level, as in Kubernetes' metrics
// stability framework: an Alpha family may change or go away in any
// release; a Stable one only with a deprecation period.
type Stability uint8

const (
	Alpha Stability = iota + 1
	Stable
)

// String is the level as docs/metrics.md writes it.
func (s Stability) String() string {
	switch s {
	case Alpha:
		return "ALPHA"
	case Stable:
		return "STABLE"
	}
	return "UNKNOWN"
}

// MetricFamily declares one metric family podslo exports, SLI or not:
// docs/metrics.md lists exactly these, and a test fails when the two
// disagree.
type MetricFamily struct {
	Name      string
	Type      Type
	Help      string
	Labels    []string
	Stability Stability
	// HistogramLabels: the family also carries the --histogram-label
	// dimensions after Labels.
	HistogramLabels bool
	// PodLabels: the family also carries the --pod-label labels after Labels.
	PodLabels bool
}

var (
	// ClassLabels come first on every aggregated family; the pipeline
	// writes the pod's runtime and storage class in this order.
	ClassLabels = []string{"runtime_class", "storage_class"}
	// PodSeriesLabels are the labels of every per-pod series, in the order
	// AppendPodLabelValues writes their values.
	PodSeriesLabels = []string{"namespace", "pod", "uid", "node", "runtime_class", "storage_class"}
)

// The families of what became of each observation. Their store family is
// FamilySkipped (skips) and the histograms' own counts (precision); their
// label values are SkipLabelValues and PrecisionLabelValues, in the order
// of their Labels.
var (
	Skipped = &MetricFamily{
		Name: "podslo_observations_skipped_total", Type: Counter, Stability: Alpha,
		Help:   "Observations not made, by SLI and reason. Each pod counts at most once per SLI and reason.",
		Labels: []string{"sli", "reason"},
	}
	Observations = &MetricFamily{
		Name: "podslo_observations_total", Type: Counter, Stability: Alpha,
		Help:   "Observations made into podslo's histograms, by SLI and precision: millisecond when both ends were timed by the watch while it was current, second when either end is a one-second condition time.",
		Labels: []string{"sli", "precision"},
	}
)
