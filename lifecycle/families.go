package lifecycle

import "strings"

// Aggregate families: the store's name for each persisted series group. The
// collectors turn them into the metric families of docs/metrics.md.
const (
	FamilySandboxCreation         = "sandbox_creation"
	FamilySandboxRecreations      = "sandbox_recreations"
	FamilySandboxCreationTimeouts = "sandbox_creation_timeouts"
	FamilySandboxCreationsExcl    = "sandbox_creations_excluded"
	FamilyTermination             = "termination"
	FamilyTerminationsOverGrace   = "terminations_over_grace"
	FamilyReadiness               = "readiness"
	FamilyStartupPhase            = "startup_phase"
	FamilyStabilization           = "stabilization"
	FamilyStableTransitions       = "stable_transitions"
	FamilySkipped                 = "skipped"
)

// FamilyID names a family together with the names of its configured extra
// dimensions, so that series persisted under another --histogram-label set
// are never exposed under the wrong label names after a restart.
func FamilyID(family string, extraLabels []string) string {
	if len(extraLabels) == 0 {
		return family
	}
	return family + "{" + strings.Join(extraLabels, ",") + "}"
}
