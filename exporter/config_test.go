package exporter

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	podslocollectors "github.com/podslo/podslo/collectors"
	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/sli"
	"github.com/podslo/podslo/store"
)

// TestNewResolvesOneConfig: New resolves, once, the configuration that the
// pipeline and the informers are both built from, with lifecycle's
// defaults for what the options leave unset, and Options reports them.
func TestNewResolvesOneConfig(t *testing.T) {
	e, err := New(Options{
		StateDir:            store.InMemory,
		PodLabels:           []string{"app"},
		HistogramLabels:     []string{"team=label:team", "tier=annotation:example.com/tier"},
		StableConditionType: "example.com/Stable",
		MaxObservationAge:   2 * time.Hour,
		WatchTolerance:      100 * time.Millisecond,
	})
	require.NoError(t, err)
	assert.Equal(t, lifecycle.Config{
		SandboxConditionTypes:  lifecycle.DefaultSandboxConditionTypes,
		MaxObservationAge:      2 * time.Hour,
		WatchTolerance:         100 * time.Millisecond,
		SandboxCreationTimeout: lifecycle.DefaultSandboxCreationTimeout,
		StableConditionType:    "example.com/Stable",
	}, e.cfg.lifecycle)
	assert.Equal(t, sli.HistogramLabels{{Name: "team", Source: sli.FromLabel, Key: "team"}, {Name: "tier", Source: sli.FromAnnotation, Key: "example.com/tier"}}, e.cfg.histogramLabels)
	assert.Equal(t, podslocollectors.Labels{Pod: []string{"app"}, Histogram: []string{"team", "tier"}}, e.cfg.labels)
	assert.Equal(t, []string{"app", "team"}, e.cfg.keepLabels, "the trim keeps the pod labels and the histogram labels' sources")
	assert.Equal(t, []string{"example.com/tier"}, e.cfg.keepAnnotations)

	o := e.Options()
	assert.Equal(t, 2*time.Hour, o.MaxObservationAge)
	assert.Equal(t, lifecycle.DefaultSandboxCreationTimeout, o.SandboxCreationTimeout)
	assert.Equal(t, []string{string(corev1.PodReadyToStartContainers), "PodHasNetwork"}, o.SandboxConditionTypes)
	assert.Equal(t, "example.com/Stable", o.StableConditionType)
}

func TestNewRejectsHistogramLabels(t *testing.T) {
	for spec, want := range map[string]string{
		"team":              `--histogram-label "team": want NAME=label:KEY, NAME=annotation:KEY, NAME=node-label:KEY or NAME=owner-kind`,
		"phase=label:phase": `--histogram-label: histogram label name "phase" is used twice or clashes with a built-in label`,
	} {
		_, err := New(Options{StateDir: store.InMemory, HistogramLabels: []string{spec}})
		assert.ErrorContains(t, err, want, spec)
	}
}

// TestNewResolvesDimensionWatches: the Node watch keeps exactly the node
// label keys, the ReplicaSet and Job watches run only for owner-kind, and
// neither key reaches the pod trim.
func TestNewResolvesDimensionWatches(t *testing.T) {
	e, err := New(Options{StateDir: store.InMemory, HistogramLabels: []string{"zone=node-label:topology.kubernetes.io/zone", "kind=owner-kind", "team=label:team"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"topology.kubernetes.io/zone"}, e.cfg.nodeLabels)
	assert.True(t, e.cfg.ownerKind)
	assert.Equal(t, []string{"team"}, e.cfg.keepLabels)
	assert.Empty(t, e.cfg.keepAnnotations)
	assert.Equal(t, []string{"zone", "kind", "team"}, e.cfg.labels.Histogram)

	e, err = New(Options{StateDir: store.InMemory, HistogramLabels: []string{"team=label:team"}})
	require.NoError(t, err)
	assert.Empty(t, e.cfg.nodeLabels, "no Node watch")
	assert.False(t, e.cfg.ownerKind, "no ReplicaSet or Job watch")
}
