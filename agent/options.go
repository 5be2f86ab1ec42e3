package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"

	"github.com/podslo/podslo/conditions"
)

// Defaults of Options.
const (
	// DefaultListenAddress is one port above the exporter's, so that both
	// can run on one host.
	DefaultListenAddress       = ":8081"
	DefaultStableConditionType = "podslo.io/Stable"
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
	// StableConditionType is the type of the Stable condition; it needs a
	// domain prefix. Default DefaultStableConditionType.
	StableConditionType string
	// ShutdownTimeout bounds the HTTP server's graceful shutdown. Default 5s.
	ShutdownTimeout time.Duration
	// Logger receives all logs. Default: discard.
	Logger *slog.Logger

	// listener, when set by tests, replaces ListenAddress.
	listener net.Listener
	// restConfig, when set by tests, replaces Kubeconfig.
	restConfig *rest.Config
}

// Complete fills in the defaults.
func (o *Options) Complete() {
	if o.ListenAddress == "" {
		o.ListenAddress = DefaultListenAddress
	}
	if o.StableConditionType == "" {
		o.StableConditionType = DefaultStableConditionType
	}
	if o.ShutdownTimeout == 0 {
		o.ShutdownTimeout = 5 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports every invalid option at once, so an operator fixes them
// in one go.
func (o *Options) Validate() error {
	var errs []error
	if o.NodeName == "" {
		errs = append(errs, ErrNoNodeName)
	} else if msgs := validation.IsDNS1123Subdomain(o.NodeName); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--node-name %q: %s", o.NodeName, strings.Join(msgs, "; ")))
	}
	if _, _, err := net.SplitHostPort(o.ListenAddress); o.ListenAddress != "" && err != nil {
		errs = append(errs, fmt.Errorf("--listen-address %q: %w", o.ListenAddress, err))
	}
	if o.StableConditionType != "" {
		if _, err := conditions.NewOwner(o.StableConditionType); err != nil {
			errs = append(errs, fmt.Errorf("--stable-condition-type: %w", err))
		}
	}
	if o.ShutdownTimeout < 0 {
		errs = append(errs, fmt.Errorf("shutdown timeout must not be negative, got %s", o.ShutdownTimeout))
	}
	return errors.Join(errs...)
}
