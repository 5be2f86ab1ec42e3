// Package netpolicy is the pure part of podslo's NetworkPolicy checks
// (KEP-2136): it trims a policy to the features it uses and the CIDR problems
// it has, and judges it against a network plugin profile. No I/O.
package netpolicy
