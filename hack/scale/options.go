package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Options configure one benchmark run.
type Options struct {
	// Repo is the podslo checkout, for deploy/kwok and hack/scale/kwok.yaml.
	// Default "../..", the repository root seen from hack/scale.
	Repo string
	// Podslo is the exporter binary. Default "<Repo>/bin/podslo-exporter",
	// what the image runs as the exporter (make build).
	Podslo string
	// KSM is the kube-state-metrics binary. Required; given as empty
	// (--ksm ""), the run measures podslo alone, which costs much less
	// at 100k pods, and the tables have no ratios.
	KSM string
	// Testbin holds etcd, kube-apiserver, kube-controller-manager and
	// kube-scheduler; Kwokbin holds kwok and kwokctl. Defaults:
	// $PODSLO_TESTBIN and $PODSLO_KWOKBIN, as make exports them.
	Testbin, Kwokbin string
	// Workdir holds the kwok cluster, the exporters' state and logs; it is
	// removed at the end unless Keep. Default: a new directory in $TMPDIR.
	Workdir string
	// Keep leaves Workdir in place (the cluster is deleted in any case).
	Keep bool
	// Sizes are the pod counts to measure at, growing. Default 10000,
	// 50000, 100000.
	Sizes []int
	// PodsPerNode sets the number of kwok nodes: one per PodsPerNode pods.
	// Default 100.
	PodsPerNode int
	// Workers create and patch pods in parallel. Default 48.
	Workers int
	// QPS and Burst of the benchmark's client. Default 3000 and 6000.
	QPS   float32
	Burst int
	// Scrapes is the number of timed scrapes per exporter and size.
	// Default 20.
	Scrapes int
	// Probes is the number of status changes timed per exporter and size.
	// Default 20.
	Probes int
	// Updates is the number of pods whose status is patched to measure CPU
	// per update (at most the size). Default 10000.
	Updates int
	// SettleTimeout bounds the wait for the pods to become ready and the
	// exporters to go quiet at each size. Default 30m.
	SettleTimeout time.Duration
	// PodsloMemoryLimit, a memory quantity as the chart takes it (512Mi),
	// runs each podslo process in a memory cgroup of its own with that
	// hard limit and GOMEMLIMIT at 90% of it, as the chart sets them, and
	// records OOM kills, peak usage and working set. Default: none, no
	// cgroup and the inherited environment.
	PodsloMemoryLimit string
	memoryLimit       *memoryLimit
	// Restart, at each size, SIGKILLs each exporter in turn (kube-state-
	// metrics too) and starts it again, podslo on the same state, then
	// measures it until its /metrics is complete and it is quiet. Default
	// false.
	Restart bool
	// Profile, when set, runs each podslo with --enable-profiling and
	// writes a CPU profile of each update burst there, one file per size
	// and podslo: cpu-<pods>-<podslo-on|podslo-off>.pprof, the first
	// profileSeconds from the first PATCH.
	Profile string
	// Out is the JSON results file; Markdown the table. Defaults
	// "results/results.json" and "results/results.md", and with a Layout
	// "results/layout-<layout>.json" and ".md".
	Out, Markdown string
	// Layout, "shards" or "per-node", measures that scale-out mode
	// against one unsharded exporter at the largest of Sizes instead
	// (layout.go); kube-state-metrics is not run.
	Layout string
	// Shards is the number of shards of Layout "shards". Default 4.
	Shards int
}

func parseOptions(args []string) (*Options, error) {
	o := &Options{}
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	fs.StringVar(&o.Repo, "repo", "../..", "podslo repository root")
	fs.StringVar(&o.Podslo, "podslo", "", "podslo exporter binary (default <repo>/bin/podslo-exporter, as make build writes it)")
	fs.StringVar(&o.KSM, "ksm", "", `kube-state-metrics binary (required; --ksm "" measures podslo alone)`)
	fs.StringVar(&o.Testbin, "testbin", os.Getenv("PODSLO_TESTBIN"), "directory of etcd, kube-apiserver, kube-controller-manager, kube-scheduler")
	fs.StringVar(&o.Kwokbin, "kwokbin", os.Getenv("PODSLO_KWOKBIN"), "directory of kwok and kwokctl")
	fs.StringVar(&o.Workdir, "workdir", "", "cluster, state and logs (default: a new temporary directory)")
	fs.BoolVar(&o.Keep, "keep", false, "keep the workdir (logs, state) after the run")
	sizes := fs.String("sizes", "1000,10000,100000", "pod counts to measure at, growing")
	fs.IntVar(&o.PodsPerNode, "pods-per-node", 100, "one kwok node per this many pods")
	fs.IntVar(&o.Workers, "workers", 48, "parallel requests when creating and patching pods")
	qps := fs.Float64("qps", 3000, "client QPS")
	fs.IntVar(&o.Burst, "burst", 6000, "client burst")
	fs.IntVar(&o.Scrapes, "scrapes", 20, "timed scrapes per exporter and size")
	fs.IntVar(&o.Probes, "probes", 20, "timed status changes per exporter and size")
	fs.IntVar(&o.Updates, "updates", 10000, "pods patched to measure CPU per update")
	fs.DurationVar(&o.SettleTimeout, "settle-timeout", 30*time.Minute, "wait at most this long for pods and exporters to settle at each size")
	fs.StringVar(&o.PodsloMemoryLimit, "podslo-memory-limit", "", "run each podslo in a memory cgroup with this limit (a quantity such as 512Mi) and GOMEMLIMIT at 90% of it, as the chart does (default: no limit)")
	fs.BoolVar(&o.Restart, "restart", false, "at each size, SIGKILL each exporter (kube-state-metrics too) and restart it, podslo on the same state")
	fs.StringVar(&o.Profile, "profile", "", "directory for a CPU profile (pprof) of each podslo over each update burst's first "+profileSeconds.String())
	fs.StringVar(&o.Out, "out", "", "JSON results (default results/results.json, with --layout results/layout-<layout>.json)")
	fs.StringVar(&o.Markdown, "markdown", "", "markdown table of the results (default as --out, .md)")
	fs.StringVar(&o.Layout, "layout", "", `measure a scale-out mode against one exporter at the largest size: "shards" or "per-node" (one exporter per node)`)
	fs.IntVar(&o.Shards, "shards", 4, `shards of --layout shards`)
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	base := "results/results"
	if o.Layout != "" {
		base = "results/layout-" + o.Layout
	}
	if o.Out == "" {
		o.Out = base + ".json"
	}
	if o.Markdown == "" {
		o.Markdown = strings.TrimSuffix(o.Out, ".json") + ".md"
	}
	if o.Profile != "" {
		// Made now, so that a directory that cannot be written fails the
		// run before the cluster grows, not after.
		if err := os.MkdirAll(o.Profile, 0o755); err != nil {
			return nil, fmt.Errorf("--profile: %w", err)
		}
	}
	ksmGiven := false
	fs.Visit(func(f *flag.Flag) { ksmGiven = ksmGiven || f.Name == "ksm" })
	if o.Layout != "" {
		if ksmGiven && o.KSM != "" {
			return nil, errors.New("--layout measures podslo alone: leave out --ksm")
		}
	} else if !ksmGiven {
		return nil, errors.New(`--ksm is required: the kube-state-metrics binary, or --ksm "" to measure podslo alone`)
	}
	o.QPS = float32(*qps)
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("--sizes: %w", err)
		}
		o.Sizes = append(o.Sizes, n)
	}
	if o.Podslo == "" {
		o.Podslo = filepath.Join(o.Repo, "bin", "podslo-exporter")
	}
	if o.PodsloMemoryLimit != "" {
		l, err := parseMemoryLimit(o.PodsloMemoryLimit)
		if err != nil {
			return nil, fmt.Errorf("--podslo-memory-limit: %w", err)
		}
		o.memoryLimit = &l
	}
	return o, nil
}

// Validate reports the first option that cannot work.
func (o *Options) Validate() error {
	switch o.Layout {
	case "", layoutPerNode:
	case layoutShards:
		if o.Shards < 2 {
			return errors.New("--shards must be at least 2")
		}
	default:
		return fmt.Errorf("--layout %q: want %q or %q", o.Layout, layoutShards, layoutPerNode)
	}
	if o.Layout != "" && o.memoryLimit != nil {
		return errors.New("--layout runs without --podslo-memory-limit")
	}
	paths := []struct{ flag, path string }{
		{"--podslo", o.Podslo},
		{"--testbin", filepath.Join(o.Testbin, "kube-apiserver")},
		{"--kwokbin", filepath.Join(o.Kwokbin, "kwokctl")},
		{"--repo", filepath.Join(o.Repo, "deploy", "kwok", "pod-stages.yaml")},
	}
	if o.KSM != "" {
		paths = append(paths, struct{ flag, path string }{"--ksm", o.KSM})
	}
	for _, f := range paths {
		if f.path == "" {
			return fmt.Errorf("%s is required", f.flag)
		}
		if _, err := os.Stat(f.path); err != nil {
			return fmt.Errorf("%s: %w", f.flag, err)
		}
	}
	if len(o.Sizes) == 0 || !slices.IsSorted(o.Sizes) || o.Sizes[0] <= 0 {
		return errors.New("--sizes must be positive and growing")
	}
	if o.PodsPerNode <= 0 || o.Workers <= 0 || o.Scrapes <= 0 || o.Probes <= 0 || o.Updates <= 0 {
		return errors.New("--pods-per-node, --workers, --scrapes, --probes and --updates must be positive")
	}
	return nil
}
