// Package demo runs podslo on a simulated cluster on one machine: a real
// control plane with kwok's fake nodes and kubelets (deploy/kwok), a
// workload with churn, the exporter and one agent per node, and optionally
// Prometheus. `podslo demo` and the end-to-end tests start it.
package demo
