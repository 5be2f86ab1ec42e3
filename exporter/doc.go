// Package exporter wires podslo's data flow into one component: informers
// hand pods to the pipeline, which runs lifecycle and writes the store, and
// collectors serve /metrics and the landing page's class table from it.
package exporter
