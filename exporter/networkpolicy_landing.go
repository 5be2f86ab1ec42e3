package exporter

import (
	"github.com/podslo/podslo/netpolicy"
)

// maxLandingPolicies bounds the landing page's NetworkPolicy table, which
// reloads every 5s: the bad policies come first, and the metrics hold
// every one.
const maxLandingPolicies = 200

// policyRow is one NetworkPolicy on the landing page.
type policyRow struct {
	Namespace, Name, MinVersion   string
	Supported, Problem, Enforcing netpolicy.Condition
}

// policyTable is the landing page's NetworkPolicy section.
type policyTable struct {
	// Watched is false with --networkpolicies=false.
	Watched bool
	// Profile names the network plugin profile; empty without one.
	Profile                      string
	Total, Unsupported, Problems int
	// Rows are the policies with Supported=False or Problem=True, then
	// the others, each part by namespace and name, at most
	// maxLandingPolicies.
	Rows []policyRow
	// Omitted is how many policies Rows leaves out.
	Omitted int
}

// landingTable judges the policies of the in-memory state, as the
// collector does at scrape time: it never calls the API server.
func (n *networkPolicies) landingTable() policyTable {
	if n == nil {
		return policyTable{}
	}
	t := policyTable{Watched: true}
	if n.profile != nil {
		t.Profile = n.profile.Name
	}
	var bad, good []policyRow
	n.state.Each(func(p *netpolicy.Policy, _ int) {
		c := netpolicy.Conditions(p, n.profile)
		row := policyRow{Namespace: p.Namespace, Name: p.Name, MinVersion: p.MinVersion().String(), Supported: c[0], Problem: c[1], Enforcing: c[2]}
		t.Total++
		unsupported, problem := c[0].Status == netpolicy.StatusFalse, c[1].Status == netpolicy.StatusTrue
		if unsupported {
			t.Unsupported++
		}
		if problem {
			t.Problems++
		}
		switch {
		case unsupported || problem:
			bad = append(bad, row)
		case len(bad)+len(good) < maxLandingPolicies:
			good = append(good, row)
		}
	})
	t.Rows = append(bad, good...)
	if len(t.Rows) > maxLandingPolicies {
		t.Rows = t.Rows[:maxLandingPolicies]
	}
	t.Omitted = t.Total - len(t.Rows)
	return t
}
