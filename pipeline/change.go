package pipeline

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/sli"
	"github.com/podslo/podslo/store"
)

// ClassNeverSeen is the runtime_class and storage_class value of a pod
// podslo never saw live (deleted while it was down), whose classes it
// cannot know.
const ClassNeverSeen = "unknown"

// routing turns lifecycle outcomes into store changes. It is fixed when the
// pipeline is built and has no side effects, so the same outcome always
// makes the same change.
type routing struct {
	// byKind are, by lifecycle.Kind, the aggregates an observation feeds
	// and their store family IDs under the configured histogram labels:
	// change runs for every observation, so it looks up a slice, not the
	// table.
	byKind [][]route
	// histogramLabels are the configured extra dimensions.
	histogramLabels sli.HistogramLabels
	// podLabels are the pod label keys copied onto per-pod series.
	podLabels []string
	// names maps a store family ID to its metric's name, for the debug log
	// of what was recorded.
	names map[string]string
}

// route is an aggregate an observation feeds, and its store family ID.
type route struct {
	aggregate *sli.AggregateSpec
	id        string
}

func newRouting(histogramLabels sli.HistogramLabels, podLabels []string) routing {
	r := routing{histogramLabels: histogramLabels, podLabels: podLabels, names: map[string]string{}}
	names := histogramLabels.Names()
	for _, a := range sli.Aggregates() {
		for int(a.Kind) >= len(r.byKind) {
			r.byKind = append(r.byKind, nil)
		}
		r.byKind[a.Kind] = append(r.byKind[a.Kind], route{aggregate: a, id: a.ID(names)})
		r.names[a.ID(names)] = a.Name
	}
	return r
}

// change turns a lifecycle outcome into the store's samples: the series of
// each observation, labelled with the pod's classes and histogram labels,
// and the skips. pod, when known, names the exemplars, stamped now.
func (r *routing) change(now time.Time, uid types.UID, next lifecycle.State, out lifecycle.Outcome, meta *store.PodMeta, pod *lifecycle.Pod) store.Change {
	change := store.Change{UID: uid, State: next, Meta: meta}
	if out.Empty() {
		return change
	}
	if meta == nil {
		// A pod podslo never saw live: its classes are unknown.
		meta = &store.PodMeta{RuntimeClass: ClassNeverSeen, StorageClass: ClassNeverSeen, HistogramLabels: make([]string, len(r.histogramLabels))}
	}
	for _, o := range out.Observations {
		if int(o.Kind) >= len(r.byKind) {
			continue
		}
		for _, rt := range r.byKind[o.Kind] {
			a := rt.aggregate
			if a.When != nil && !a.When(o) {
				continue
			}
			labels := a.LabelValues(meta.RuntimeClass, meta.StorageClass, o, meta.HistogramLabels)
			if a.Type == sli.Histogram {
				s := store.Sample{Family: rt.id, Labels: labels, Value: o.Seconds, Precise: o.Precise}
				if pod != nil {
					s.Exemplar = &store.Exemplar{Namespace: pod.Namespace, Pod: pod.Name, Value: o.Seconds, Time: now}
				}
				change.Observe = append(change.Observe, s)
			} else {
				change.Add = append(change.Add, store.Sample{Family: rt.id, Labels: labels, Value: 1})
			}
		}
	}
	for _, s := range out.Skips {
		change.Add = append(change.Add, store.Sample{Family: sli.FamilySkipped, Labels: sli.SkipLabelValues(s), Value: 1})
	}
	return change
}

// meta is what the store keeps of a live pod besides its state: its name,
// node, classes, and the values of the configured pod and histogram labels.
func (r *routing) meta(pod *lifecycle.Pod) *store.PodMeta {
	m := &store.PodMeta{
		Namespace:    pod.Namespace,
		Name:         pod.Name,
		Node:         pod.NodeName,
		RuntimeClass: pod.RuntimeClass,
		StorageClass: pod.StorageClass,
	}
	if len(r.podLabels) > 0 {
		m.PodLabels = make([]string, len(r.podLabels))
		for i, k := range r.podLabels {
			m.PodLabels[i] = pod.Labels[k]
		}
	}
	m.HistogramLabels = r.histogramLabels.Values(pod)
	if pod.DeletionTimestamp != nil {
		m.DeletionDeadline = pod.DeletionTimestamp.Unix()
	}
	return m
}
