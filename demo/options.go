package demo

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/spf13/pflag"
)

// Defaults of Options.
const (
	DefaultNodes                   = 4
	DefaultListenAddress           = "127.0.0.1:8080"
	DefaultAgentListenAddress      = "127.0.0.1:8081"
	DefaultPrometheusListenAddress = "127.0.0.1:9090"
	DefaultRefresh                 = 2 * time.Second
	// DefaultChurnInterval is how often one pod of the workload is deleted
	// and replaced: termination and creation go on all the time.
	DefaultChurnInterval = 3 * time.Second
)

// Options configures a demo. The zero value of each field means its
// documented default.
type Options struct {
	// SourceDir is podslo's source tree: the demo reads deploy/kwok,
	// alerts/ and hack/ from it, and builds missing binaries there.
	// Default ".".
	SourceDir string
	// BinDir holds etcd, kube-apiserver, kube-scheduler and
	// kube-controller-manager, KwokBinDir kwok and kwokctl; missing ones
	// are built. Default: $PODSLO_TESTBIN and $PODSLO_KWOKBIN, else the
	// Makefile's cache, ~/.cache/podslo/testbin/<kubernetes version> and
	// its kwok-<kwok version>.
	BinDir, KwokBinDir string
	// Nodes is the number of kwok nodes; one agent runs for each. Default
	// DefaultNodes.
	Nodes int
	// Workload is what runs on them. Default DefaultWorkload().
	Workload *Workload
	// ChurnInterval spaces the pod deletions that keep the workload
	// moving; negative turns churn off. Default DefaultChurnInterval.
	ChurnInterval time.Duration
	// ListenAddress is the exporter's; agents listen from
	// AgentListenAddress up, one port per node. Defaults
	// DefaultListenAddress and DefaultAgentListenAddress.
	ListenAddress, AgentListenAddress string
	// Prometheus, when true, also runs Prometheus (PrometheusBinary,
	// default "prometheus" on PATH; `make demo` passes the Prometheus 3 of
	// `make promstackbin`) on PrometheusListenAddress (default
	// DefaultPrometheusListenAddress), scraping the exporter and the agents
	// every 5 s with podslo's recording and alerting rules.
	Prometheus              bool
	PrometheusBinary        string
	PrometheusListenAddress string
	// PrometheusNativeHistograms has that Prometheus scrape native
	// histograms too, keeping the classic ones, as the chart's
	// ServiceMonitor and PodMonitors ask (scrapeClassicHistograms): a
	// Prometheus that scrapes native histograms drops the classic buckets
	// that podslo's rules read unless told to keep them.
	PrometheusNativeHistograms bool
	// IgnoredNamespaces are namespaces the demo's exporter does not watch
	// (its --namespaces-denylist): the end-to-end test installs the chart
	// there, whose pods would join the classes it checks against the
	// simulator's configured delays.
	IgnoredNamespaces []string
	// Out receives the progress bars and the live table; nil means none.
	Out io.Writer
	// Refresh is how often the live table is redrawn. Default
	// DefaultRefresh.
	Refresh time.Duration
	// Logger receives the logs of the demo, the exporter and the agents.
	// Default: discard (the table is the demo's output).
	Logger *slog.Logger
}

// Endpoints are where a running demo's parts listen.
type Endpoints struct {
	Kubeconfig string
	Exporter   string
	Agents     []string
	// Prometheus is empty without Options.Prometheus; PrometheusConfig is
	// its configuration file, which names the rule files the demo wrote.
	Prometheus, PrometheusConfig string
}

// AddFlags binds a flag to each field an operator sets, with the field's
// default as the flag's.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.SourceDir, "source-dir", ".", "podslo's source tree (deploy/kwok, alerts/, hack/)")
	fs.IntVar(&o.Nodes, "nodes", DefaultNodes, "Number of kwok nodes; one agent runs for each")
	fs.DurationVar(&o.ChurnInterval, "churn-interval", DefaultChurnInterval, "How often a pod is deleted and replaced; negative turns churn off")
	fs.StringVar(&o.ListenAddress, "listen-address", DefaultListenAddress, "The exporter's address (/, /metrics, /healthz, /readyz)")
	fs.StringVar(&o.AgentListenAddress, "agent-listen-address", DefaultAgentListenAddress, "The first agent's address; the others take the next ports")
	fs.BoolVar(&o.Prometheus, "prometheus", false, "Also run Prometheus, scraping the exporter and the agents, with podslo's rules")
	fs.StringVar(&o.PrometheusBinary, "prometheus-binary", "prometheus", "Prometheus 3 binary (make promstackbin builds it)")
	fs.BoolVar(&o.PrometheusNativeHistograms, "prometheus-native-histograms", false, "Have Prometheus scrape native histograms too, keeping the classic ones")
	fs.StringVar(&o.PrometheusListenAddress, "prometheus-listen-address", DefaultPrometheusListenAddress, "Prometheus' address")
}

// setDefaults fills in the defaults; New calls it once.
func (o *Options) setDefaults() {
	if o.SourceDir == "" {
		o.SourceDir = "."
	}
	if o.BinDir == "" {
		o.BinDir = os.Getenv("PODSLO_TESTBIN")
	}
	if o.KwokBinDir == "" {
		o.KwokBinDir = os.Getenv("PODSLO_KWOKBIN")
	}
	if o.Nodes == 0 {
		o.Nodes = DefaultNodes
	}
	if o.Workload == nil {
		o.Workload = DefaultWorkload()
	}
	if o.ChurnInterval == 0 {
		o.ChurnInterval = DefaultChurnInterval
	}
	if o.ListenAddress == "" {
		o.ListenAddress = DefaultListenAddress
	}
	if o.AgentListenAddress == "" {
		o.AgentListenAddress = DefaultAgentListenAddress
	}
	if o.PrometheusBinary == "" {
		o.PrometheusBinary = "prometheus"
	}
	if o.PrometheusListenAddress == "" {
		o.PrometheusListenAddress = DefaultPrometheusListenAddress
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if o.Refresh == 0 {
		o.Refresh = DefaultRefresh
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// validate reports every invalid option at once; New calls it once, after
// setDefaults.
func (o *Options) validate() error {
	var errs []error
	if _, err := os.Stat(filepath.Join(o.SourceDir, "deploy", "kwok", "pod-stages.yaml")); err != nil {
		errs = append(errs, fmt.Errorf("--source-dir %q is not podslo's source tree: %w", o.SourceDir, err))
	}
	if o.Nodes < 1 || o.Nodes > 100 {
		errs = append(errs, fmt.Errorf("--nodes must be between 1 and 100, got %d", o.Nodes))
	}
	for flag, addr := range map[string]string{"--listen-address": o.ListenAddress, "--agent-listen-address": o.AgentListenAddress, "--prometheus-listen-address": o.PrometheusListenAddress} {
		if err := loopback(addr); err != nil {
			errs = append(errs, fmt.Errorf("%s %q: %w", flag, addr, err))
		}
	}
	if o.Refresh < 0 {
		errs = append(errs, fmt.Errorf("--refresh must not be negative, got %s", o.Refresh))
	}
	if o.Workload != nil {
		if err := o.Workload.Validate(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// errNotLoopback keeps a demo, whose endpoints carry no authentication,
// off every interface but loopback.
var errNotLoopback = errors.New("a demo listens on loopback addresses (127.0.0.0/8) only")

func loopback(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() || ip.To4() == nil {
		return errNotLoopback
	}
	if !portRE.MatchString(port) {
		return fmt.Errorf("port %q: want a number", port)
	}
	return nil
}

var portRE = regexp.MustCompile(`^[0-9]{1,5}$`)
