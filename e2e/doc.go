// Package e2e runs podslo end to end on a simulated cluster (package demo:
// a real control plane, kwok's nodes and kubelets) with a real Prometheus,
// and checks what an operator sees: quantiles, dashboards and alerts.
package e2e
