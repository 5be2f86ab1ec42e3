// Command scale is podslo's scale benchmark (`make bench-scale`, not part of
// CI): on one kwok cluster it grows the number of pods through a list of
// sizes and, at each size, measures podslo with per-pod series, podslo
// without them and kube-state-metrics (pods collector only), all three
// running side by side against the same pods. It writes the results as JSON
// and as a markdown table; ./plot renders them. docs/benchmarks.md ("Scale
// on kwok") explains every figure.
//
//	go run . --podslo ../../bin/podslo-exporter --ksm ~/.cache/podslo/ksm-v2.20.0/kube-state-metrics
//
// With --podslo-memory-limit each podslo runs in a memory cgroup under that
// limit with the chart's GOMEMLIMIT, and OOM kills fail the run; --ksm ""
// leaves kube-state-metrics out (`make bench-memlimit`). --layout shards
// and --layout per-node measure the scale-out modes against one exporter
// instead (layout.go, `make bench-shards` and `make bench-pernode`).
package main

import (
	"context"
	"log/slog"

	"github.com/podslo/podslo/hack/harness"
)

func main() {
	harness.Main("scale", func(ctx context.Context, log *slog.Logger, args []string) error {
		opts, err := parseOptions(args)
		if err == nil {
			err = opts.Validate()
		}
		switch {
		case err != nil:
			return err
		case opts.Layout != "":
			return runLayout(ctx, opts, log)
		}
		return run(ctx, opts, log)
	})
}
