package exporter

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/podslo/podslo/internal/classtable"
	"github.com/podslo/podslo/internal/serve"
	"github.com/podslo/podslo/internal/slostatus"
	"github.com/podslo/podslo/internal/testenv"
	"github.com/podslo/podslo/netpolicy"
)

// policyCells is table#networkpolicies as a reader sees it: each row's
// cells, and the title (the condition's message) of each condition cell.
type policyCells struct {
	header []string
	rows   [][]string
	titles [][]string
}

func parsePolicyTable(t *testing.T, body string) (policyCells, bool) {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(body))
	require.NoError(t, err)
	var out policyCells
	for n := range doc.Descendants() {
		if n.DataAtom != atom.Table || attr(n, "id") != "networkpolicies" {
			continue
		}
		for tr := range n.Descendants() {
			if tr.DataAtom != atom.Tr {
				continue
			}
			var cells, titles []string
			header := false
			for c := range tr.ChildNodes() {
				if c.DataAtom == atom.Th || c.DataAtom == atom.Td {
					header = header || c.DataAtom == atom.Th
					cells = append(cells, textOf(c))
					titles = append(titles, attr(c, "title"))
				}
			}
			if header {
				out.header = cells
				continue
			}
			out.rows = append(out.rows, cells)
			out.titles = append(out.titles, titles)
		}
		return out, true
	}
	return out, false
}

// policyLandingServer serves the landing page with the NetworkPolicy
// section of a state and profile, as the exporter wires it, and no client:
// the page cannot call the API server.
func policyLandingServer(t *testing.T, n *networkPolicies) *httptest.Server {
	t.Helper()
	mux := serve.Mux(http.NotFoundHandler(), func() bool { return true })
	page := &landing{
		table:    func() classtable.Table { return classtable.Table{} },
		slos:     func() slostatus.Report { return slostatus.Report{} },
		ready:    func() bool { return true },
		version:  "v1.2.3",
		policies: n.landingTable,
		log:      testenv.Logger(t),
	}
	page.register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func trimmed(name string, spec networkingv1.NetworkPolicySpec) *netpolicy.Policy {
	return netpolicy.Trim(&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "np", Name: name}, Spec: spec})
}

var wantPolicyHeader = []string{"namespace/name", "min_version", "Supported", "Problem", "Enforcing"}

func TestLandingNetworkPolicies(t *testing.T) {
	profile, err := netpolicy.LoadProfile(filepath.Join("..", "netpolicy", "testdata", "example-cni.yaml"))
	require.NoError(t, err)
	state := netpolicy.NewState(false)
	state.Policy(trimmed("fine", networkingv1.NetworkPolicySpec{PolicyTypes: npIngress}))
	state.Policy(trimmed("sctp", networkingv1.NetworkPolicySpec{PolicyTypes: npIngress,
		Ingress: npFrom([]networkingv1.NetworkPolicyPort{npPort(&npSCTP, intstr.FromInt32(9), nil)})}))
	state.Policy(trimmed("a-egress", networkingv1.NetworkPolicySpec{PolicyTypes: npEgress}))
	// Stored by an older server: the page shows what the state holds.
	state.Policy(trimmed("host-bits", networkingv1.NetworkPolicySpec{PolicyTypes: npIngress, Ingress: npFrom(nil, npBlock("192.168.1.5/24"))}))

	t.Run("with a profile", func(t *testing.T) {
		_, body := get(t, http.MethodGet, policyLandingServer(t, &networkPolicies{state: state, profile: profile}).URL+"/")
		p := parsePage(t, strings.NewReader(body))
		assert.Contains(t, p.text, "judged against the network plugin profile of example-cni.")
		assert.Contains(t, p.text, "4 policies: 2 not supported by the network plugin, 1 with a problem, listed first.")
		table, ok := parsePolicyTable(t, body)
		require.True(t, ok, "no table#networkpolicies")
		assert.Equal(t, wantPolicyHeader, table.header)
		assert.Equal(t, [][]string{
			{"np/a-egress", "1.8", "False (Unimplemented)", "False (None)", "Unknown (Profile)"},
			{"np/host-bits", "1.8", "True (Implemented)", "True (AmbiguousCIDR)", "Unknown (Profile)"},
			{"np/sctp", "1.12", "False (Version)", "False (None)", "Unknown (Profile)"},
			{"np/fine", "1.3", "True (Implemented)", "False (None)", "Unknown (Profile)"},
		}, table.rows)
		assert.Equal(t, "Interpreting 192.168.1.5/24 as 192.168.1.0/24 rather than 192.168.1.5/32", table.titles[1][3])
		assert.Equal(t, "Needs NetworkPolicy 1.12 (sctp), newer than example-cni's maxVersion 1.8: the plugin may misread the policy", table.titles[2][2])
		assert.NotContains(t, p.text, "more policies are left out")
	})

	t.Run("without a profile", func(t *testing.T) {
		_, body := get(t, http.MethodGet, policyLandingServer(t, &networkPolicies{state: state}).URL+"/")
		p := parsePage(t, strings.NewReader(body))
		assert.Contains(t, p.text, "without --network-plugin-profile support is not judged.")
		assert.Contains(t, p.text, "4 policies: 0 not supported by the network plugin, 1 with a problem, listed first.")
		table, ok := parsePolicyTable(t, body)
		require.True(t, ok)
		require.Len(t, table.rows, 4)
		assert.Equal(t, []string{"np/host-bits", "1.8", "Unknown (NoProfile)", "True (AmbiguousCIDR)", "Unknown (NoProfile)"}, table.rows[0])
	})

	t.Run("bounded, the bad ones first", func(t *testing.T) {
		many := netpolicy.NewState(false)
		for i := range maxLandingPolicies + 5 {
			many.Policy(trimmed(fmt.Sprintf("fine-%03d", i), networkingv1.NetworkPolicySpec{PolicyTypes: npIngress}))
		}
		many.Policy(trimmed("z-egress", networkingv1.NetworkPolicySpec{PolicyTypes: npEgress}))
		_, body := get(t, http.MethodGet, policyLandingServer(t, &networkPolicies{state: many, profile: profile}).URL+"/")
		table, ok := parsePolicyTable(t, body)
		require.True(t, ok)
		require.Len(t, table.rows, maxLandingPolicies)
		assert.Equal(t, "np/z-egress", table.rows[0][0])
		assert.Equal(t, "np/fine-000", table.rows[1][0])
		assert.Equal(t, fmt.Sprintf("np/fine-%03d", maxLandingPolicies-2), table.rows[maxLandingPolicies-1][0])
		assert.Contains(t, parsePage(t, strings.NewReader(body)).text, "6 more policies are left out here; podslo_networkpolicy_condition has every one.")
	})

	t.Run("none", func(t *testing.T) {
		_, body := get(t, http.MethodGet, policyLandingServer(t, &networkPolicies{state: netpolicy.NewState(false)}).URL+"/")
		_, ok := parsePolicyTable(t, body)
		assert.False(t, ok, "no empty table")
		assert.Contains(t, parsePage(t, strings.NewReader(body)).text, "0 policies: 0 not supported")
	})

	t.Run("not watched", func(t *testing.T) {
		// --networkpolicies=false: the exporter's *networkPolicies is nil.
		_, body := get(t, http.MethodGet, policyLandingServer(t, nil).URL+"/")
		_, ok := parsePolicyTable(t, body)
		assert.False(t, ok)
		assert.Contains(t, parsePage(t, strings.NewReader(body)).text, "NetworkPolicies are not watched (--networkpolicies=false).")
	})
}
