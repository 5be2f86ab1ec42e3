package lifecycle

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

func TestConfigWithDefaults(t *testing.T) {
	assert.Equal(t, Config{
		SandboxConditionTypes:  DefaultSandboxConditionTypes,
		MaxObservationAge:      DefaultMaxObservationAge,
		SandboxCreationTimeout: DefaultSandboxCreationTimeout,
		StableConditionType:    DefaultStableConditionType,
		WatchTolerance:         DefaultWatchTolerance,
	}, Config{}.WithDefaults())
	set := Config{
		SandboxConditionTypes:  []corev1.PodConditionType{"example.com/Sandbox"},
		MaxObservationAge:      time.Minute,
		SandboxCreationTimeout: time.Second,
		StableConditionType:    "example.com/Stable",
		WatchTolerance:         time.Millisecond,
	}
	assert.Equal(t, set, set.WithDefaults(), "a set field keeps its value")
}

// TestConditionTypes pins the conditions a trim must keep for Step: a
// condition missing here would be trimmed away and its SLI never observed.
func TestConditionTypes(t *testing.T) {
	assert.Equal(t, []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.PodReady, corev1.PodReadyToStartContainers, "PodHasNetwork", DefaultStableConditionType},
		(&Config{}).ConditionTypes())
	assert.Equal(t, []corev1.PodConditionType{corev1.PodScheduled, corev1.PodInitialized, corev1.PodReady, "example.com/Sandbox", "example.com/Stable"},
		(&Config{SandboxConditionTypes: []corev1.PodConditionType{"example.com/Sandbox"}, StableConditionType: "example.com/Stable"}).ConditionTypes())
}
