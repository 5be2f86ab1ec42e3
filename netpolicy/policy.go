package netpolicy

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Policy is a NetworkPolicy trimmed to what the checks read: the features
// it uses and the problems of its CIDRs, computed once when the watch
// delivers it, and the selector of the pods it applies to. About 200 bytes
// instead of the kilobytes of a full object.
type Policy struct {
	Namespace, Name string
	UID             types.UID
	Features        Features
	// Problems are the CIDR problems, in spec order; nil for most policies.
	Problems []Problem
	// PodSelector is spec.podSelector; nil when it does not parse, which an
	// API server never lets through.
	PodSelector labels.Selector
}

// Key is namespace/name, the key of the informer cache.
func (p *Policy) Key() string { return p.Namespace + "/" + p.Name }

// GetObjectMeta implements metav1.ObjectMetaAccessor, so that the informer
// cache can key a trimmed policy as it keys the full one.
func (p *Policy) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID}
}

// MinVersion is KEP-2136's minVersion of the policy.
func (p *Policy) MinVersion() Version { return p.Features.MinVersion() }

// Trim returns the policy's trimmed form. It never fails: a spec no API
// server accepts (found by fuzzing) still yields features and problems.
func Trim(np *networkingv1.NetworkPolicy) *Policy {
	p := &Policy{Namespace: np.Namespace, Name: np.Name, UID: np.UID}
	p.Features, p.Problems = Analyze(&np.Spec)
	if sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector); err == nil {
		p.PodSelector = sel
	}
	return p
}

// Analyze returns the features spec uses and the problems of its CIDRs.
//
// A direction counts when the policy applies to it: policyTypes lists it,
// or, with no policyTypes (the API server defaults them, so only a spec
// that never went through one), Ingress always and Egress when there are
// egress rules. Rules of a direction the policy does not apply to are
// ignored by plugins, so they add no feature; their CIDRs are still
// checked, since they are still wrong.
func Analyze(spec *networkingv1.NetworkPolicySpec) (Features, []Problem) {
	var f Features
	ingress, egress := directions(spec)
	if ingress {
		f.add(Ingress)
		for i := range spec.Ingress {
			f |= rule(spec.Ingress[i].Ports, spec.Ingress[i].From)
		}
	}
	if egress {
		f.add(Egress)
		for i := range spec.Egress {
			f |= rule(spec.Egress[i].Ports, spec.Egress[i].To)
		}
	}
	var problems []Problem
	for i := range spec.Ingress {
		problems = peerProblems(problems, spec.Ingress[i].From)
	}
	for i := range spec.Egress {
		problems = peerProblems(problems, spec.Egress[i].To)
	}
	return f, problems
}

func directions(spec *networkingv1.NetworkPolicySpec) (ingress, egress bool) {
	if len(spec.PolicyTypes) == 0 {
		return true, len(spec.Egress) > 0
	}
	for _, t := range spec.PolicyTypes {
		switch t {
		case networkingv1.PolicyTypeIngress:
			ingress = true
		case networkingv1.PolicyTypeEgress:
			egress = true
		}
	}
	return ingress, egress
}

func rule(ports []networkingv1.NetworkPolicyPort, peers []networkingv1.NetworkPolicyPeer) Features {
	var f Features
	for i := range ports {
		f |= port(&ports[i])
	}
	for i := range peers {
		f |= peer(&peers[i])
	}
	return f
}

func port(p *networkingv1.NetworkPolicyPort) Features {
	var f Features
	switch {
	case p.Protocol == nil, *p.Protocol == corev1.ProtocolTCP, *p.Protocol == corev1.ProtocolUDP:
		f.add(Ports)
	case *p.Protocol == corev1.ProtocolSCTP:
		f.add(SCTP)
	}
	// Any other protocol is refused by every API server; it needs nothing
	// podslo could name.
	if p.Port != nil && p.Port.Type == intstr.String {
		f.add(NamedPorts)
	}
	if p.EndPort != nil {
		f.add(EndPort)
	}
	return f
}

func peer(p *networkingv1.NetworkPolicyPeer) Features {
	var f Features
	if p.PodSelector != nil {
		f.add(PodSelector)
	}
	if p.NamespaceSelector != nil {
		f.add(NamespaceSelector)
		if selectsByName(p.NamespaceSelector) {
			f.add(NamespaceByName)
		}
	}
	if p.PodSelector != nil && p.NamespaceSelector != nil {
		// The KEP's example: a plugin older than 1.11 reads the namespace
		// selector alone and admits every pod of those namespaces.
		f.add(PodAndNamespaceSelector)
	}
	if b := p.IPBlock; b != nil {
		f.add(IPBlock)
		if isIPv6(b.CIDR) {
			f.add(IPv6)
		}
		for _, e := range b.Except {
			if isIPv6(e) {
				f.add(IPv6)
			}
		}
	}
	return f
}

func selectsByName(s *metav1.LabelSelector) bool {
	if _, ok := s.MatchLabels[NamespaceNameLabel]; ok {
		return true
	}
	for _, r := range s.MatchExpressions {
		if r.Key == NamespaceNameLabel {
			return true
		}
	}
	return false
}
