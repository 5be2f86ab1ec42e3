package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/podslo/podslo/agent/probe"
	"github.com/podslo/podslo/conditions"
	"github.com/podslo/podslo/internal/serve"
	"github.com/podslo/podslo/lifecycle"
)

// Defaults of Options.
const (
	// DefaultListenAddress is one port above the exporter's, so that both
	// can run on one host.
	DefaultListenAddress = ":8081"
	// DefaultStableConditionType is the condition the exporter observes
	// by default: one constant for both.
	DefaultStableConditionType = lifecycle.DefaultStableConditionType
	// DefaultProbeConditionType is the readiness gate a pod lists to be
	// made Ready by the agent's probe.
	DefaultProbeConditionType = "podslo.io/ProbeReady"
	// DefaultMinProbePeriod is KEP-3066's floor: shorter periods and
	// timeouts would let one annotation load the node.
	DefaultMinProbePeriod = probe.DefaultMinPeriod
	// DefaultMaxProbeWorkers is the kubelet's default maxPods: one probed
	// pod each, at 100 ms periods the 1,100 probes/s measured in
	// docs/benchmarks.md.
	DefaultMaxProbeWorkers = 110
)

var (
	// ErrNoNodeName means the agent was not told its node: without it, it
	// would watch and write every pod of the cluster.
	ErrNoNodeName = errors.New("--node-name is required: set it, or the NODE_NAME environment variable (a DaemonSet sets it from spec.nodeName)")
	// ErrNotOnNode means a write to a pod bound to another node, which the
	// agent refuses before sending anything.
	ErrNotOnNode = errors.New("pod is not on the agent's node")
)

// Options configures the agent. The zero value of each field means its
// documented default.
type Options struct {
	// NodeName is the node whose pods the agent watches and writes.
	// Required: no default.
	NodeName string
	// Kubeconfig is the path of a kubeconfig file. Default: in-cluster
	// configuration, whose pod-bound token lets the admission policy check
	// the node.
	Kubeconfig string
	// ListenAddress serves /metrics, /healthz and /readyz. Default
	// DefaultListenAddress.
	ListenAddress string
	// WebConfigFile is an exporter-toolkit web config that turns on TLS
	// and basic auth for every path on ListenAddress, probes included.
	// Default none: plain HTTP without authentication.
	WebConfigFile string
	// StableConditionType is the type of the Stable condition; it needs a
	// domain prefix. Default DefaultStableConditionType.
	StableConditionType string
	// ProbeConditionType is the type of the readiness gate condition written
	// from the podslo.io/readiness-probe annotation's probe; it needs a domain
	// prefix. Default DefaultProbeConditionType.
	ProbeConditionType string
	// MinProbePeriod is the shortest period and timeout a probe may ask
	// for. Default DefaultMinProbePeriod.
	MinProbePeriod time.Duration
	// MaxProbeWorkers bounds the pods probed at once; a pod beyond it gets a
	// Warning Event and waits for a free worker. Default
	// DefaultMaxProbeWorkers.
	MaxProbeWorkers int
	// ShutdownTimeout bounds the HTTP server's graceful shutdown. Default 5s.
	ShutdownTimeout time.Duration
	// Logger receives all logs. Default: discard.
	Logger *slog.Logger
}

// AddFlags binds a flag to each field an operator sets, with the field's
// default as the flag's. cmd adds the environment and the --config file on
// top, through these same flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.NodeName, "node-name", "", "Node whose pods the agent watches and writes (default $NODE_NAME)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", serve.KubeconfigUsage)
	fs.StringVar(&o.ListenAddress, "listen-address", DefaultListenAddress, "Address serving /metrics, /healthz and /readyz")
	fs.StringVar(&o.WebConfigFile, serve.WebConfigFlag, "", serve.WebConfigUsage)
	fs.StringVar(&o.StableConditionType, "stable-condition-type", DefaultStableConditionType, "Type of the condition set once a pod has been Ready for minReadySeconds without a container restart")
	fs.StringVar(&o.ProbeConditionType, "probe-condition-type", DefaultProbeConditionType, "Type of the readiness gate condition written from the probe in a pod's "+probe.Annotation+" annotation")
	fs.DurationVar(&o.MinProbePeriod, "min-probe-period", DefaultMinProbePeriod, "Shortest period and timeout a readiness probe may ask for")
	fs.IntVar(&o.MaxProbeWorkers, "max-probe-workers", DefaultMaxProbeWorkers, "Most pods probed at once; a pod beyond it gets a Warning Event and waits for a free worker")
}

// setDefaults fills in the defaults; New calls it once.
func (o *Options) setDefaults() {
	if o.ListenAddress == "" {
		o.ListenAddress = DefaultListenAddress
	}
	if o.StableConditionType == "" {
		o.StableConditionType = DefaultStableConditionType
	}
	if o.ProbeConditionType == "" {
		o.ProbeConditionType = DefaultProbeConditionType
	}
	if o.MinProbePeriod == 0 {
		o.MinProbePeriod = DefaultMinProbePeriod
	}
	if o.MaxProbeWorkers == 0 {
		o.MaxProbeWorkers = DefaultMaxProbeWorkers
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// resolve reports every invalid option at once, so an operator fixes them
// in one go, and returns what the agent is built from: the web config and
// the owners of the condition types, each parsed here only. New calls it
// once, after setDefaults.
func (o *Options) resolve() (config, error) {
	var (
		cfg  config
		errs []error
		err  error
	)
	if o.NodeName == "" {
		errs = append(errs, ErrNoNodeName)
	} else if msgs := validation.IsDNS1123Subdomain(o.NodeName); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--node-name %q: %s", o.NodeName, strings.Join(msgs, "; ")))
	}
	if _, _, err := net.SplitHostPort(o.ListenAddress); o.ListenAddress != "" && err != nil {
		errs = append(errs, fmt.Errorf("--listen-address %q: %w", o.ListenAddress, err))
	}
	if cfg.web, err = serve.LoadWebConfig(o.WebConfigFile); err != nil {
		errs = append(errs, fmt.Errorf("--%s %q: %w", serve.WebConfigFlag, o.WebConfigFile, err))
	}
	if cfg.stable, err = conditions.NewOwner(o.StableConditionType); err != nil {
		errs = append(errs, fmt.Errorf("--stable-condition-type: %w", err))
	}
	if cfg.probe, err = conditions.NewOwner(o.ProbeConditionType); err != nil {
		errs = append(errs, fmt.Errorf("--probe-condition-type: %w", err))
	} else if o.ProbeConditionType == o.StableConditionType {
		errs = append(errs, fmt.Errorf("--probe-condition-type %q: must differ from --stable-condition-type", o.ProbeConditionType))
	}
	if o.MinProbePeriod < 0 {
		errs = append(errs, fmt.Errorf("--min-probe-period must not be negative, got %s", o.MinProbePeriod))
	}
	if o.MaxProbeWorkers < 0 {
		errs = append(errs, fmt.Errorf("--max-probe-workers must not be negative, got %d", o.MaxProbeWorkers))
	}
	if o.ShutdownTimeout < 0 {
		errs = append(errs, fmt.Errorf("shutdown timeout must not be negative, got %s", o.ShutdownTimeout))
	}
	if len(errs) > 0 {
		return config{}, errors.Join(errs...)
	}
	return cfg, nil
}
