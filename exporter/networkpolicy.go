package exporter

import (
	"context"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/errgroup"

	"github.com/podslo/podslo/collectors"
	"github.com/podslo/podslo/informers"
	"github.com/podslo/podslo/internal/kube"
	"github.com/podslo/podslo/netpolicy"
)

// networkPolicies is the NetworkPolicy part of the exporter (issue 15,
// KEP-2136): its watch, the in-memory state it fills and the collector
// reading it. A nil *networkPolicies (--networkpolicies=false) does
// nothing, so Start calls its methods unconditionally.
type networkPolicies struct {
	state     *netpolicy.State
	profile   *netpolicy.Profile
	watcher   *informers.PolicyWatcher
	collector *collectors.NetworkPolicies
	// events is nil without --networkpolicy-events.
	events *policyEvents
}

// networkPolicies builds the NetworkPolicy watch and collector from the
// completed, validated options and the network plugin profile New loaded
// (nil for none).
func (o *Options) networkPolicies(client kube.Interface, profile *netpolicy.Profile, onEvent func(resource, event string), log *slog.Logger) *networkPolicies {
	if !*o.NetworkPolicies {
		return nil
	}
	if p := profile; p != nil {
		log.Info("Judging NetworkPolicies against a network plugin profile", "plugin", p.Name, "maxVersion", p.MaxVersion.String(), "unimplemented", p.Unimplemented.String(), "enforcing", string(p.Enforcing))
	} else {
		log.Info("No network plugin profile: NetworkPolicy support is not judged", "flag", "--network-plugin-profile")
	}
	state := netpolicy.NewState(o.NetworkPolicyTargetPods)
	n := &networkPolicies{state: state, profile: profile, collector: collectors.NewNetworkPolicies(state, profile)}
	var handler informers.PolicyHandler = state
	if o.NetworkPolicyEvents {
		n.events = newPolicyEvents(state, state, profile, client, log)
		handler = n.events
	}
	n.watcher = informers.NewPolicyWatcher(client, handler, informers.PolicyOptions{OnEvent: onEvent, Logger: log, Scope: o.Scope})
	return n
}

// podLabels is what the pod watch hands every pod's labels to: nil unless
// target pods are counted, so that the pod trim keeps only what it did.
func (n *networkPolicies) podLabels() informers.PodLabelsHandler {
	if n == nil || !n.state.CountsPods() {
		return nil
	}
	return n.state
}

func (n *networkPolicies) register(reg *prometheus.Registry) {
	if n != nil {
		reg.MustRegister(n.collector)
	}
}

// Start runs the watch, and the Events' writer, until ctx ends.
func (n *networkPolicies) Start(ctx context.Context) error {
	if n == nil {
		return nil
	}
	if n.events == nil {
		return n.watcher.Start(ctx)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error { return n.watcher.Start(gctx) })
	g.Go(func() error { return n.events.Start(gctx) })
	return g.Wait()
}
