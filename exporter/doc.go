// Package exporter wires podslo's data flow into one component: informers
// feed lifecycle and the store, collectors serve /metrics from the store.
package exporter
