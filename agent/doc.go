// Package agent runs on each node and writes the pod conditions the kubelet
// does not, starting with podslo.io/Stable: it watches only its node's pods,
// decides with a pure rule (stable.go), and patches only the types it owns.
package agent
