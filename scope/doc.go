// Package scope says which pods one exporter instance owns: its namespaces
// (allowlist or denylist), its node, and its shard of the pod UIDs. The
// informers narrow their watches with it, and the pipeline uses the scope
// persisted in the store to hand pods over when it changes.
package scope
