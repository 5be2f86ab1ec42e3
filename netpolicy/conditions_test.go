package netpolicy

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestParseProfile(t *testing.T) {
	p, err := ParseProfile([]byte(`
name: example-cni
maxVersion: "1.8"          # newest NetworkPolicy version the plugin knows
unimplemented: [egress]    # features it knows but does not implement
enforcing: Unknown
`))
	require.NoError(t, err)
	assert.Equal(t, &Profile{Name: "example-cni", MaxVersion: 8, Unimplemented: Features(Egress), Enforcing: StatusUnknown}, p)

	p, err = ParseProfile([]byte("name: flannel\nmaxVersion: \"1.10\"\nenforcing: False\n"))
	require.NoError(t, err)
	assert.Equal(t, &Profile{Name: "flannel", MaxVersion: 10, Enforcing: StatusFalse}, p, "1.10 is not 1.1, and an unquoted False is the status")
}

// TestProfileFixtures parses each bad profile in testdata/profiles, next to
// the exact error it must produce (<name>.error).
func TestProfileFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/profiles/*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			want, err := os.ReadFile(strings.TrimSuffix(file, ".yaml") + ".error")
			require.NoError(t, err)
			_, err = LoadProfile(file)
			require.Error(t, err)
			assert.True(t, errors.Is(err, ErrProfile), "wraps ErrProfile: %v", err)
			assert.Equal(t, strings.TrimSpace(string(want)), err.Error())
		})
	}
	_, err = LoadProfile("testdata/profiles/missing.yml")
	assert.ErrorContains(t, err, "read network plugin profile: open testdata/profiles/missing.yml: no such file or directory")
	assert.False(t, errors.Is(err, ErrProfile))
}

func policy(spec networkingv1.NetworkPolicySpec) *Policy {
	return Trim(&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}, Spec: spec})
}

func TestConditions(t *testing.T) {
	old := &Profile{Name: "example-cni", MaxVersion: 8, Unimplemented: Features(Egress), Enforcing: StatusUnknown}
	none := &Profile{Name: "flannel", MaxVersion: 21, Enforcing: StatusFalse}
	combined := networkingv1.NetworkPolicySpec{PolicyTypes: ingressOnly, Ingress: from(networkingv1.NetworkPolicyPeer{PodSelector: sel("app", "db"), NamespaceSelector: sel("team", "a")})}
	egress := networkingv1.NetworkPolicySpec{PolicyTypes: both, Egress: to(block("10.0.0.0/8")), Ingress: from(block("10.0.0.0/8"))}
	plain := networkingv1.NetworkPolicySpec{PolicyTypes: ingressOnly, Ingress: from(networkingv1.NetworkPolicyPeer{PodSelector: sel()})}
	ambiguous := networkingv1.NetworkPolicySpec{PolicyTypes: ingressOnly, Ingress: from(block("10.0.0.0/16", "10.1.0.0/24"), block("192.168.1.5/24"))}

	noProfileSupported := Condition{TypeSupported, StatusUnknown, ReasonNoProfile, "No network plugin profile (--network-plugin-profile): podslo cannot tell whether the plugin supports this policy"}
	noProblem := Condition{TypeProblem, StatusFalse, ReasonNone, "No problem found in the policy's CIDRs"}
	noProfileEnforcing := Condition{TypeEnforcing, StatusUnknown, ReasonNoProfile, "No network plugin profile (--network-plugin-profile): podslo cannot tell whether the plugin enforces this policy"}
	cannotTell := Condition{TypeEnforcing, StatusUnknown, ReasonProfile, "example-cni cannot tell when a policy is in effect"}

	for _, tc := range []struct {
		name    string
		spec    networkingv1.NetworkPolicySpec
		profile *Profile
		want    [3]Condition
	}{
		{"no profile", combined, nil, [3]Condition{noProfileSupported, noProblem, noProfileEnforcing}},
		{"version newer than the plugin knows", combined, old, [3]Condition{
			{TypeSupported, StatusFalse, ReasonVersion, "Needs NetworkPolicy 1.11 (podAndNamespaceSelector), newer than example-cni's maxVersion 1.8: the plugin may misread the policy"},
			noProblem, cannotTell}},
		{"unimplemented feature", egress, old, [3]Condition{
			{TypeSupported, StatusFalse, ReasonUnimplemented, "Uses egress, which example-cni does not implement"},
			noProblem, cannotTell}},
		{"supported", plain, old, [3]Condition{
			{TypeSupported, StatusTrue, ReasonImplemented, "example-cni implements every feature the policy uses (NetworkPolicy 1.3)"},
			noProblem, cannotTell}},
		{"plugin that enforces nothing", plain, none, [3]Condition{
			{TypeSupported, StatusTrue, ReasonImplemented, "flannel implements every feature the policy uses (NetworkPolicy 1.3)"},
			noProblem, {TypeEnforcing, StatusFalse, ReasonProfile, "flannel enforces no NetworkPolicy"}}},
		{"problems: the ambiguous CIDR decides the reason, the message has all", ambiguous, nil, [3]Condition{
			noProfileSupported,
			{TypeProblem, StatusTrue, ReasonAmbiguousCIDR, "except 10.1.0.0/24 is not a strict subset of cidr 10.0.0.0/16; Interpreting 192.168.1.5/24 as 192.168.1.0/24 rather than 192.168.1.5/32"},
			noProfileEnforcing}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, Conditions(policy(tc.spec), tc.profile))
		})
	}
}

func TestStateTargetPods(t *testing.T) {
	s := NewState(true)
	web := policy(networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}})
	all := Trim(&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "all"}})
	other := Trim(&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "all"}})
	for _, p := range []*Policy{web, all, other} {
		s.Policy(p)
	}
	s.PodLabels("ns", "web-1", map[string]string{"app": "web"})
	s.PodLabels("ns", "web-2", map[string]string{"app": "web", "x": "y"})
	s.PodLabels("ns", "db", map[string]string{"app": "db"})
	s.PodLabels("elsewhere", "web", map[string]string{"app": "web"})
	count := func() map[string]int {
		out := map[string]int{}
		s.Each(func(p *Policy, n int) { out[p.Key()] = n })
		return out
	}
	assert.Equal(t, map[string]int{"ns/p": 2, "ns/all": 3, "other/all": 0}, count())
	s.PodDeleted("ns", "web-1")
	s.PodLabels("ns", "db", map[string]string{"app": "web"})
	s.PolicyDeleted("other", "all")
	assert.Equal(t, map[string]int{"ns/p": 2, "ns/all": 2}, count())
	assert.Equal(t, 2, s.Len())

	var order []string
	s.Each(func(p *Policy, _ int) { order = append(order, p.Key()) })
	assert.Equal(t, []string{"ns/all", "ns/p"}, order, "sorted by namespace and name")

	off := NewState(false)
	off.Policy(web)
	off.PodLabels("ns", "web-1", map[string]string{"app": "web"})
	off.Each(func(_ *Policy, n int) { assert.Equal(t, -1, n, "not counted") })
	assert.False(t, off.CountsPods())
}
