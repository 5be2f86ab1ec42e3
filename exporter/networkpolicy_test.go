package exporter

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/podslo/podslo/internal/testenv"
)

var (
	npTCP, npUDP, npSCTP = corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP
	npIngress            = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	npEgress             = []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}
)

func npSel(k, v string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
}

func npPort(proto *corev1.Protocol, port intstr.IntOrString, end *int32) networkingv1.NetworkPolicyPort {
	return networkingv1.NetworkPolicyPort{Protocol: proto, Port: &port, EndPort: end}
}

func npFrom(ports []networkingv1.NetworkPolicyPort, peers ...networkingv1.NetworkPolicyPeer) []networkingv1.NetworkPolicyIngressRule {
	return []networkingv1.NetworkPolicyIngressRule{{Ports: ports, From: peers}}
}

func npTo(ports []networkingv1.NetworkPolicyPort, peers ...networkingv1.NetworkPolicyPeer) []networkingv1.NetworkPolicyEgressRule {
	return []networkingv1.NetworkPolicyEgressRule{{Ports: ports, To: peers}}
}

func npBlock(cidr string, except ...string) networkingv1.NetworkPolicyPeer {
	return networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: cidr, Except: except}}
}

// npCase is one policy per feature of the table, with its exact minVersion
// and its Supported condition under netpolicy/testdata/example-cni.yaml
// (maxVersion 1.8, egress unimplemented), and the pods it selects among
// web-1, web-2 (team=a) and db (team=b).
type npCase struct {
	name      string
	selector  metav1.LabelSelector
	spec      networkingv1.NetworkPolicySpec
	min       string
	supported string // status/reason under example-cni
	targets   int
}

func npCases() []npCase {
	end := int32(9000)
	all := metav1.LabelSelector{}
	return []npCase{
		{"ingress-only", *npSel("team", "a"), networkingv1.NetworkPolicySpec{PolicyTypes: npIngress}, "1.3", "True/Implemented", 2},
		{"pod-selector", *npSel("app.kubernetes.io/name", "db"), networkingv1.NetworkPolicySpec{PolicyTypes: npIngress,
			Ingress: npFrom([]networkingv1.NetworkPolicyPort{npPort(&npTCP, intstr.FromInt32(80), nil)}, networkingv1.NetworkPolicyPeer{PodSelector: npSel("app", "web")})}, "1.3", "True/Implemented", 1},
		{"namespace-selector", all, networkingv1.NetworkPolicySpec{PolicyTypes: npIngress,
			Ingress: npFrom([]networkingv1.NetworkPolicyPort{npPort(&npUDP, intstr.FromInt32(53), nil)}, networkingv1.NetworkPolicyPeer{NamespaceSelector: npSel("team", "a")})}, "1.3", "True/Implemented", 3},
		{"named-port", all, networkingv1.NetworkPolicySpec{PolicyTypes: npIngress,
			Ingress: npFrom([]networkingv1.NetworkPolicyPort{npPort(&npTCP, intstr.FromString("http"), nil)})}, "1.3", "True/Implemented", 3},
		{"egress", all, networkingv1.NetworkPolicySpec{PolicyTypes: npEgress}, "1.8", "False/Unimplemented", 3},
		{"ipblock", all, networkingv1.NetworkPolicySpec{PolicyTypes: npIngress, Ingress: npFrom(nil, npBlock("10.0.0.0/8", "10.1.0.0/16"))}, "1.8", "True/Implemented", 3},
		{"ipv6", all, networkingv1.NetworkPolicySpec{PolicyTypes: npIngress, Ingress: npFrom(nil, npBlock("2001:db8::/32"))}, "1.9", "False/Version", 3},
		{"pod-and-namespace-selector", all, networkingv1.NetworkPolicySpec{PolicyTypes: npIngress,
			Ingress: npFrom(nil, networkingv1.NetworkPolicyPeer{PodSelector: npSel("app", "db"), NamespaceSelector: npSel("team", "a")})}, "1.11", "False/Version", 3},
		{"sctp", all, networkingv1.NetworkPolicySpec{PolicyTypes: npIngress,
			Ingress: npFrom([]networkingv1.NetworkPolicyPort{npPort(&npSCTP, intstr.FromInt32(9), nil)})}, "1.12", "False/Version", 3},
		{"end-port", all, networkingv1.NetworkPolicySpec{PolicyTypes: npEgress,
			Egress: npTo([]networkingv1.NetworkPolicyPort{npPort(&npTCP, intstr.FromInt32(8000), &end)})}, "1.21", "False/Version", 3},
		{"namespace-by-name", all, networkingv1.NetworkPolicySpec{PolicyTypes: npIngress,
			Ingress: npFrom(nil, networkingv1.NetworkPolicyPeer{NamespaceSelector: npSel("kubernetes.io/metadata.name", "monitoring")})}, "1.21", "False/Version", 3},
	}
}

func createPolicy(t *testing.T, c kubernetes.Interface, ns string, tc npCase) {
	t.Helper()
	spec := tc.spec
	spec.PodSelector = tc.selector
	_, err := c.NetworkingV1().NetworkPolicies(ns).Create(context.Background(), &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: tc.name}, Spec: spec}, metav1.CreateOptions{})
	require.NoError(t, err, tc.name)
}

const (
	npMinVersionHead = `# HELP podslo_networkpolicy_min_version_info Always 1: the newest NetworkPolicy version among the features the policy uses (KEP-2136 minVersion).
# TYPE podslo_networkpolicy_min_version_info gauge
`
	npConditionHead = `# HELP podslo_networkpolicy_condition Always 1: the current status and reason of each KEP-2136 condition (Supported, Problem, Enforcing) of the policy, as podslo computes it.
# TYPE podslo_networkpolicy_condition gauge
`
	npCountHead = `# HELP podslo_networkpolicies NetworkPolicies by minVersion and by whether the network plugin supports them (true, false, or unknown without a profile).
# TYPE podslo_networkpolicies gauge
`
	npTargetsHead = `# HELP podslo_networkpolicy_target_pods Pods the policy's podSelector selects in its namespace (with --networkpolicy-target-pods).
# TYPE podslo_networkpolicy_target_pods gauge
`
)

var npFamilies = []string{"podslo_networkpolicy_min_version_info", "podslo_networkpolicy_condition", "podslo_networkpolicies", "podslo_networkpolicy_target_pods"}

// npWant renders the exposition the exporter must serve for these policies,
// with the example-cni profile or without any, independently of the code
// under test.
func npWant(ns string, cases []npCase, profile bool) string {
	var minV, conds, targets strings.Builder
	count := map[string]int{}
	for _, tc := range cases {
		fmt.Fprintf(&minV, "podslo_networkpolicy_min_version_info{min_version=%q,namespace=%q,networkpolicy=%q} 1\n", tc.min, ns, tc.name)
		line := func(typ, statusReason string) {
			status, reason, _ := strings.Cut(statusReason, "/")
			fmt.Fprintf(&conds, "podslo_networkpolicy_condition{namespace=%q,networkpolicy=%q,reason=%q,status=%q,type=%q} 1\n", ns, tc.name, reason, status, typ)
		}
		supported, enforcing := "Unknown/NoProfile", "Unknown/NoProfile"
		if profile {
			supported, enforcing = tc.supported, "Unknown/Profile"
			fmt.Fprintf(&targets, "podslo_networkpolicy_target_pods{namespace=%q,networkpolicy=%q} %d\n", ns, tc.name, tc.targets)
		}
		line("Supported", supported)
		line("Problem", "False/None")
		line("Enforcing", enforcing)
		status, _, _ := strings.Cut(supported, "/")
		count[tc.min+" "+strings.ToLower(status)]++
	}
	var counts strings.Builder
	values := []string{"unknown"}
	if profile {
		values = []string{"true", "false"}
	}
	for _, v := range []string{"1.3", "1.8", "1.9", "1.11", "1.12", "1.21"} {
		for _, s := range values {
			fmt.Fprintf(&counts, "podslo_networkpolicies{min_version=%q,supported=%q} %d\n", v, s, count[v+" "+s])
		}
	}
	out := npMinVersionHead + minV.String() + npConditionHead + conds.String() + npCountHead + counts.String()
	if profile {
		out += npTargetsHead + targets.String()
	}
	return out
}

func TestNetworkPoliciesOnRealAPIServer(t *testing.T) {
	env := testenv.Start(t)
	c := env.Client
	ctx := context.Background()
	const ns = "np"
	testenv.CreateNamespace(t, c, ns, nil)

	t.Run("CIDR problems the v1.36 server refuses", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			peer networkingv1.NetworkPolicyPeer
			err  string
		}{
			{"host-bits", npBlock("192.168.1.5/24"), `spec.ingress[0].from[0].ipBlock.cidr: Invalid value: "192.168.1.5/24": must not have bits set beyond the prefix length`},
			{"except-host-bits", npBlock("10.0.0.0/8", "10.1.2.3/16"), `spec.ingress[0].from[0].ipBlock.except[0]: Invalid value: "10.1.2.3/16": must not have bits set beyond the prefix length`},
			{"except-outside", npBlock("10.0.0.0/16", "10.1.0.0/24"), "spec.ingress[0].from[0].ipBlock.except[0]: Invalid value: \"10.1.0.0/24\": must be a strict subset of `cidr`"},
			{"except-equal", npBlock("10.0.0.0/16", "10.0.0.0/16"), "spec.ingress[0].from[0].ipBlock.except[0]: Invalid value: \"10.0.0.0/16\": must be a strict subset of `cidr`"},
			{"leading-zeros", npBlock("010.0.0.0/8"), `spec.ingress[0].from[0].ipBlock.cidr: Invalid value: "010.0.0.0/8": must not have leading 0s in IP or prefix length`},
		} {
			_, err := c.NetworkingV1().NetworkPolicies(ns).Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: tc.name},
				Spec: networkingv1.NetworkPolicySpec{Ingress: npFrom(nil, tc.peer)}}, metav1.CreateOptions{})
			assert.ErrorContains(t, err, tc.err, tc.name)
		}
	})

	for _, p := range []podSpec{{name: "web-1", team: "a"}, {name: "web-2", team: "a"}, {name: "db", team: "b"}} {
		testenv.CreatePod(t, c, ns, p.pod())
	}
	cases := npCases()
	for _, tc := range cases {
		createPolicy(t, c, ns, tc)
	}
	plain := startExporter(t, Options{Kubeconfig: env.Kubeconfig, StateDir: t.TempDir()})
	profiled := startExporter(t, Options{Kubeconfig: env.Kubeconfig, StateDir: t.TempDir(),
		NetworkPluginProfile: filepath.Join("..", "netpolicy", "testdata", "example-cni.yaml"), NetworkPolicyTargetPods: true})

	sorted := func(cases []npCase) []npCase {
		out := slices.Clone(cases)
		slices.SortFunc(out, func(a, b npCase) int { return strings.Compare(a.name, b.name) })
		return out
	}
	eventuallyMetrics(t, plain, npWant(ns, sorted(cases), false), npFamilies...)
	eventuallyMetrics(t, profiled, npWant(ns, sorted(cases), true), npFamilies...)

	t.Run("the landing page lists them, from the exporter's state", func(t *testing.T) {
		_, body := get(t, http.MethodGet, profiled+"/")
		table, ok := parsePolicyTable(t, body)
		require.True(t, ok, "no table#networkpolicies")
		require.Len(t, table.rows, len(cases))
		assert.Contains(t, table.rows, []string{"np/sctp", "1.12", "False (Version)", "False (None)", "Unknown (Profile)"})
		assert.Contains(t, table.rows, []string{"np/ingress-only", "1.3", "True (Implemented)", "False (None)", "Unknown (Profile)"})
	})

	t.Run("an ingress-only policy given egress moves from 1.3 to 1.8", func(t *testing.T) {
		np, err := c.NetworkingV1().NetworkPolicies(ns).Get(ctx, "ingress-only", metav1.GetOptions{})
		require.NoError(t, err)
		np.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}
		np.Spec.Egress = npTo(nil, npBlock("10.0.0.0/8"))
		_, err = c.NetworkingV1().NetworkPolicies(ns).Update(ctx, np, metav1.UpdateOptions{})
		require.NoError(t, err)
		cases[0].min, cases[0].supported = "1.8", "False/Unimplemented"
		eventuallyMetrics(t, plain, npWant(ns, sorted(cases), false), npFamilies...)
		eventuallyMetrics(t, profiled, npWant(ns, sorted(cases), true), npFamilies...)
	})

	t.Run("a new pod counts in the policies that select it", func(t *testing.T) {
		testenv.CreatePod(t, c, ns, podSpec{name: "web-3", team: "a"}.pod())
		for i := range cases {
			if cases[i].name != "pod-selector" {
				cases[i].targets++
			}
		}
		eventuallyMetrics(t, profiled, npWant(ns, sorted(cases), true), npFamilies...)
	})

	t.Run("a deleted policy's series go away", func(t *testing.T) {
		require.NoError(t, c.NetworkingV1().NetworkPolicies(ns).Delete(ctx, "sctp", metav1.DeleteOptions{}))
		cases = slices.DeleteFunc(cases, func(tc npCase) bool { return tc.name == "sctp" })
		want := npWant(ns, sorted(cases), true)
		require.NotContains(t, want, `"sctp"`)
		eventuallyMetrics(t, profiled, want, npFamilies...)
		eventuallyMetrics(t, plain, npWant(ns, sorted(cases), false), npFamilies...)
	})
}

// TestAmbiguousCIDRStoredByAnOlderServer stores policies with host bits set
// on a server with StrictIPCIDRValidation off, as v1.32 and older servers
// stored them, and checks their Problem condition. An except outside its
// cidr is refused by every validation, strict or not, so it is checked in
// the unit tests only.
func TestAmbiguousCIDRStoredByAnOlderServer(t *testing.T) {
	env := testenv.Start(t, testenv.APIServerFlag("feature-gates", "StrictIPCIDRValidation=false"))
	c := env.Client
	ctx := context.Background()
	testenv.CreateNamespace(t, c, "legacy", nil)
	for name, peer := range map[string]networkingv1.NetworkPolicyPeer{
		"kep-example": npBlock("192.168.1.5/24"),
		"except":      npBlock("10.0.0.0/8", "10.1.2.3/16"),
		"ipv6":        npBlock("2001:db8::1/64"),
	} {
		_, err := c.NetworkingV1().NetworkPolicies("legacy").Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: networkingv1.NetworkPolicySpec{Ingress: npFrom(nil, peer)}}, metav1.CreateOptions{})
		require.NoError(t, err, "the non-strict server stores %s", name)
	}
	_, err := c.NetworkingV1().NetworkPolicies("legacy").Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "outside"},
		Spec: networkingv1.NetworkPolicySpec{Ingress: npFrom(nil, npBlock("10.0.0.0/16", "10.1.0.0/24"))}}, metav1.CreateOptions{})
	require.ErrorContains(t, err, "must be a strict subset of `cidr`", "refused without strict validation too")

	url := startExporter(t, Options{Kubeconfig: env.Kubeconfig, StateDir: t.TempDir()})
	line := func(name, typ, status, reason string) string {
		return fmt.Sprintf("podslo_networkpolicy_condition{namespace=\"legacy\",networkpolicy=%q,reason=%q,status=%q,type=%q} 1\n", name, reason, status, typ)
	}
	var want strings.Builder
	want.WriteString(npConditionHead)
	for _, name := range []string{"except", "ipv6", "kep-example"} {
		want.WriteString(line(name, "Supported", "Unknown", "NoProfile"))
		want.WriteString(line(name, "Problem", "True", "AmbiguousCIDR"))
		want.WriteString(line(name, "Enforcing", "Unknown", "NoProfile"))
	}
	want.WriteString(npMinVersionHead + `podslo_networkpolicy_min_version_info{min_version="1.8",namespace="legacy",networkpolicy="except"} 1
podslo_networkpolicy_min_version_info{min_version="1.9",namespace="legacy",networkpolicy="ipv6"} 1
podslo_networkpolicy_min_version_info{min_version="1.8",namespace="legacy",networkpolicy="kep-example"} 1
`)
	eventuallyMetrics(t, url, want.String(), "podslo_networkpolicy_condition", "podslo_networkpolicy_min_version_info")
}

// With --networkpolicies=false there is no NetworkPolicy family at all.
func TestNetworkPoliciesOff(t *testing.T) {
	env := testenv.Start(t)
	testenv.CreateNamespace(t, env.Client, "np", nil)
	createPolicy(t, env.Client, "np", npCases()[0])
	off := false
	url := startExporter(t, Options{Kubeconfig: env.Kubeconfig, StateDir: t.TempDir(), NetworkPolicies: &off})
	body := scrapeText(t, url, "text/plain")
	assert.Contains(t, body, "podslo_build_info", "a real scrape")
	assert.NotContains(t, body, "podslo_networkpolicy")
	assert.NotContains(t, body, `resource="networkpolicies"`)
}
