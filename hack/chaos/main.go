// Command chaos is podslo's chaos run (`make chaos`, and `make chaos-short`
// in `make test`): on a kwok cluster with deploy/kwok's pod stages it churns
// pods (creations, sandbox re-creations, graceful and forced deletions,
// same-name re-creations, stuck and user-error pods) while it SIGKILLs the
// exporter, stops kube-apiserver, compacts etcd and fills the exporter's
// state filesystem. It records every revision of every pod from etcd's own
// watch, derives from them what docs/metrics.md says podslo must export, and
// compares that with the exporter's /metrics exactly. docs/reliability.md
// explains the run and its figures.
//
//	go run . --pods 300 --kills 5 --outage 15s ...   (see options.go)
package main

import (
	"context"
	"log/slog"

	"github.com/podslo/podslo/hack/harness"
)

func main() {
	harness.Main("chaos", func(ctx context.Context, log *slog.Logger, args []string) error {
		opts, err := parseOptions(args)
		if err == nil {
			err = opts.Validate()
		}
		switch {
		case err != nil:
			return err
		case opts.Rejudge != "":
			return rejudge(opts, log)
		}
		return run(ctx, opts, log)
	})
}
