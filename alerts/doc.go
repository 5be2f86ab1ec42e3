// Package alerts turns slos.yaml, the SLO specification, into the monitoring
// mixin's prometheus_rules.yaml (error ratios per window) and
// prometheus_alerts.yaml (multi-window, multi-burn-rate and health alerts).
package alerts

//go:generate go run ./gen -spec slos.yaml -rules prometheus_rules.yaml -alerts prometheus_alerts.yaml -chart ../charts/podslo
