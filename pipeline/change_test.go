package pipeline

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/sli"
	"github.com/podslo/podslo/store"
)

// TestChange pins the outcome → store.Change step on its own: the families
// and label values of each observation, the exemplar of a live pod, the
// classes of a pod never seen live, and the skips.
func TestChange(t *testing.T) {
	r := newRouting(sli.HistogramLabels{{Name: "team", Source: sli.FromLabel, Key: "team"}}, nil)
	now := time.Unix(1700000100, 0)
	pod := startedPodNamed("web", "u1", 3)
	pod.Labels = map[string]string{"team": "pay"}
	pod.RuntimeClass = "kata"
	meta := r.meta(pod)
	assert.Equal(t, &store.PodMeta{Namespace: "ns", Name: "web", Node: "n1", RuntimeClass: "kata", StorageClass: "none", HistogramLabels: []string{"pay"}}, meta)
	deleting := *pod
	deadline := metav1.NewTime(time.Unix(1700000130, 0))
	deleting.DeletionTimestamp = &deadline
	assert.Equal(t, int64(1700000130), r.meta(&deleting).DeletionDeadline, "a pending termination's grace ends at deletionTimestamp")
	out := lifecycle.Outcome{
		Observations: []lifecycle.Observation{
			{Kind: lifecycle.SandboxCreated, Seconds: 3},
			{Kind: lifecycle.PhaseDone, Phase: lifecycle.PhaseSandbox, Seconds: 3, Precise: true},
			{Kind: lifecycle.SandboxRecreated},
		},
		Skips: []lifecycle.Skip{{SLI: lifecycle.Termination, Reason: lifecycle.Vanished}},
	}
	next := lifecycle.State{}
	got := r.change(now, "u1", next, out, meta, pod)
	ex := func(v float64) *store.Exemplar {
		return &store.Exemplar{Namespace: "ns", Pod: "web", Value: v, Time: now}
	}
	assert.Equal(t, store.Change{UID: "u1", State: next, Meta: meta,
		Observe: []store.Sample{
			{Family: "sandbox_creation{team}", Labels: []string{"kata", "none", "pay"}, Value: 3, Exemplar: ex(3)},
			// Measured in milliseconds: the histogram counts it as such.
			{Family: "startup_phase{team}", Labels: []string{"kata", "none", "sandbox", "pay"}, Value: 3, Exemplar: ex(3), Precise: true},
		},
		Add: []store.Sample{
			{Family: "sandbox_recreations{team}", Labels: []string{"kata", "none", "pay"}, Value: 1},
			{Family: sli.FamilySkipped, Labels: []string{"termination", "vanished"}, Value: 1},
		},
	}, got)
	assert.Equal(t, got, r.change(now, "u1", next, out, meta, pod), "the same outcome makes the same change")

	// A pod never seen live: unknown classes, empty histogram labels, no
	// exemplar.
	got = r.change(now, "u2", next, lifecycle.Outcome{Observations: out.Observations[:1]}, nil, nil)
	assert.Equal(t, []store.Sample{{Family: "sandbox_creation{team}", Labels: []string{ClassNeverSeen, ClassNeverSeen, ""}, Value: 3}}, got.Observe)
	assert.Nil(t, got.Meta)

	// No outcome: the state alone.
	assert.Equal(t, store.Change{UID: "u3", State: next, Meta: meta}, r.change(now, "u3", next, lifecycle.Outcome{}, meta, pod))
}
