package cmd

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/podslo/podslo/exporter"
	"github.com/podslo/podslo/informers"
	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/scope"
)

func newExporterCommand(stderr io.Writer, run func(context.Context, *exporter.Options) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "exporter",
		Short: "Export pod lifecycle SLIs from the cluster's pods to Prometheus",
		Args:  cobra.NoArgs,
	}
	fs := cmd.Flags()
	addCommonFlags(fs)
	fs.String("listen-address", exporter.DefaultListenAddress, "Address serving the landing page on /, /api/v1/classes, /metrics, /healthz and /readyz")
	addWebConfigFlag(fs)
	fs.String("dashboards-url", exporter.DefaultDashboardsURL, "Where the landing page links to the dashboards, e.g. the Grafana folder they were imported into")
	fs.String("state-dir", exporter.DefaultStateDir, `Directory of the persistent state; ":memory:" keeps it in memory only`)
	fs.String("state-min-free", "64Mi", "Free space the state filesystem must keep for a state write to go ahead (a quantity, e.g. 64Mi); below it writes wait and podslo_store_writable is 0")
	fs.Bool("per-pod-metrics", true, "Export per-pod series")
	fs.StringArray("pod-label", nil, "Pod label key to copy onto per-pod series as label_<key> (repeatable)")
	fs.StringArray("histogram-label", nil, "Extra histogram dimension NAME=label:KEY or NAME=annotation:KEY (repeatable)")
	fs.Duration("max-observation-age", lifecycle.DefaultMaxObservationAge, "A first event older than this when first seen is remembered but not observed")
	fs.Duration("sandbox-creation-timeout", lifecycle.DefaultSandboxCreationTimeout, "A scheduled pod whose first sandbox is not ready after this long counts once as a creation timeout")
	fs.String("stable-condition-type", string(lifecycle.DefaultStableConditionType), "Pod condition podslo agent writes once a pod is stable; the exporter observes it")
	fs.String("user-error-event-regex", informers.DefaultUserErrorEventRegex, "FailedMount event messages matching this regular expression mark the pod as a user error, left out of the sandbox SLIs")
	fs.Bool("networkpolicies", true, "Watch NetworkPolicies and export their KEP-2136 minVersion and conditions (needs get/list/watch on networking.k8s.io networkpolicies)")
	fs.String("network-plugin-profile", "", "YAML file saying what the network plugin implements (docs/networkpolicy.md); without it, NetworkPolicy support is not judged")
	fs.Bool("networkpolicy-target-pods", false, "Export how many pods each NetworkPolicy selects; keeps every label of every pod (about 0.5 KB per pod)")
	fs.StringSlice("namespaces", nil, "Comma-separated namespaces to watch, one watch each (default: all namespaces); with --namespaces-denylist, the denied ones are removed, as in kube-state-metrics")
	fs.StringSlice("namespaces-denylist", nil, "Comma-separated namespaces not to watch, left out by a field selector on every watch")
	fs.String("node-name", "", "Watch only the pods bound to this node (spec.nodeName field selector): per-node mode, e.g. from the downward API's spec.nodeName")
	fs.Int("shard", 0, "This instance's shard, zero-indexed, of --total-shards: it owns the pods whose UID hashes to it (kube-state-metrics' hash)")
	fs.Int("total-shards", 1, "Number of shards the pods are split into")
	fs.String("pod", "", "Autosharding: this exporter's pod name; with --pod-namespace, the shard is its StatefulSet ordinal and the total its replicas (needs get on pods and get/list/watch on statefulsets)")
	fs.String("pod-namespace", "", "Autosharding: this exporter's pod namespace (see --pod)")
	fs.StringSlice("sandbox-condition-types", []string{"PodReadyToStartContainers", "PodHasNetwork"}, "Pod condition types that mark a ready sandbox; the first present wins")

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := bindConfig(cmd)
		if err != nil {
			return err
		}
		log, err := c.logger(stderr)
		if err != nil {
			return err
		}
		perPod := c.boolean("per-pod-metrics")
		opts := &exporter.Options{
			Kubeconfig:             c.str("kubeconfig"),
			ListenAddress:          c.str("listen-address"),
			WebConfigFile:          c.str("web.config.file"),
			DashboardsURL:          c.str("dashboards-url"),
			StateDir:               c.str("state-dir"),
			StateMinFree:           c.quantity("state-min-free"),
			PerPodMetrics:          &perPod,
			PodLabels:              c.list("pod-label"),
			HistogramLabels:        c.list("histogram-label"),
			MaxObservationAge:      c.duration("max-observation-age"),
			SandboxConditionTypes:  c.list("sandbox-condition-types"),
			SandboxCreationTimeout: c.duration("sandbox-creation-timeout"),
			UserErrorEventRegex:    c.str("user-error-event-regex"),
			StableConditionType:    c.str("stable-condition-type"),
			Logger:                 log,
		}
		opts.Scope = scope.Scope{
			Namespaces:         c.list("namespaces"),
			NamespacesDenylist: c.list("namespaces-denylist"),
			Node:               c.str("node-name"),
			Shard:              c.integer("shard"),
			TotalShards:        c.integer("total-shards"),
		}
		opts.Autoshard = scope.Autoshard{Pod: c.str("pod"), Namespace: c.str("pod-namespace")}
		netpols := c.boolean("networkpolicies")
		opts.NetworkPolicies, opts.NetworkPluginProfile, opts.NetworkPolicyTargetPods = &netpols, c.str("network-plugin-profile"), c.boolean("networkpolicy-target-pods")
		if err := c.err(); err != nil {
			return err
		}
		// Zero would silently become the default.
		for key, d := range map[string]time.Duration{"max-observation-age": opts.MaxObservationAge, "sandbox-creation-timeout": opts.SandboxCreationTimeout} {
			if d == 0 {
				return fmt.Errorf("--%s must be at least 1s, got 0s", key)
			}
		}
		if opts.Scope.TotalShards == 0 {
			// Zero would silently become the default, one shard.
			return fmt.Errorf("--total-shards must be at least 1, got 0")
		}
		opts.Complete()
		if err := opts.Validate(); err != nil {
			return err
		}
		return run(cmd.Context(), opts)
	}
	return cmd
}
