package testenv

import "strings"

// renamed0_2 maps the families release 0.2.0 renamed (CHANGELOG.md) to
// their new names: the aggregated ones out of the per-pod podslo_pod_
// prefix, which a relabelling that drops per-pod series would catch.
var renamed0_2 = strings.NewReplacer(
	"podslo_pod_termination_duration_seconds", "podslo_termination_duration_seconds",
	"podslo_pod_terminations_over_grace_total", "podslo_terminations_over_grace_total",
	"podslo_pod_readiness_duration_seconds", "podslo_readiness_duration_seconds",
	"podslo_pod_startup_phase_duration_seconds", "podslo_startup_phase_duration_seconds",
	"podslo_pod_stabilization_duration_seconds", "podslo_stabilization_duration_seconds",
	"podslo_pod_stable_transitions_total", "podslo_stable_transitions_total",
	"podslo_pod_image_pull_duration_seconds", "podslo_image_pull_duration_seconds",
	"podslo_pod_image_pulls_failed_total", "podslo_image_pulls_failed_total",
	"podslo_pod_startup_sli_duration_seconds", "podslo_startup_sli_duration_seconds",
	"podslo_pod_watch_current", "podslo_informer_pods_watch_current",
)

// Renamed is a series of an earlier release (SeriesValues' key) under the
// names of this one: what an upgrade carries it over as.
func Renamed(series string) string { return renamed0_2.Replace(series) }
