package collectors

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podslo/podslo/netpolicy"
)

func npState(countPods bool) *netpolicy.State {
	s := netpolicy.NewState(countPods)
	ingress := []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	for _, np := range []*networkingv1.NetworkPolicy{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web"}, Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}, PolicyTypes: ingress}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "egress"}, Spec: networkingv1.NetworkPolicySpec{
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress:      []networkingv1.NetworkPolicyEgressRule{{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "192.168.1.5/24"}}}}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "combined"}, Spec: networkingv1.NetworkPolicySpec{PolicyTypes: ingress,
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{}, NamespaceSelector: &metav1.LabelSelector{}}}}}}},
	} {
		s.Policy(netpolicy.Trim(np))
	}
	s.PodLabels("a", "web-1", map[string]string{"app": "web"})
	s.PodLabels("a", "db-1", map[string]string{"app": "db"})
	return s
}

const npHelp = `# HELP podslo_networkpolicy_condition Always 1: the current status and reason of each KEP-2136 condition (Supported, Problem, Enforcing) of the policy, as podslo computes it.
# TYPE podslo_networkpolicy_condition gauge
`

func TestNetworkPoliciesWithoutProfile(t *testing.T) {
	c := NewNetworkPolicies(npState(false), nil)
	want := `# HELP podslo_networkpolicy_min_version_info Always 1: the newest NetworkPolicy version among the features the policy uses (KEP-2136 minVersion).
# TYPE podslo_networkpolicy_min_version_info gauge
podslo_networkpolicy_min_version_info{min_version="1.8",namespace="a",networkpolicy="egress"} 1
podslo_networkpolicy_min_version_info{min_version="1.3",namespace="a",networkpolicy="web"} 1
podslo_networkpolicy_min_version_info{min_version="1.11",namespace="b",networkpolicy="combined"} 1
` + npHelp + `podslo_networkpolicy_condition{namespace="a",networkpolicy="egress",reason="NoProfile",status="Unknown",type="Supported"} 1
podslo_networkpolicy_condition{namespace="a",networkpolicy="egress",reason="AmbiguousCIDR",status="True",type="Problem"} 1
podslo_networkpolicy_condition{namespace="a",networkpolicy="egress",reason="NoProfile",status="Unknown",type="Enforcing"} 1
podslo_networkpolicy_condition{namespace="a",networkpolicy="web",reason="NoProfile",status="Unknown",type="Supported"} 1
podslo_networkpolicy_condition{namespace="a",networkpolicy="web",reason="None",status="False",type="Problem"} 1
podslo_networkpolicy_condition{namespace="a",networkpolicy="web",reason="NoProfile",status="Unknown",type="Enforcing"} 1
podslo_networkpolicy_condition{namespace="b",networkpolicy="combined",reason="NoProfile",status="Unknown",type="Supported"} 1
podslo_networkpolicy_condition{namespace="b",networkpolicy="combined",reason="None",status="False",type="Problem"} 1
podslo_networkpolicy_condition{namespace="b",networkpolicy="combined",reason="NoProfile",status="Unknown",type="Enforcing"} 1
# HELP podslo_networkpolicies NetworkPolicies by minVersion and by whether the network plugin supports them (true, false, or unknown without a profile).
# TYPE podslo_networkpolicies gauge
podslo_networkpolicies{min_version="1.3",supported="unknown"} 1
podslo_networkpolicies{min_version="1.8",supported="unknown"} 1
podslo_networkpolicies{min_version="1.9",supported="unknown"} 0
podslo_networkpolicies{min_version="1.11",supported="unknown"} 1
podslo_networkpolicies{min_version="1.12",supported="unknown"} 0
podslo_networkpolicies{min_version="1.21",supported="unknown"} 0
`
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want)))
	assert.Equal(t, 0, testutil.CollectAndCount(c, "podslo_networkpolicy_target_pods"), "not counted unless asked")
}

func TestNetworkPoliciesWithProfileAndTargets(t *testing.T) {
	profile := &netpolicy.Profile{Name: "example-cni", MaxVersion: 8, Unimplemented: netpolicy.Features(netpolicy.Egress), Enforcing: netpolicy.StatusUnknown}
	c := NewNetworkPolicies(npState(true), profile)
	want := npHelp + `podslo_networkpolicy_condition{namespace="a",networkpolicy="egress",reason="Unimplemented",status="False",type="Supported"} 1
podslo_networkpolicy_condition{namespace="a",networkpolicy="egress",reason="AmbiguousCIDR",status="True",type="Problem"} 1
podslo_networkpolicy_condition{namespace="a",networkpolicy="egress",reason="Profile",status="Unknown",type="Enforcing"} 1
podslo_networkpolicy_condition{namespace="a",networkpolicy="web",reason="Implemented",status="True",type="Supported"} 1
podslo_networkpolicy_condition{namespace="a",networkpolicy="web",reason="None",status="False",type="Problem"} 1
podslo_networkpolicy_condition{namespace="a",networkpolicy="web",reason="Profile",status="Unknown",type="Enforcing"} 1
podslo_networkpolicy_condition{namespace="b",networkpolicy="combined",reason="Version",status="False",type="Supported"} 1
podslo_networkpolicy_condition{namespace="b",networkpolicy="combined",reason="None",status="False",type="Problem"} 1
podslo_networkpolicy_condition{namespace="b",networkpolicy="combined",reason="Profile",status="Unknown",type="Enforcing"} 1
# HELP podslo_networkpolicies NetworkPolicies by minVersion and by whether the network plugin supports them (true, false, or unknown without a profile).
# TYPE podslo_networkpolicies gauge
podslo_networkpolicies{min_version="1.3",supported="true"} 1
podslo_networkpolicies{min_version="1.3",supported="false"} 0
podslo_networkpolicies{min_version="1.8",supported="true"} 0
podslo_networkpolicies{min_version="1.8",supported="false"} 1
podslo_networkpolicies{min_version="1.9",supported="true"} 0
podslo_networkpolicies{min_version="1.9",supported="false"} 0
podslo_networkpolicies{min_version="1.11",supported="true"} 0
podslo_networkpolicies{min_version="1.11",supported="false"} 1
podslo_networkpolicies{min_version="1.12",supported="true"} 0
podslo_networkpolicies{min_version="1.12",supported="false"} 0
podslo_networkpolicies{min_version="1.21",supported="true"} 0
podslo_networkpolicies{min_version="1.21",supported="false"} 0
# HELP podslo_networkpolicy_target_pods Pods the policy's podSelector selects in its namespace (with --networkpolicy-target-pods).
# TYPE podslo_networkpolicy_target_pods gauge
podslo_networkpolicy_target_pods{namespace="a",networkpolicy="egress"} 2
podslo_networkpolicy_target_pods{namespace="a",networkpolicy="web"} 1
podslo_networkpolicy_target_pods{namespace="b",networkpolicy="combined"} 0
`
	require.NoError(t, testutil.CollectAndCompare(c, strings.NewReader(want), "podslo_networkpolicy_condition", "podslo_networkpolicies", "podslo_networkpolicy_target_pods"))
}
