// Command scale is podslo's scale benchmark (`make bench-scale`, not part of
// CI): on one kwok cluster it grows the number of pods through a list of
// sizes and, at each size, measures podslo with per-pod series, podslo
// without them and kube-state-metrics (pods collector only), all three
// running side by side against the same pods. It writes the results as JSON
// and as a markdown table; ./plot renders them. docs/benchmarks.md ("Scale
// on kwok") explains every figure.
//
//	go run . --podslo ../../bin/podslo --ksm ~/.cache/podslo/ksm-v2.20.0/kube-state-metrics
//
// With --podslo-memory-limit each podslo runs in a memory cgroup under that
// limit with the chart's GOMEMLIMIT, and OOM kills fail the run; --ksm ""
// leaves kube-state-metrics out (`make bench-memlimit`). --layout shards
// and --layout per-node measure the scale-out modes against one exporter
// instead (layout.go, `make bench-shards` and `make bench-pernode`).
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	opts, err := parseOptions(os.Args[1:])
	if err == nil {
		err = opts.Validate()
	}
	if err == nil && opts.Layout != "" {
		err = runLayout(ctx, opts, log)
	} else if err == nil {
		err = run(ctx, opts, log)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}
