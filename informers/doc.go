// Package informers is the first step of podslo's data flow: it watches pods,
// PVCs, StorageClasses, FailedMount events and NetworkPolicies, trims them to
// what the SLIs and checks need, and hands each on (pipeline, netpolicy.State).
package informers
