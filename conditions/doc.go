// Package conditions is how the node agent reports back to the API server: it
// sets only the KEP-1623 conditions it owns (such as podslo.io/Stable) and builds
// the strategic-merge PATCH for pods/status that leaves the kubelet's conditions alone.
package conditions
