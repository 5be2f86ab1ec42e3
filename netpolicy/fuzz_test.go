package netpolicy

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// specReader builds a NetworkPolicySpec from fuzz bytes; running out of
// bytes reads zeros.
type specReader struct {
	b     []byte
	cidrs []string
}

func (r *specReader) byte() byte {
	if len(r.b) == 0 {
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *specReader) cidr() string { return r.cidrs[int(r.byte())%len(r.cidrs)] }

func (r *specReader) selector() *metav1.LabelSelector {
	switch r.byte() % 4 {
	case 0:
		return nil
	case 1:
		return &metav1.LabelSelector{}
	case 2:
		return &metav1.LabelSelector{MatchLabels: map[string]string{NamespaceNameLabel: "x"}}
	}
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: NamespaceNameLabel, Operator: metav1.LabelSelectorOperator([]string{"In", "Exists", "Bogus"}[r.byte()%3])}}}
}

func (r *specReader) peers() []networkingv1.NetworkPolicyPeer {
	out := make([]networkingv1.NetworkPolicyPeer, r.byte()%4)
	for i := range out {
		out[i] = networkingv1.NetworkPolicyPeer{PodSelector: r.selector(), NamespaceSelector: r.selector()}
		if r.byte()%2 == 1 {
			b := &networkingv1.IPBlock{CIDR: r.cidr()}
			for range r.byte() % 3 {
				b.Except = append(b.Except, r.cidr())
			}
			out[i].IPBlock = b
		}
	}
	return out
}

func (r *specReader) ports() []networkingv1.NetworkPolicyPort {
	out := make([]networkingv1.NetworkPolicyPort, r.byte()%3)
	for i := range out {
		if c := r.byte() % 5; c > 0 {
			p := []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP, "ICMP"}[c-1]
			out[i].Protocol = &p
		}
		switch r.byte() % 3 {
		case 1:
			v := intstr.FromInt32(int32(r.byte()))
			out[i].Port = &v
		case 2:
			v := intstr.FromString(string(rune('a' + r.byte()%26)))
			out[i].Port = &v
		}
		if r.byte()%2 == 1 {
			e := int32(r.byte())
			out[i].EndPort = &e
		}
	}
	return out
}

func (r *specReader) spec() networkingv1.NetworkPolicySpec {
	var s networkingv1.NetworkPolicySpec
	types := r.byte()
	for i, t := range []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress, "Bogus"} {
		if types&(1<<i) != 0 {
			s.PolicyTypes = append(s.PolicyTypes, t)
		}
	}
	for range r.byte() % 3 {
		s.Ingress = append(s.Ingress, networkingv1.NetworkPolicyIngressRule{Ports: r.ports(), From: r.peers()})
	}
	for range r.byte() % 3 {
		s.Egress = append(s.Egress, networkingv1.NetworkPolicyEgressRule{Ports: r.ports(), To: r.peers()})
	}
	return s
}

var validReasons = map[ConditionType][]string{
	TypeSupported: {ReasonVersion, ReasonUnimplemented, ReasonImplemented, ReasonNoProfile},
	TypeProblem:   {ReasonAmbiguousCIDR, ReasonInvalidCIDR, ReasonExceptOutsideCIDR, ReasonNone},
	TypeEnforcing: {ReasonNoProfile, ReasonProfile},
}

// FuzzAnalyze feeds the minVersion and CIDR checks arbitrary specs, with
// two arbitrary CIDR strings among well-formed and malformed ones, and
// checks what must hold for any input: no panic, a minVersion from the
// table and equal to its newest feature's, the same answer twice, and
// conditions whose reasons come from the bounded set.
func FuzzAnalyze(f *testing.F) {
	f.Add([]byte{1, 1, 0, 2, 3, 1, 1, 1, 1, 1, 2}, "192.168.1.5/24", "10.0.0.0/8")
	f.Add([]byte{3, 2, 2, 1, 2, 3, 3, 2, 1, 2, 1, 3, 4, 2, 2, 1, 9, 1, 1, 0, 1, 3}, "2001:db8::1/64", "::ffff:10.0.0.0/104")
	f.Add([]byte{2, 0, 2, 1, 1, 1, 1, 0, 1, 2, 5, 6}, "010.0.0.0/8", "10.0.0.0/33")
	f.Fuzz(func(t *testing.T, data []byte, cidr1, cidr2 string) {
		r := &specReader{b: data, cidrs: []string{cidr1, cidr2, "10.0.0.0/8", "10.1.2.3/16", "fd00::/8", "", "1.2.3.4", "0.0.0.0/0"}}
		spec := r.spec()
		feats, problems := Analyze(&spec)
		again, problems2 := Analyze(&spec)
		if feats != again || !slices.Equal(problems, problems2) {
			t.Fatalf("two analyses differ: %v %v / %v %v", feats, problems, again, problems2)
		}
		min := feats.MinVersion()
		if !slices.Contains(Versions(), min) {
			t.Fatalf("minVersion %s not in the table", min)
		}
		newest := Base
		for _, name := range feats.Names() {
			row, _ := FeatureByName(name)
			newest = max(newest, row.Version)
		}
		if newest != min {
			t.Fatalf("minVersion %s, newest feature %s", min, newest)
		}
		p := Trim(&networkingv1.NetworkPolicy{Spec: spec})
		for _, profile := range []*Profile{nil, {Name: "p", MaxVersion: 8, Unimplemented: Features(Egress)}, {Name: "q", MaxVersion: 21, Enforcing: StatusFalse}} {
			for _, c := range Conditions(p, profile) {
				if !slices.Contains(validReasons[c.Type], c.Reason) || c.Message == "" {
					t.Fatalf("condition %+v outside the bounded set", c)
				}
			}
			if got := Conditions(p, profile)[1].Status == StatusTrue; got != (len(problems) > 0) {
				t.Fatalf("Problem %v with problems %v", got, problems)
			}
		}
	})
}
