//go:build !podslo_exporter

package cmd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/podslo/podslo/demo"
)

func newDemoCommand(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run podslo on a simulated cluster (kwok) on this machine, with a live table per class",
		Long: "Starts a local control plane with kwok's fake nodes and kubelets (podslo's stages in deploy/kwok), " +
			"a workload with churn, the exporter and one agent per node, and optionally Prometheus with podslo's rules. " +
			"Missing binaries are built from the source tree first. Ctrl-C tears everything down.",
		Args: cobra.NoArgs,
	}
	var opts demo.Options
	fs := cmd.Flags()
	opts.AddFlags(fs)
	duration := fs.Duration("duration", 0, "Stop after this long (0: run until interrupted)")
	logFile := fs.String("log-file", "", "Write the demo's, exporter's and agents' logs to this file (default: none; the terminal shows the table)")
	logLevel := fs.String("log-level", "info", "Log level: debug, info, warn or error")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := bindConfig(cmd)
		if err != nil {
			return err
		}
		log := slog.New(slog.DiscardHandler)
		if *logFile != "" {
			f, err := os.Create(*logFile)
			if err != nil {
				return fmt.Errorf("--log-file: %w", err)
			}
			defer f.Close()
			// The terminal shows the table; the file gets plain text.
			if log, err = newLogger(f, *logLevel, "text"); err != nil {
				return err
			}
		}
		if err := c.err(); err != nil {
			return err
		}
		opts.Out = stdout
		opts.Logger = log
		d, err := demo.New(opts)
		if err != nil {
			return err
		}
		ctx := cmd.Context()
		if *duration > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, *duration)
			defer cancel()
		}
		return d.Start(ctx)
	}
	return cmd
}
