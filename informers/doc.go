// Package informers is the first step of podslo's data flow: it watches pods,
// PVCs, StorageClasses, FailedMount events, NetworkPolicies and, for the node
// and workload histogram labels, Node, ReplicaSet and Job metadata, trims them
// to what the SLIs and checks need, and hands each on (pipeline, netpolicy.State).
package informers
