package testenv

import "testing"

func TestRenamed(t *testing.T) {
	for old, want := range map[string]string{
		`podslo_pod_readiness_duration_seconds{runtime_class="runc"}_count`: `podslo_readiness_duration_seconds{runtime_class="runc"}_count`,
		`podslo_pod_watch_current{}`:                                        `podslo_informer_pods_watch_current{}`,
		// Per-pod families and new names stay.
		`podslo_pod_readiness_seconds{pod="a"}`:                         `podslo_pod_readiness_seconds{pod="a"}`,
		`podslo_readiness_duration_seconds{runtime_class="runc"}_count`: `podslo_readiness_duration_seconds{runtime_class="runc"}_count`,
	} {
		if got := Renamed(old); got != want {
			t.Errorf("Renamed(%q) = %q, want %q", old, got, want)
		}
	}
}
