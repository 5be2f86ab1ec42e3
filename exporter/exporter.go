package exporter

import (
	"context"
	"net"
	"regexp"
	"time"

	"github.com/podslo/podslo/alerts"
	podslocollectors "github.com/podslo/podslo/collectors"
	"github.com/podslo/podslo/internal/serve"
	"github.com/podslo/podslo/internal/slostatus"
	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/netpolicy"
	"github.com/podslo/podslo/sli"
)

// Exporter is podslo's exporter: the watch, the pipeline, the store and
// the HTTP server, configured by New and run by Start.
type Exporter struct {
	// opts are the options with their defaults, validated.
	opts Options
	// cfg is what the components are built from, resolved once from opts.
	cfg config

	// Seams for tests and embedding programs; see Option.
	listener             net.Listener
	timeoutCheckInterval time.Duration
}

// config is the exporter's configuration resolved from its options, once,
// by New (Options.resolve): every component is built from it, so that each
// setting is defaulted and parsed in one place and all components see the
// same value.
type config struct {
	// lifecycle is handed to the pipeline, which runs lifecycle.Step with
	// it, and to the informers, whose trim keeps the conditions it reads.
	lifecycle       lifecycle.Config
	histogramLabels sli.HistogramLabels
	// labels are the label dimensions of the collectors and the landing
	// page.
	labels podslocollectors.Labels
	// keepLabels and keepAnnotations are what the pod trim keeps: the
	// --pod-label keys and the --histogram-label sources.
	keepLabels, keepAnnotations []string
	// nodeLabels are the node label keys the Node watch keeps, and
	// ownerKind whether the ReplicaSet and Job watches run: both for
	// --histogram-label, neither watch runs without them.
	nodeLabels []string
	ownerKind  bool
	// userErrors is --user-error-event-regex, compiled.
	userErrors *regexp.Regexp
	// families is --metric-allowlist or --metric-denylist; nil keeps
	// every family.
	families *podslocollectors.FamilyFilter
	// profile is --network-plugin-profile, loaded; nil without it.
	profile *netpolicy.Profile
	// web is --web.config.file, validated.
	web serve.WebConfig
	// slos are --slos-file's SLOs, or the release's; status evaluates them
	// from the store's windowed counts.
	slos   *alerts.Spec
	status *slostatus.Evaluator
}

// Option changes how New builds the exporter. These are seams for tests and
// for programs that embed the exporter; the command line sets none of them.
type Option func(*Exporter)

// WithListener serves on lis instead of listening on Options.ListenAddress:
// a test passes a listener on a free port, and knows the address before the
// exporter starts. The HTTP server closes it when it shuts down.
func WithListener(lis net.Listener) Option {
	return func(e *Exporter) { e.listener = lis }
}

// WithTimeoutCheckInterval checks for sandbox creation timeouts every d
// instead of every 5 s (pipeline.Options.TimeoutCheckInterval), so that a
// test sees a short timeout counted soon after it passes.
func WithTimeoutCheckInterval(d time.Duration) Option {
	return func(e *Exporter) { e.timeoutCheckInterval = d }
}

// New applies the defaults to opts and validates them, once, resolves the
// configuration every component is built from, and returns the exporter
// they describe. It reads no cluster and opens no state: Start does.
func New(opts Options, with ...Option) (*Exporter, error) {
	opts.setDefaults()
	cfg, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	// Options reports what the exporter runs with.
	opts.MaxObservationAge = cfg.lifecycle.MaxObservationAge
	opts.SandboxCreationTimeout = cfg.lifecycle.SandboxCreationTimeout
	opts.StableConditionType = string(cfg.lifecycle.StableConditionType)
	if len(opts.SandboxConditionTypes) == 0 {
		for _, t := range cfg.lifecycle.SandboxConditionTypes {
			opts.SandboxConditionTypes = append(opts.SandboxConditionTypes, string(t))
		}
	}
	e := &Exporter{opts: opts, cfg: cfg}
	for _, w := range with {
		w(e)
	}
	return e, nil
}

// Options returns the options the exporter runs with, defaults applied.
func (e *Exporter) Options() Options { return e.opts }

// Start connects to the API server, opens the state, builds the components
// (build) and runs them until ctx ends (run); then it shuts down the HTTP
// server, stops the informers and closes the store. It returns the first
// error that stopped it early. Start runs an exporter once.
func (e *Exporter) Start(ctx context.Context) error {
	c, err := e.build(ctx)
	if err != nil {
		return err
	}
	defer c.close()
	err = c.run(ctx)
	e.opts.Logger.Info("Exporter stopped", "err", err)
	return err
}
