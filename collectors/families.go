package collectors

import (
	"regexp"

	"github.com/prometheus/client_golang/prometheus"
)

// Stability levels, as in Kubernetes' metrics stability framework: an ALPHA
// family may change or go away in any release; a STABLE one only with a
// deprecation period.
const (
	Alpha  = "ALPHA"
	Stable = "STABLE"
)

// Family declares one metric family: docs/metrics.md lists exactly these, and
// a test fails when the two disagree.
type Family struct {
	Name      string
	Type      string // counter, gauge or histogram
	Help      string
	Labels    []string
	Stability string
	// HistogramLabels: the family also carries the --histogram-label
	// dimensions after Labels.
	HistogramLabels bool
	// PodLabels: the family also carries the --pod-label labels after Labels.
	PodLabels bool
}

// Labels configures the configurable label dimensions.
type Labels struct {
	// Pod are the pod label keys copied onto per-pod series, each as
	// label_<sanitized key>.
	Pod []string
	// Histogram are the names of extra dimensions on aggregated series.
	Histogram []string
}

func (f *Family) desc(l Labels) *prometheus.Desc {
	names := append([]string(nil), f.Labels...)
	if f.HistogramLabels {
		names = append(names, l.Histogram...)
	}
	if f.PodLabels {
		for _, k := range l.Pod {
			names = append(names, PodLabelName(k))
		}
	}
	return prometheus.NewDesc(f.Name, f.Help, names, nil)
}

var invalidLabelChars = regexp.MustCompile(`[^a-zA-Z0-9_]`)

// PodLabelName is the metric label that carries a pod label: "label_" and the
// key with every character outside [a-zA-Z0-9_] replaced by "_", as
// kube-state-metrics names them.
func PodLabelName(key string) string {
	return "label_" + invalidLabelChars.ReplaceAllString(key, "_")
}

// All returns every family podslo exports, in documentation order.
func All() []*Family {
	var out []*Family
	for _, group := range [][]*Family{sandboxFamilies, terminationFamilies, readinessFamilies, stabilityFamilies, skippedFamilies, selfFamilies} {
		out = append(out, group...)
	}
	return out
}

func labelList(l ...string) []string { return l }
