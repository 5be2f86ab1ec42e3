package harness

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

// ErrMismatch marks a run that finished and whose figures disagree with
// what they must be: Main exits 2 for it, 1 for any other error.
var ErrMismatch = errors.New("results off")

// Main runs run as a command named name: with a context cancelled on
// SIGINT or SIGTERM, a text logger on stderr and the command's arguments.
// An error is printed as "name: error" and exits 1, or 2 when it wraps
// ErrMismatch.
func Main(name string, run func(ctx context.Context, log *slog.Logger, args []string) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, slog.New(slog.NewTextHandler(os.Stderr, nil)), os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(ExitCode(err))
	}
}

// ExitCode is the status Main exits with for err.
func ExitCode(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrMismatch):
		return 2
	}
	return 1
}
