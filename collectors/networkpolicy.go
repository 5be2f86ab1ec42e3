package collectors

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/podslo/podslo/netpolicy"
	"github.com/podslo/podslo/sli"
)

var (
	networkPolicyMinVersion = &sli.MetricFamily{
		Name: "podslo_networkpolicy_min_version_info", Type: sli.Gauge, Stability: sli.Alpha,
		Help:   "Always 1: the newest NetworkPolicy version among the features the policy uses (KEP-2136 minVersion).",
		Labels: labelList("namespace", "networkpolicy", "min_version"),
	}
	networkPolicyCondition = &sli.MetricFamily{
		Name: "podslo_networkpolicy_condition", Type: sli.Gauge, Stability: sli.Alpha,
		Help:   "Always 1: the current status and reason of each KEP-2136 condition (Supported, Problem, Enforcing) of the policy, as podslo computes it.",
		Labels: labelList("namespace", "networkpolicy", "type", "status", "reason"),
	}
	networkPolicies = &sli.MetricFamily{
		Name: "podslo_networkpolicies", Type: sli.Gauge, Stability: sli.Alpha,
		Help:   "NetworkPolicies by minVersion and by whether the network plugin supports them (true, false, or unknown without a profile).",
		Labels: labelList("min_version", "supported"),
	}
	networkPolicyTargetPods = &sli.MetricFamily{
		Name: "podslo_networkpolicy_target_pods", Type: sli.Gauge, Stability: sli.Alpha,
		Help:   "Pods the policy's podSelector selects in its namespace (with --networkpolicy-target-pods).",
		Labels: labelList("namespace", "networkpolicy"),
	}
	networkPolicyFamilies = []*sli.MetricFamily{networkPolicyMinVersion, networkPolicyCondition, networkPolicies, networkPolicyTargetPods}
)

// NetworkPolicies exports each policy's KEP-2136 minVersion and conditions
// from the state the NetworkPolicy watch keeps, judged at scrape time
// against the network plugin profile.
type NetworkPolicies struct {
	state   *netpolicy.State
	profile *netpolicy.Profile

	minVersion, condition, count, targetPods *prometheus.Desc
}

// NewNetworkPolicies returns the collector over state; profile may be nil
// (no support is judged). The target pods family exists only when the
// state counts pods.
func NewNetworkPolicies(state *netpolicy.State, profile *netpolicy.Profile) *NetworkPolicies {
	return &NetworkPolicies{
		state:      state,
		profile:    profile,
		minVersion: desc(networkPolicyMinVersion, Labels{}),
		condition:  desc(networkPolicyCondition, Labels{}),
		count:      desc(networkPolicies, Labels{}),
		targetPods: desc(networkPolicyTargetPods, Labels{}),
	}
}

// Describe implements prometheus.Collector.
func (c *NetworkPolicies) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.minVersion
	ch <- c.condition
	ch <- c.count
	if c.state.CountsPods() {
		ch <- c.targetPods
	}
}

type versionSupport struct {
	version   netpolicy.Version
	supported string
}

// Collect implements prometheus.Collector.
func (c *NetworkPolicies) Collect(ch chan<- prometheus.Metric) {
	counts := map[versionSupport]int{}
	c.state.Each(func(p *netpolicy.Policy, targets int) {
		min := p.MinVersion()
		ch <- prometheus.MustNewConstMetric(c.minVersion, prometheus.GaugeValue, 1, p.Namespace, p.Name, min.String())
		conds := netpolicy.Conditions(p, c.profile)
		for _, cond := range conds {
			ch <- prometheus.MustNewConstMetric(c.condition, prometheus.GaugeValue, 1, p.Namespace, p.Name, string(cond.Type), string(cond.Status), cond.Reason)
		}
		counts[versionSupport{min, netpolicy.SupportedLabel(conds[0].Status)}]++
		if targets >= 0 {
			ch <- prometheus.MustNewConstMetric(c.targetPods, prometheus.GaugeValue, float64(targets), p.Namespace, p.Name)
		}
	})
	// Every version with every supported value this configuration can
	// give, zeros included: a count that drops to nothing reads 0, not
	// absent.
	supported := []string{netpolicy.SupportedLabel(netpolicy.StatusUnknown)}
	if c.profile != nil {
		supported = []string{netpolicy.SupportedLabel(netpolicy.StatusTrue), netpolicy.SupportedLabel(netpolicy.StatusFalse)}
	}
	for _, v := range netpolicy.Versions() {
		for _, s := range supported {
			ch <- prometheus.MustNewConstMetric(c.count, prometheus.GaugeValue, float64(counts[versionSupport{v, s}]), v.String(), s)
		}
	}
}
