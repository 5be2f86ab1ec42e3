// Package harness starts and deletes the kwok cluster that hack/chaos and
// hack/scale run on, fills it in parallel (Parallel, Node), and creates
// deploy/kwok/classes.yaml's classes (ApplyClasses).
package harness
