package sli

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/podslo/podslo/lifecycle"
)

// LabelSource is where a histogram label's value is read from on a pod.
type LabelSource string

const (
	FromLabel      LabelSource = "label"
	FromAnnotation LabelSource = "annotation"
	// FromNodeLabel is a label of the pod's node (spec.nodeName), as the
	// Node watch shows it when the pod's update is handled.
	FromNodeLabel LabelSource = "node-label"
	// FromOwnerKind is the pod's workload kind, resolved through its
	// controller (lifecycle.Pod.OwnerKind). It takes no key.
	FromOwnerKind LabelSource = "owner-kind"
)

// HistogramLabel is one extra dimension of the aggregated series, read from a
// pod label or annotation (--histogram-label NAME=label:KEY), a label of the
// pod's node (NAME=node-label:KEY), or the pod's workload kind
// (NAME=owner-kind, no Key).
type HistogramLabel struct {
	Name   string
	Source LabelSource
	Key    string
}

// HistogramLabels are the configured extra dimensions, in the order of their
// flags. That order is the order of their names on every aggregated family
// (LabelNames), of their values on every aggregated series (LabelValues),
// and of the values the store keeps per pod (store.PodMeta.HistogramLabels):
// everything that writes or reads those positions goes through this type.
type HistogramLabels []HistogramLabel

// ParseHistogramLabels parses and validates NAME=label:KEY,
// NAME=annotation:KEY, NAME=node-label:KEY and NAME=owner-kind, the
// --histogram-label syntax.
func ParseHistogramLabels(specs []string) (HistogramLabels, error) {
	out := make(HistogramLabels, 0, len(specs))
	for _, s := range specs {
		name, src, ok := strings.Cut(s, "=")
		if ok && name != "" && src == string(FromOwnerKind) {
			out = append(out, HistogramLabel{Name: name, Source: FromOwnerKind})
			continue
		}
		source, key, ok2 := strings.Cut(src, ":")
		if !ok || !ok2 || name == "" || key == "" {
			return nil, fmt.Errorf("--histogram-label %q: want NAME=label:KEY, NAME=annotation:KEY, NAME=node-label:KEY or NAME=owner-kind", s)
		}
		out = append(out, HistogramLabel{Name: name, Source: LabelSource(source), Key: key})
	}
	if err := out.Validate(); err != nil {
		return nil, fmt.Errorf("--histogram-label: %w", err)
	}
	return out, nil
}

var labelNameRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// Validate reports the first label that is not a valid Prometheus label
// name, is used twice, or clashes with a label an aggregated family already
// carries (the class labels, phase, reason).
func (h HistogramLabels) Validate() error {
	seen := map[string]bool{}
	for _, n := range ClassLabels {
		seen[n] = true
	}
	for _, a := range table.aggregates {
		if a.Label != "" {
			seen[a.Label] = true
		}
	}
	for _, l := range h {
		if !labelNameRE.MatchString(l.Name) || strings.HasPrefix(l.Name, "__") {
			return fmt.Errorf("histogram label name %q is not a valid Prometheus label name", l.Name)
		}
		if seen[l.Name] {
			return fmt.Errorf("histogram label name %q is used twice or clashes with a built-in label", l.Name)
		}
		seen[l.Name] = true
		switch l.Source {
		case FromLabel, FromAnnotation, FromNodeLabel:
			if l.Key == "" {
				return fmt.Errorf("histogram label %q: key must not be empty", l.Name)
			}
		case FromOwnerKind:
			if l.Key != "" {
				return fmt.Errorf("histogram label %q: %s takes no key, got %q", l.Name, FromOwnerKind, l.Key)
			}
		default:
			return fmt.Errorf("histogram label %q: source must be %q, %q, %q or %q, got %q", l.Name, FromLabel, FromAnnotation, FromNodeLabel, FromOwnerKind, l.Source)
		}
	}
	return nil
}

// Names are the label names, in order; nil for none.
func (h HistogramLabels) Names() []string {
	if len(h) == 0 {
		return nil
	}
	out := make([]string, len(h))
	for i, l := range h {
		out[i] = l.Name
	}
	return out
}

// Keys are the pod label keys and annotation keys the values are read from:
// what the pod trim must keep.
func (h HistogramLabels) Keys() (labels, annotations []string) {
	for _, l := range h {
		switch l.Source {
		case FromLabel:
			labels = append(labels, l.Key)
		case FromAnnotation:
			annotations = append(annotations, l.Key)
		}
	}
	return labels, annotations
}

// NodeLabelKeys are the node label keys the values are read from: what the
// Node watch keeps of each node. None: no Node watch is needed.
func (h HistogramLabels) NodeLabelKeys() []string {
	var keys []string
	for _, l := range h {
		if l.Source == FromNodeLabel {
			keys = append(keys, l.Key)
		}
	}
	return keys
}

// OwnerKind reports whether a label reads the pod's workload kind: the
// watch then resolves it (lifecycle.Pod.OwnerKind).
func (h HistogramLabels) OwnerKind() bool {
	for _, l := range h {
		if l.Source == FromOwnerKind {
			return true
		}
	}
	return false
}

// Values reads a pod's values, in order; nil for none. A missing label or
// annotation, and a node label of a pod whose node is unknown or lacks
// it, is the empty value.
func (h HistogramLabels) Values(pod *lifecycle.Pod) []string {
	if len(h) == 0 {
		return nil
	}
	out := make([]string, len(h))
	for i, l := range h {
		switch l.Source {
		case FromLabel:
			out[i] = pod.Labels[l.Key]
		case FromAnnotation:
			out[i] = pod.Annotations[l.Key]
		case FromNodeLabel:
			out[i] = pod.NodeLabels[l.Key]
		case FromOwnerKind:
			out[i] = pod.OwnerKind
		}
	}
	return out
}

// LabelNames are the label names of f's series: its own labels, then the
// histogram labels if it carries them, then podLabels (the --pod-label
// label names) if it carries them. LabelValues writes an aggregate's values
// in this order.
func (f *MetricFamily) LabelNames(histogram, podLabels []string) []string {
	names := append([]string(nil), f.Labels...)
	if f.HistogramLabels {
		names = append(names, histogram...)
	}
	if f.PodLabels {
		names = append(names, podLabels...)
	}
	return names
}

// aggregateLabels are the labels of an aggregated family before the
// histogram labels: the class labels, then a.Label if set.
func (a *AggregateSpec) aggregateLabels() []string {
	labels := append([]string(nil), ClassLabels...)
	if a.Label != "" {
		labels = append(labels, a.Label)
	}
	return labels
}

// LabelValues are the label values of the series o feeds in a, in the
// order of a's LabelNames: the pod's runtime and storage class (ClassLabels),
// a.LabelValue(o) if a has a Label, then histogramValues (from
// HistogramLabels.Values).
func (a *AggregateSpec) LabelValues(runtimeClass, storageClass string, o lifecycle.Observation, histogramValues []string) []string {
	var extra string
	if a.LabelValue != nil {
		extra = a.LabelValue(o)
	}
	return a.AppendLabelValues(make([]string, 0, len(ClassLabels)+1+len(histogramValues)), runtimeClass, storageClass, extra, histogramValues)
}

// AppendLabelValues appends to buf the label values of one of a's series,
// in the order of a's LabelNames: the runtime and storage class, extra if a
// has a Label (ignored if not), then histogramValues. The collectors write
// the zero series of counters with it; ParseLabelValues reads it back.
func (a *AggregateSpec) AppendLabelValues(buf []string, runtimeClass, storageClass, extra string, histogramValues []string) []string {
	buf = append(buf, runtimeClass, storageClass)
	if a.Label != "" {
		buf = append(buf, extra)
	}
	return append(buf, histogramValues...)
}

// ParseLabelValues reads back the classes and the histogram label values of
// one of a's series, as AppendLabelValues wrote them under histogramLabels
// histogram labels. ok is false for a series with another number of
// values: one persisted under another --histogram-label set, or malformed.
// histogramValues shares values' array.
func (a *AggregateSpec) ParseLabelValues(values []string, histogramLabels int) (runtimeClass, storageClass string, histogramValues []string, ok bool) {
	n := len(ClassLabels) + histogramLabels
	if a.Label != "" {
		n++
	}
	if len(values) != n {
		return "", "", nil, false
	}
	return values[0], values[1], values[n-histogramLabels:], true
}

// AppendPodLabelValues appends to buf the label values of a per-pod
// series, in the order of PodSeriesLabels and then of the --pod-label
// labels (MetricFamily.LabelNames): podLabels are the pod's values of
// those labels.
func AppendPodLabelValues(buf []string, namespace, pod, uid, node, runtimeClass, storageClass string, podLabels []string) []string {
	buf = append(buf, namespace, pod, uid, node, runtimeClass, storageClass)
	return append(buf, podLabels...)
}

// SkipLabelValues are the label values of a skip's series in the store
// family FamilySkipped, in the order of Skipped's labels.
func SkipLabelValues(s lifecycle.Skip) []string {
	return []string{s.SLI.String(), s.Reason.String()}
}

// PrecisionLabelValues are the label values of an SLI's series of
// Observations, in the order of its labels.
func PrecisionLabelValues(s lifecycle.SLI, precise bool) []string {
	return []string{s.String(), Precision(precise)}
}
