// Package store persists, per pod UID, what lifecycle has already seen, and
// the SLI aggregates built from it, in one badger transaction per change: an
// observation is on disk exactly when its pod is marked as observed.
package store
