package lifecycle

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkStepNoChange is Step on a pod that is started, Ready and
// Stable, whose state already holds all of it: the common update, which
// copies and compares a State and changes nothing. It fails if the state
// changed.
func BenchmarkStepNoChange(b *testing.B) {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) int64 { return created.Unix() + int64(s) }
	pod := podWith(
		Condition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: at(1)},
		Condition{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: at(3)},
		Condition{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: at(3)},
		Condition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: at(6)},
		Condition{Type: DefaultStableConditionType, Status: corev1.ConditionTrue, LastTransitionTime: at(20)},
	)
	pod.CreationTimestamp = metav1.NewTime(created)
	pod.ContainersStarted, pod.FirstContainerStart = at(5), at(4)
	pod.Containers, pod.ContainersRunning = 2, 2
	cfg := (&Config{}).WithDefaults()
	now := created.Add(time.Minute)
	st, _ := Step(now, pod, Inputs{}, State{}, &cfg)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		next, out := Step(now, pod, Inputs{}, st, &cfg)
		if next != st || !out.Empty() {
			b.Fatal("a no-change update changed the state")
		}
	}
}
