package exporter

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/podslo/podslo/alerts"
	"github.com/podslo/podslo/collectors"
	"github.com/podslo/podslo/informers"
	"github.com/podslo/podslo/internal/serve"
	"github.com/podslo/podslo/internal/slostatus"
	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/netpolicy"
	"github.com/podslo/podslo/scope"
	"github.com/podslo/podslo/sli"
	"github.com/podslo/podslo/store"
)

// Defaults of Options.
const (
	DefaultListenAddress = ":8080"
	DefaultStateDir      = "/var/lib/podslo"
	// DefaultDashboardsURL is the repository's dashboards folder, for an
	// installation that has not said where it imported them.
	DefaultDashboardsURL = "https://github.com/podslo/podslo/tree/main/dashboards"
)

// Options configures the exporter. The zero value of each field means its
// documented default.
type Options struct {
	// Kubeconfig is the path of a kubeconfig file. Default: in-cluster
	// configuration.
	Kubeconfig string
	// ListenAddress serves the landing page on /, /api/v1/classes,
	// /metrics, /healthz and /readyz. Default DefaultListenAddress.
	ListenAddress string
	// WebConfigFile is an exporter-toolkit web config that turns on TLS
	// and basic auth for every path on ListenAddress, probes included.
	// Default none: plain HTTP without authentication.
	WebConfigFile string
	// DashboardsURL is where the landing page links to the dashboards, such
	// as the Grafana folder they were imported into. Default
	// DefaultDashboardsURL.
	DashboardsURL string
	// SLOsFile is a slos.yaml (alerts/slos.yaml's format) whose SLOs the
	// landing page and /api/v1/slos evaluate from the windowed counts.
	// Default none: the slos.yaml this release ships.
	SLOsFile string
	// SLOsValues is a Helm values file of the chart whose monitoring.slos
	// and monitoring.extraSLOs change those SLOs as they change the
	// chart's rules. Default none.
	SLOsValues string
	// StateDir holds the badger state. store.InMemory keeps it in memory and
	// loses exactly-once across restarts. Default DefaultStateDir.
	StateDir string
	// StateMinFree is the free space, in bytes, the state filesystem must
	// keep for a state write to go ahead; below it writes wait (see
	// store.Options.MinFreeBytes). Default store.DefaultMinFreeBytes.
	StateMinFree int64
	// PerPodMetrics exports the per-pod series. Default true.
	PerPodMetrics *bool
	// MetricAllowlist and MetricDenylist are regular expressions of whole
	// family names to expose, or to leave out (kube-state-metrics' flags
	// of the same names); at most one may be set. Default: every family.
	MetricAllowlist, MetricDenylist []string
	// PodLabels are pod label keys copied onto per-pod series as
	// label_<sanitized key>. Default none.
	PodLabels []string
	// HistogramLabels are extra dimensions of the aggregated series:
	// NAME=label:KEY or NAME=annotation:KEY (the pod's), NAME=node-label:KEY
	// (its node's label, through a Node watch) or NAME=owner-kind (its
	// workload kind, through ReplicaSet and Job watches). Default none.
	HistogramLabels []string
	// MaxObservationAge: a first event older than this when first seen is
	// remembered but not observed. Default 1h.
	MaxObservationAge time.Duration
	// SandboxConditionTypes are the condition types that mark a ready
	// sandbox, the first present wins. Default
	// PodReadyToStartContainers,PodHasNetwork.
	SandboxConditionTypes []string
	// SandboxCreationTimeout: a scheduled pod whose first sandbox is not
	// ready after this long counts once as a creation timeout. Default 5m.
	SandboxCreationTimeout time.Duration
	// WatchTolerance: see lifecycle.Config.WatchTolerance.
	WatchTolerance time.Duration
	// StableConditionType is the condition podslo's agent writes once a pod
	// is stable. Default podslo.io/Stable.
	StableConditionType string
	// UserErrorEventRegex matches FailedMount event messages that blame the
	// pod's own spec. Default informers.DefaultUserErrorEventRegex.
	UserErrorEventRegex string
	// NetworkPolicies watches NetworkPolicies and exports their KEP-2136
	// minVersion and conditions (docs/networkpolicy.md). Default true.
	NetworkPolicies *bool
	// NetworkPluginProfile is a YAML file saying what the network plugin
	// implements, against which the Supported and Enforcing conditions are
	// judged. Default none: support is not judged (status Unknown).
	NetworkPluginProfile string
	// NetworkPolicyTargetPods exports how many pods each policy selects.
	// It keeps every label of every pod (about 0.5 KB per pod). Default
	// false.
	NetworkPolicyTargetPods bool
	// NetworkPolicyEvents writes a Warning Event on a NetworkPolicy when
	// its Supported condition turns False or its Problem condition turns
	// True. It needs create and patch on events.k8s.io events. Default
	// false.
	NetworkPolicyEvents bool
	// Profiling serves Go's runtime profiles (net/http/pprof) on
	// /debug/pprof/, behind --web.config.file like every other path. Off
	// by default: a CPU profile costs the process while it runs, and the
	// heap profile names the code's allocation sites.
	Profiling bool
	// Scope is which pods this instance owns (docs/scaling.md):
	// --namespaces, --namespaces-denylist, --node-name, --shard and
	// --total-shards. Default scope.Unscoped, the whole cluster.
	Scope scope.Scope
	// Autoshard, when set (--pod, --pod-namespace), takes the shard and
	// the total from the StatefulSet running this pod, and stops the
	// exporter (scope.ErrShardingChanged) when its replicas change.
	// Default none.
	Autoshard scope.Autoshard
	// ShutdownTimeout bounds the HTTP server's graceful shutdown. Default 5s.
	ShutdownTimeout time.Duration
	// Logger receives all logs. Default: discard.
	Logger *slog.Logger
}

// AddFlags binds a flag to each field an operator sets, with the field's
// default as the flag's. cmd adds the environment and the --config file on
// top, through these same flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", serve.KubeconfigUsage)
	fs.StringVar(&o.ListenAddress, "listen-address", DefaultListenAddress, "Address serving the landing page on /, /api/v1/classes, /metrics, /healthz and /readyz")
	fs.StringVar(&o.WebConfigFile, serve.WebConfigFlag, "", serve.WebConfigUsage)
	fs.StringVar(&o.DashboardsURL, "dashboards-url", DefaultDashboardsURL, "Where the landing page links to the dashboards, e.g. the Grafana folder they were imported into")
	fs.StringVar(&o.SLOsFile, "slos-file", "", "A slos.yaml whose SLOs the landing page and /api/v1/slos evaluate; default: the SLOs this release ships (alerts/slos.yaml)")
	fs.StringVar(&o.SLOsValues, "slos-values", "", "A values file of the Helm chart whose monitoring.slos and monitoring.extraSLOs change those SLOs, as they change its rules (the chart passes its own)")
	fs.StringVar(&o.StateDir, "state-dir", DefaultStateDir, `Directory of the persistent state; ":memory:" keeps it in memory only`)
	fs.Var(newQuantityValue(&o.StateMinFree, store.DefaultMinFreeBytes), "state-min-free", "Free space the state filesystem must keep for a state write to go ahead (a quantity, e.g. 64Mi); below it writes wait and podslo_store_writable is 0")
	if o.PerPodMetrics == nil {
		o.PerPodMetrics = new(bool)
	}
	fs.BoolVar(o.PerPodMetrics, "per-pod-metrics", true, "Export per-pod series")
	fs.StringSliceVar(&o.MetricAllowlist, "metric-allowlist", nil, "Comma-separated regular expressions of whole family names to expose, and no other (exclusive with --metric-denylist)")
	fs.StringSliceVar(&o.MetricDenylist, "metric-denylist", nil, "Comma-separated regular expressions of whole family names not to expose (exclusive with --metric-allowlist)")
	fs.StringArrayVar(&o.PodLabels, "pod-label", nil, "Pod label key to copy onto per-pod series as label_<key> (repeatable)")
	fs.StringArrayVar(&o.HistogramLabels, "histogram-label", nil, "Extra histogram dimension NAME=label:KEY, NAME=annotation:KEY (the pod's), NAME=node-label:KEY (the pod's node's) or NAME=owner-kind (the pod's workload kind) (repeatable)")
	fs.DurationVar(&o.MaxObservationAge, "max-observation-age", lifecycle.DefaultMaxObservationAge, "A first event older than this when first seen is remembered but not observed")
	sandboxTypes := make([]string, 0, len(lifecycle.DefaultSandboxConditionTypes))
	for _, t := range lifecycle.DefaultSandboxConditionTypes {
		sandboxTypes = append(sandboxTypes, string(t))
	}
	fs.StringSliceVar(&o.SandboxConditionTypes, "sandbox-condition-types", sandboxTypes, "Pod condition types that mark a ready sandbox; the first present wins")
	fs.DurationVar(&o.SandboxCreationTimeout, "sandbox-creation-timeout", lifecycle.DefaultSandboxCreationTimeout, "A scheduled pod whose first sandbox is not ready after this long counts once as a creation timeout")
	fs.DurationVar(&o.WatchTolerance, "watch-time-tolerance", lifecycle.DefaultWatchTolerance, "How far outside a condition's one-second time the watch receive time of the update showing it may lie and still time it to the millisecond: the clock difference between podslo's node and the kubelets', plus the watch's delay (at most 999ms)")
	fs.StringVar(&o.StableConditionType, "stable-condition-type", string(lifecycle.DefaultStableConditionType), "Pod condition podslo agent writes once a pod is stable; the exporter observes it")
	fs.StringVar(&o.UserErrorEventRegex, "user-error-event-regex", informers.DefaultUserErrorEventRegex, "FailedMount event messages matching this regular expression mark the pod as a user error, left out of the sandbox SLIs")
	if o.NetworkPolicies == nil {
		o.NetworkPolicies = new(bool)
	}
	fs.BoolVar(o.NetworkPolicies, "networkpolicies", true, "Watch NetworkPolicies and export their KEP-2136 minVersion and conditions (needs get/list/watch on networking.k8s.io networkpolicies)")
	fs.StringVar(&o.NetworkPluginProfile, "network-plugin-profile", "", "YAML file saying what the network plugin implements (docs/networkpolicy.md); without it, NetworkPolicy support is not judged")
	fs.BoolVar(&o.NetworkPolicyTargetPods, "networkpolicy-target-pods", false, "Export how many pods each NetworkPolicy selects; keeps every label of every pod (about 0.5 KB per pod)")
	fs.BoolVar(&o.Profiling, "enable-profiling", false, "Serve Go's runtime profiles (pprof) on /debug/pprof/ of --listen-address")
	fs.BoolVar(&o.NetworkPolicyEvents, "networkpolicy-events", false, "Write a Warning Event on a NetworkPolicy when its Supported condition turns False or its Problem condition turns True (needs create/patch on events.k8s.io events)")
	fs.StringSliceVar(&o.Scope.Namespaces, "namespaces", nil, "Comma-separated namespaces to watch, one watch each (default: all namespaces); with --namespaces-denylist, the denied ones are removed, as in kube-state-metrics")
	fs.StringSliceVar(&o.Scope.NamespacesDenylist, "namespaces-denylist", nil, "Comma-separated namespaces not to watch, left out by a field selector on every watch")
	fs.StringVar(&o.Scope.Node, "node-name", "", "Watch only the pods bound to this node (spec.nodeName field selector): per-node mode, e.g. from the downward API's spec.nodeName")
	fs.IntVar(&o.Scope.Shard, "shard", 0, "This instance's shard, zero-indexed, of --total-shards: it owns the pods whose UID hashes to it (kube-state-metrics' hash)")
	fs.Var(newShardsValue(&o.Scope.TotalShards), "total-shards", "Number of shards the pods are split into")
	fs.StringVar(&o.Autoshard.Pod, "pod", "", "Autosharding: this exporter's pod name; with --pod-namespace, the shard is its StatefulSet ordinal and the total its replicas (needs get on pods and get/list/watch on statefulsets)")
	fs.StringVar(&o.Autoshard.Namespace, "pod-namespace", "", "Autosharding: this exporter's pod namespace (see --pod)")
}

// quantityValue is a flag of bytes written as a Kubernetes quantity, such
// as 64Mi or 1G.
type quantityValue struct{ p *int64 }

func newQuantityValue(p *int64, def int64) quantityValue {
	*p = def
	return quantityValue{p}
}

func (q quantityValue) String() string {
	if q.p == nil {
		return ""
	}
	return resource.NewQuantity(*q.p, resource.BinarySI).String()
}

func (q quantityValue) Set(s string) error {
	v, err := resource.ParseQuantity(strings.TrimSpace(s))
	if err != nil {
		// ParseQuantity's error is a regular expression.
		return errors.New(`want a quantity of bytes, such as "64Mi"`)
	}
	*q.p = v.Value()
	return nil
}

// Type names the value in --help.
func (quantityValue) Type() string { return "quantity" }

// shardsValue is --total-shards: at least 1. Options.Scope.TotalShards
// left at 0 means the default, 1, so a 0 from the command line, the
// environment or the config file would silently become the default; the
// flag refuses it instead.
type shardsValue struct{ p *int }

func newShardsValue(p *int) shardsValue {
	*p = 1
	return shardsValue{p}
}

func (v shardsValue) String() string {
	if v.p == nil {
		return ""
	}
	return strconv.Itoa(*v.p)
}

func (v shardsValue) Set(s string) error {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return errors.New("want a whole number of shards")
	}
	if n < 1 {
		return fmt.Errorf("must be at least 1, got %d", n)
	}
	*v.p = n
	return nil
}

// Type names the value in --help.
func (shardsValue) Type() string { return "int" }

// setDefaults fills in the defaults; New calls it once.
func (o *Options) setDefaults() {
	if o.ListenAddress == "" {
		o.ListenAddress = DefaultListenAddress
	}
	if o.StateDir == "" {
		o.StateDir = DefaultStateDir
	}
	if o.DashboardsURL == "" {
		o.DashboardsURL = DefaultDashboardsURL
	}
	if o.PerPodMetrics == nil {
		t := true
		o.PerPodMetrics = &t
	}
	if o.NetworkPolicies == nil {
		t := true
		o.NetworkPolicies = &t
	}
	// The lifecycle settings (max observation age, sandbox condition types
	// and creation timeout, stable condition type) are defaulted by
	// lifecycle.Config.WithDefaults, in New.
	if o.UserErrorEventRegex == "" {
		o.UserErrorEventRegex = informers.DefaultUserErrorEventRegex
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = 5 * time.Second
	}
	if o.Scope.TotalShards == 0 {
		o.Scope.TotalShards = 1
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// resolve checks every option, parses each setting that has a syntax of
// its own (the web config, the histogram labels, the user-error regular
// expression, the network plugin profile, the scope) and returns the
// configuration the components are built from. It reports every invalid
// option at once, each with the flag that sets it, so an operator fixes
// them in one go. New calls it once, after setDefaults: nothing parses a
// setting again.
func (o *Options) resolve() (config, error) {
	var (
		cfg  config
		errs []error
		err  error
	)
	if _, _, err := net.SplitHostPort(o.ListenAddress); o.ListenAddress != "" && err != nil {
		errs = append(errs, fmt.Errorf("--listen-address %q: %w", o.ListenAddress, err))
	}
	if cfg.web, err = serve.LoadWebConfig(o.WebConfigFile); err != nil {
		errs = append(errs, fmt.Errorf("--%s %q: %w", serve.WebConfigFlag, o.WebConfigFile, err))
	}
	if o.DashboardsURL != "" {
		// A relative URL is fine (a Grafana behind the same host); another
		// scheme would be a link html/template neutralizes anyway.
		if u, err := url.Parse(o.DashboardsURL); err != nil {
			errs = append(errs, fmt.Errorf("--dashboards-url: %w", err))
		} else if u.Scheme != "" && u.Scheme != "http" && u.Scheme != "https" {
			errs = append(errs, fmt.Errorf("--dashboards-url %q: want an http, https or relative URL", o.DashboardsURL))
		}
	}
	for _, d := range []struct {
		flag  string
		value time.Duration
	}{{"--max-observation-age", o.MaxObservationAge}, {"--sandbox-creation-timeout", o.SandboxCreationTimeout}} {
		switch {
		case d.value < 0:
			errs = append(errs, fmt.Errorf("%s must not be negative, got %s", d.flag, d.value))
		case d.value%time.Second != 0:
			// Condition times have one-second precision: 500ms would be
			// truncated to 0s, and 1.5s compared as 1s.
			errs = append(errs, fmt.Errorf("%s must be a whole number of seconds (condition times have one-second precision), got %s", d.flag, d.value))
		}
	}
	if o.WatchTolerance < 0 || o.WatchTolerance >= time.Second {
		errs = append(errs, fmt.Errorf("--watch-time-tolerance must be from 0s to 999ms, got %s", o.WatchTolerance))
	}
	if o.StateMinFree < 0 {
		errs = append(errs, fmt.Errorf("--state-min-free must not be negative, got %d", o.StateMinFree))
	}
	for _, t := range o.SandboxConditionTypes {
		if strings.TrimSpace(t) == "" {
			errs = append(errs, errors.New("--sandbox-condition-types must not contain an empty type"))
		}
	}
	names := map[string]string{}
	for _, k := range o.PodLabels {
		if k == "" {
			errs = append(errs, errors.New("--pod-label must not be empty"))
			continue
		}
		n := collectors.PodLabelName(k)
		if prev, ok := names[n]; ok && prev != k {
			errs = append(errs, fmt.Errorf("--pod-label %q and %q both become label %q", prev, k, n))
		}
		names[n] = k
	}
	if cfg.histogramLabels, err = sli.ParseHistogramLabels(o.HistogramLabels); err != nil {
		errs = append(errs, err)
	}
	if cfg.families, err = collectors.NewFamilyFilter(o.MetricAllowlist, o.MetricDenylist); err != nil {
		errs = append(errs, err)
	}
	if cfg.userErrors, err = regexp.Compile(o.UserErrorEventRegex); err != nil {
		errs = append(errs, fmt.Errorf("--user-error-event-regex: %w", err))
	}
	if cfg.profile, err = o.networkPluginProfile(); err != nil {
		errs = append(errs, err)
	}
	if err := o.Scope.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := o.Autoshard.Validate(); err != nil {
		errs = append(errs, err)
	} else if o.Autoshard.Enabled() && (o.Scope.Sharded() || o.Scope.Shard != 0) {
		errs = append(errs, errors.New("--shard and --total-shards come from the StatefulSet with --pod and --pod-namespace: set one or the other"))
	}
	if cfg.slos, err = alerts.LoadFlags(o.SLOsFile, o.SLOsValues); err != nil {
		errs = append(errs, err)
	} else if cfg.status, err = slostatus.New(cfg.slos, cfg.histogramLabels.Names()); err != nil {
		errs = append(errs, fmt.Errorf("--slos-file: %w", err))
	}
	if o.StateDir != "" {
		sopts := store.Options{Dir: o.StateDir}
		if err := sopts.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("--state-dir: %w", err))
		}
	}
	if len(errs) > 0 {
		return config{}, errors.Join(errs...)
	}
	histogramKeys, keepAnnotations := cfg.histogramLabels.Keys()
	cfg.lifecycle = lifecycle.Config{
		SandboxConditionTypes:  conditionTypes(o.SandboxConditionTypes),
		MaxObservationAge:      o.MaxObservationAge,
		SandboxCreationTimeout: o.SandboxCreationTimeout,
		StableConditionType:    corev1.PodConditionType(o.StableConditionType),
		WatchTolerance:         o.WatchTolerance,
	}.WithDefaults()
	cfg.labels = collectors.Labels{Pod: o.PodLabels, Histogram: cfg.histogramLabels.Names()}
	cfg.keepLabels = append(append([]string(nil), o.PodLabels...), histogramKeys...)
	cfg.keepAnnotations = keepAnnotations
	cfg.nodeLabels = cfg.histogramLabels.NodeLabelKeys()
	cfg.ownerKind = cfg.histogramLabels.OwnerKind()
	return cfg, nil
}

// windowRetention is how long the store keeps its windowed counts: the
// longest SLO window, and at least the longest alert window.
func (c *config) windowRetention() time.Duration {
	keep := slices.Max(alerts.RatioWindows())
	for i := range c.slos.SLOs {
		keep = max(keep, c.slos.SLOs[i].WindowDuration())
	}
	return keep
}

// networkPluginProfile loads --network-plugin-profile; nil without it.
// The NetworkPolicy options that nothing would read without
// --networkpolicies are refused rather than ignored.
func (o *Options) networkPluginProfile() (*netpolicy.Profile, error) {
	if !*o.NetworkPolicies {
		var errs []error
		if o.NetworkPluginProfile != "" {
			errs = append(errs, errors.New("--network-plugin-profile needs --networkpolicies"))
		}
		if o.NetworkPolicyTargetPods {
			errs = append(errs, errors.New("--networkpolicy-target-pods needs --networkpolicies"))
		}
		if o.NetworkPolicyEvents {
			errs = append(errs, errors.New("--networkpolicy-events needs --networkpolicies"))
		}
		return nil, errors.Join(errs...)
	}
	if o.NetworkPluginProfile == "" {
		return nil, nil
	}
	p, err := netpolicy.LoadProfile(o.NetworkPluginProfile)
	if err != nil {
		return nil, fmt.Errorf("--network-plugin-profile: %w", err)
	}
	return p, nil
}

func conditionTypes(types []string) []corev1.PodConditionType {
	out := make([]corev1.PodConditionType, 0, len(types))
	for _, t := range types {
		out = append(out, corev1.PodConditionType(strings.TrimSpace(t)))
	}
	return out
}
