package netpolicy

import (
	"fmt"
	"net/netip"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
)

// Problem is one thing wrong with a policy that the API server let through
// (KEP-2136's "Problem" condition, Story 4).
type Problem struct {
	Reason  string
	Message string
}

// Reasons of a Problem, in the order the Problem condition prefers them
// when a policy has several: the first can open the door wider than the
// author meant.
const (
	// ReasonAmbiguousCIDR: a cidr or except with bits set beyond its
	// prefix length. KEP-2136's own example; v1.36 API servers refuse new
	// ones (KEP-4858, StrictIPCIDRValidation), older ones stored them.
	ReasonAmbiguousCIDR = "AmbiguousCIDR"
	// ReasonInvalidCIDR: a cidr or except that does not parse as one, such
	// as leading zeros older API servers accepted ("010.0.0.0/8"), which
	// plugins read as decimal, octal or not at all.
	ReasonInvalidCIDR = "InvalidCIDR"
	// ReasonExceptOutsideCIDR: an except that is not a strict subset of
	// its cidr, so it excludes nothing the block allows, or everything.
	ReasonExceptOutsideCIDR = "ExceptOutsideCIDR"
)

var problemOrder = []string{ReasonAmbiguousCIDR, ReasonInvalidCIDR, ReasonExceptOutsideCIDR}

func peerProblems(out []Problem, peers []networkingv1.NetworkPolicyPeer) []Problem {
	for i := range peers {
		b := peers[i].IPBlock
		if b == nil {
			continue
		}
		cidr, ok := parseCIDR(&out, b.CIDR)
		for _, e := range b.Except {
			except, eok := parseCIDR(&out, e)
			if ok && eok && !strictSubset(except, cidr) {
				out = append(out, Problem{ReasonExceptOutsideCIDR,
					fmt.Sprintf("except %s is not a strict subset of cidr %s", e, b.CIDR)})
			}
		}
	}
	return out
}

// parseCIDR parses s as a plugin would (masking host bits), and records the
// problems of how it is written.
func parseCIDR(out *[]Problem, s string) (netip.Prefix, bool) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		*out = append(*out, Problem{ReasonInvalidCIDR, fmt.Sprintf("Cannot parse %q as a CIDR", s)})
		return netip.Prefix{}, false
	}
	if masked := p.Masked(); masked.Addr() != p.Addr() {
		// KEP-2136's message: "Interpreting 192.168.1.5/24 as
		// 192.168.1.0/24 rather than 192.168.1.5/32".
		*out = append(*out, Problem{ReasonAmbiguousCIDR,
			fmt.Sprintf("Interpreting %s as %s rather than %s/%d", s, masked, p.Addr(), p.Addr().BitLen())})
		return masked, true
	}
	return p, true
}

// strictSubset: inner lies inside outer and is smaller, as the API server
// requires of an except.
func strictSubset(inner, outer netip.Prefix) bool {
	return inner.Addr().Is4() == outer.Addr().Is4() && inner.Bits() > outer.Bits() && outer.Contains(inner.Addr())
}

// isIPv6 reports whether a cidr is written as IPv6; one that does not parse
// counts when it has a colon, as only IPv6 does.
func isIPv6(s string) bool {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Addr().Is6()
	}
	return strings.Contains(s, ":")
}
