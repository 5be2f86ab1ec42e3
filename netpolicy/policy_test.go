package netpolicy

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var (
	tcp, udp, sctp = corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP
	ingressOnly    = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	egressOnly     = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
	both           = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
)

func num(n int) *intstr.IntOrString      { v := intstr.FromInt32(int32(n)); return &v }
func named(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
func sel(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}
func block(cidr string, except ...string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr, Except: except}}
}
func from(peers ...networkingv1.NetworkPolicyPeer) []networkingv1.NetworkPolicyIngressRule {
	return []networkingv1.NetworkPolicyIngressRule{{From: peers}}
}
func to(peers ...networkingv1.NetworkPolicyPeer) []networkingv1.NetworkPolicyEgressRule {
	return []networkingv1.NetworkPolicyEgressRule{{To: peers}}
}

// featureSpecs is one spec per feature of the table (and a few more), with
// the exact features and minVersion each must yield. The integration test
// in exporter/ creates the same specs on a real API server.
func featureSpecs() []struct {
	name     string
	spec     networkingv1.NetworkPolicySpec
	features []string
	min      string
} {
	end := int32(9000)
	return []struct {
		name     string
		spec     networkingv1.NetworkPolicySpec
		features []string
		min      string
	}{
		{"deny all ingress", networkingv1.NetworkPolicySpec{PolicyTypes: ingressOnly}, []string{"ingress"}, "1.3"},
		{"pod selector and TCP port", networkingv1.NetworkPolicySpec{PolicyTypes: ingressOnly, Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From: []networkingv1.NetworkPolicyPeer{{PodSelector: sel("app", "web")}}, Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: num(80)}}}}},
			[]string{"ingress", "podSelector", "ports"}, "1.3"},
		{"namespace selector and UDP, protocol defaulted", networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("team", "a")}}, Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: num(53)}, {Port: num(53)}}}}},
			[]string{"ingress", "namespaceSelector", "ports"}, "1.3"},
		{"named port", networkingv1.NetworkPolicySpec{PolicyTypes: ingressOnly, Ingress: []networkingv1.NetworkPolicyIngressRule{{
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: named("http")}}}}},
			[]string{"ingress", "ports", "namedPorts"}, "1.3"},
		{"deny all egress", networkingv1.NetworkPolicySpec{PolicyTypes: egressOnly}, []string{"egress"}, "1.8"},
		{"ingress ipBlock", networkingv1.NetworkPolicySpec{PolicyTypes: ingressOnly, Ingress: from(block("10.0.0.0/8", "10.1.0.0/16"))},
			[]string{"ingress", "ipBlock"}, "1.8"},
		{"egress rules without policyTypes", networkingv1.NetworkPolicySpec{Egress: to(networkingv1.NetworkPolicyPeer{PodSelector: sel()})},
			[]string{"ingress", "podSelector", "egress"}, "1.8"},
		{"IPv6 ipBlock", networkingv1.NetworkPolicySpec{PolicyTypes: egressOnly, Egress: to(block("2001:db8::/32"))},
			[]string{"egress", "ipBlock", "ipv6"}, "1.9"},
		{"IPv6 except only", networkingv1.NetworkPolicySpec{PolicyTypes: egressOnly, Egress: to(block("::/0", "2001:db8::/32"))},
			[]string{"egress", "ipBlock", "ipv6"}, "1.9"},
		{"pod and namespace selector in one peer", networkingv1.NetworkPolicySpec{PolicyTypes: ingressOnly, Ingress: from(networkingv1.NetworkPolicyPeer{PodSelector: sel("app", "db"), NamespaceSelector: sel("team", "a")})},
			[]string{"ingress", "podSelector", "namespaceSelector", "podAndNamespaceSelector"}, "1.11"},
		{"SCTP", networkingv1.NetworkPolicySpec{PolicyTypes: ingressOnly, Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: []networkingv1.NetworkPolicyPort{{Protocol: &sctp, Port: num(9)}}}}},
			[]string{"ingress", "sctp"}, "1.12"},
		{"endPort", networkingv1.NetworkPolicySpec{PolicyTypes: egressOnly, Egress: []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: num(8000), EndPort: &end}}}}},
			[]string{"ports", "egress", "endPort"}, "1.21"},
		{"namespace by name, matchLabels", networkingv1.NetworkPolicySpec{PolicyTypes: ingressOnly, Ingress: from(networkingv1.NetworkPolicyPeer{NamespaceSelector: sel(NamespaceNameLabel, "monitoring")})},
			[]string{"ingress", "namespaceSelector", "namespaceByName"}, "1.21"},
		{"namespace by name, matchExpressions", networkingv1.NetworkPolicySpec{PolicyTypes: ingressOnly, Ingress: from(networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: NamespaceNameLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}}})},
			[]string{"ingress", "namespaceSelector", "namespaceByName"}, "1.21"},
		{"egress rules ignored by policyTypes Ingress", networkingv1.NetworkPolicySpec{PolicyTypes: ingressOnly, Egress: to(block("2001:db8::/32"))},
			[]string{"ingress"}, "1.3"},
		{"ingress rules ignored by policyTypes Egress", networkingv1.NetworkPolicySpec{PolicyTypes: egressOnly, Ingress: from(networkingv1.NetworkPolicyPeer{PodSelector: sel(), NamespaceSelector: sel()})},
			[]string{"egress"}, "1.8"},
		{"everything", networkingv1.NetworkPolicySpec{PolicyTypes: both,
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: sel(), NamespaceSelector: sel(NamespaceNameLabel, "x")}}, Ports: []networkingv1.NetworkPolicyPort{{Protocol: &sctp, Port: named("s")}}}},
			Egress:  []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{block("fd00::/8")}, Ports: []networkingv1.NetworkPolicyPort{{Port: num(1), EndPort: &end}}}}},
			FeatureNames(), "1.21"},
	}
}

func TestAnalyzeFeaturesAndMinVersion(t *testing.T) {
	for _, tc := range featureSpecs() {
		t.Run(tc.name, func(t *testing.T) {
			f, problems := Analyze(&tc.spec)
			assert.Equal(t, tc.features, f.Names())
			assert.Equal(t, tc.min, f.MinVersion().String())
			assert.Empty(t, problems)
		})
	}
}

func TestCIDRProblems(t *testing.T) {
	for _, tc := range []struct {
		name  string
		peers []networkingv1.NetworkPolicyPeer
		want  []Problem
	}{
		{"clean", []networkingv1.NetworkPolicyPeer{block("192.168.1.0/24", "192.168.1.128/25")}, nil},
		{"KEP's example", []networkingv1.NetworkPolicyPeer{block("192.168.1.5/24")},
			[]Problem{{ReasonAmbiguousCIDR, "Interpreting 192.168.1.5/24 as 192.168.1.0/24 rather than 192.168.1.5/32"}}},
		{"IPv6 host bits", []networkingv1.NetworkPolicyPeer{block("2001:db8::1/64")},
			[]Problem{{ReasonAmbiguousCIDR, "Interpreting 2001:db8::1/64 as 2001:db8::/64 rather than 2001:db8::1/128"}}},
		{"except with host bits, inside once masked", []networkingv1.NetworkPolicyPeer{block("10.0.0.0/8", "10.1.2.3/16")},
			[]Problem{{ReasonAmbiguousCIDR, "Interpreting 10.1.2.3/16 as 10.1.0.0/16 rather than 10.1.2.3/32"}}},
		{"except outside", []networkingv1.NetworkPolicyPeer{block("10.0.0.0/16", "10.1.0.0/24")},
			[]Problem{{ReasonExceptOutsideCIDR, "except 10.1.0.0/24 is not a strict subset of cidr 10.0.0.0/16"}}},
		{"except equal to cidr", []networkingv1.NetworkPolicyPeer{block("10.0.0.0/16", "10.0.0.0/16")},
			[]Problem{{ReasonExceptOutsideCIDR, "except 10.0.0.0/16 is not a strict subset of cidr 10.0.0.0/16"}}},
		{"except larger than cidr", []networkingv1.NetworkPolicyPeer{block("10.0.0.0/16", "10.0.0.0/8")},
			[]Problem{{ReasonExceptOutsideCIDR, "except 10.0.0.0/8 is not a strict subset of cidr 10.0.0.0/16"}}},
		{"except of the other family", []networkingv1.NetworkPolicyPeer{block("0.0.0.0/0", "2001:db8::/32")},
			[]Problem{{ReasonExceptOutsideCIDR, "except 2001:db8::/32 is not a strict subset of cidr 0.0.0.0/0"}}},
		{"host bits on both, except outside once masked", []networkingv1.NetworkPolicyPeer{block("10.0.0.9/24", "10.0.1.1/25")}, []Problem{
			{ReasonAmbiguousCIDR, "Interpreting 10.0.0.9/24 as 10.0.0.0/24 rather than 10.0.0.9/32"},
			{ReasonAmbiguousCIDR, "Interpreting 10.0.1.1/25 as 10.0.1.0/25 rather than 10.0.1.1/32"},
			{ReasonExceptOutsideCIDR, "except 10.0.1.1/25 is not a strict subset of cidr 10.0.0.9/24"}}},
		{"leading zeros, as old servers accepted", []networkingv1.NetworkPolicyPeer{block("010.0.0.0/8")},
			[]Problem{{ReasonInvalidCIDR, `Cannot parse "010.0.0.0/8" as a CIDR`}}},
		{"garbage except", []networkingv1.NetworkPolicyPeer{block("10.0.0.0/8", "nope")},
			[]Problem{{ReasonInvalidCIDR, `Cannot parse "nope" as a CIDR`}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Checked in both directions, also in one the policy ignores.
			_, problems := Analyze(&networkingv1.NetworkPolicySpec{PolicyTypes: ingressOnly, Egress: to(tc.peers...)})
			assert.Equal(t, tc.want, problems)
			_, problems = Analyze(&networkingv1.NetworkPolicySpec{Ingress: from(tc.peers...)})
			assert.Equal(t, tc.want, problems)
		})
	}
}

func TestTrim(t *testing.T) {
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p", UID: "u", Labels: map[string]string{"x": "y"}, Annotations: map[string]string{"big": "..."}},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, PolicyTypes: ingressOnly,
			Ingress: from(block("192.168.1.5/24"))},
	}
	p := Trim(np)
	assert.Equal(t, "a/p", p.Key())
	assert.Equal(t, "u", string(p.UID))
	assert.Equal(t, "ingress,ipBlock", p.Features.String())
	assert.Equal(t, "1.8", p.MinVersion().String())
	assert.Equal(t, []Problem{{ReasonAmbiguousCIDR, "Interpreting 192.168.1.5/24 as 192.168.1.0/24 rather than 192.168.1.5/32"}}, p.Problems)
	assert.Equal(t, "app=web", p.PodSelector.String())

	np.Spec.PodSelector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bogus"}}}
	assert.Nil(t, Trim(np).PodSelector, "a selector that does not parse selects nothing podslo can count")
}

func TestVersions(t *testing.T) {
	var got []string
	for _, v := range Versions() {
		got = append(got, v.String())
	}
	assert.Equal(t, []string{"1.3", "1.8", "1.9", "1.11", "1.12", "1.21"}, got)
	for _, tc := range []struct{ in, err string }{
		{"1.8", ""}, {"1.30", ""}, {"1.3", ""},
		{"1.2", `"1.2" is older than NetworkPolicy itself (1.3)`},
		{"1.08", `"1.08" is not a version: want 1.N, such as "1.8"`},
		{"v1.8", `"v1.8" is not a version: want 1.N, such as "1.8"`},
		{"1.8.0", `"1.8.0" is not a version: want 1.N, such as "1.8"`},
		{"2.0", `"2.0" is not a version: want 1.N, such as "1.8"`},
	} {
		v, err := ParseVersion(tc.in)
		if tc.err != "" {
			assert.EqualError(t, err, tc.err, tc.in)
			continue
		}
		if assert.NoError(t, err, tc.in) {
			assert.Equal(t, tc.in, v.String())
		}
	}
}
