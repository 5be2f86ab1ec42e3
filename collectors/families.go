package collectors

import (
	"regexp"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/podslo/podslo/sli"
)

// Labels configures the configurable label dimensions.
type Labels struct {
	// Pod are the pod label keys copied onto per-pod series, each as
	// label_<sanitized key>.
	Pod []string
	// Histogram are the names of extra dimensions on aggregated series.
	Histogram []string
}

func desc(f *sli.MetricFamily, l Labels) *prometheus.Desc {
	var podLabels []string
	if f.PodLabels {
		podLabels = make([]string, len(l.Pod))
		for i, k := range l.Pod {
			podLabels[i] = PodLabelName(k)
		}
	}
	return prometheus.NewDesc(f.Name, f.Help, f.LabelNames(l.Histogram, podLabels), nil)
}

var invalidLabelChars = regexp.MustCompile(`[^a-zA-Z0-9_]`)

// PodLabelName is the metric label that carries a pod label: "label_" and the
// key with every character outside [a-zA-Z0-9_] replaced by "_", as
// kube-state-metrics names them.
func PodLabelName(key string) string {
	return "label_" + invalidLabelChars.ReplaceAllString(key, "_")
}

// All returns every family podslo exports: the SLIs' from sli.Table, then
// the ones declared here.
func All() []*sli.MetricFamily {
	out := append([]*sli.MetricFamily(nil), sli.Families()...)
	out = append(out, sandboxCreationPending, terminationsPending)
	out = append(out, skippedFamilies...)
	out = append(out, selfFamilies...)
	return append(out, networkPolicyFamilies...)
}

func labelList(l ...string) []string { return l }
