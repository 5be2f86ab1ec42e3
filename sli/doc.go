// Package sli declares each SLI once, in Table: the lifecycle observations
// that feed it, its store family and metric families, and its per-pod series.
// pipeline (which writes the store) and collectors (which read it) both
// derive what they need from here, so they cannot disagree.
package sli
