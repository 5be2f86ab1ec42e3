// Package exporter wires podslo's data flow into one component: informers
// feed lifecycle and the store, collectors serve /metrics and the landing
// page's per-class table from the store.
package exporter
