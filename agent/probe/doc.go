// Package probe is the pure part of the agent's sub-second readiness probes:
// it parses a pod's podslo.io/readiness-probe annotation (KEP-3066 fields), resolves
// its target against the pod, and runs it over the network the way the kubelet does.
package probe
