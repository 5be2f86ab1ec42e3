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
	"errors"
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
	if err == nil && opts.Rejudge != "" {
		err = rejudge(opts, log)
	} else if err == nil {
		err = run(ctx, opts, log)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		if errors.Is(err, errMismatch) {
			os.Exit(2)
		}
		os.Exit(1)
	}
}
