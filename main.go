// Command podslo exports Kubernetes pod lifecycle SLIs.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/podslo/podslo/cmd"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := cmd.NewRoot(os.Stderr).ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "podslo:", err)
		os.Exit(cmd.ExitCode(err))
	}
}
