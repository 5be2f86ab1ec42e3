// Package harness starts and deletes the kwok cluster that hack/chaos and
// hack/scale run on and fills it in parallel (Parallel, Node).
// deploy/kwok/classes.yaml's classes are created by podslo's deploy/kwok
// (kwok.ApplyClasses), which the demo shares.
package harness
