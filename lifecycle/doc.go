// Package lifecycle is the pure step of podslo's data flow (informers →
// pipeline → store → collectors): the pipeline calls it with a pod and what
// was remembered of its UID, and it decides which SLI observations are new.
package lifecycle
