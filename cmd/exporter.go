package cmd

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/podslo/podslo/exporter"
)

func newExporterCommand(stderr io.Writer, run func(context.Context, *exporter.Exporter) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "exporter",
		Short: "Export pod lifecycle SLIs from the cluster's pods to Prometheus",
		Args:  cobra.NoArgs,
	}
	var opts exporter.Options
	fs := cmd.Flags()
	addCommonFlags(fs)
	opts.AddFlags(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := bindConfig(cmd)
		if err != nil {
			return err
		}
		log, err := c.logger(stderr)
		if err != nil {
			return err
		}
		if err := c.err(); err != nil {
			return err
		}
		// Zero would silently become the default.
		for _, d := range []struct {
			key   string
			value time.Duration
		}{{"max-observation-age", opts.MaxObservationAge}, {"sandbox-creation-timeout", opts.SandboxCreationTimeout}} {
			if d.value == 0 {
				return fmt.Errorf("--%s must be at least 1s, got 0s", d.key)
			}
		}
		if opts.WatchTolerance == 0 {
			// Zero would silently become the default too.
			return fmt.Errorf("--watch-time-tolerance must be at least 1ms, got 0s")
		}
		opts.Logger = log
		e, err := exporter.New(opts)
		if err != nil {
			return err
		}
		return run(cmd.Context(), e)
	}
	return cmd
}
