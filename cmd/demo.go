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
	fs := cmd.Flags()
	fs.String("source-dir", ".", "podslo's source tree (deploy/kwok, alerts/, hack/)")
	fs.Int("nodes", demo.DefaultNodes, "Number of kwok nodes; one agent runs for each")
	fs.String("listen-address", demo.DefaultListenAddress, "The exporter's address (/, /metrics, /healthz, /readyz)")
	fs.String("agent-listen-address", demo.DefaultAgentListenAddress, "The first agent's address; the others take the next ports")
	fs.Bool("prometheus", false, "Also run Prometheus, scraping the exporter and the agents, with podslo's rules")
	fs.String("prometheus-binary", "prometheus", "Prometheus binary (Debian: apt-get install prometheus)")
	fs.String("prometheus-listen-address", demo.DefaultPrometheusListenAddress, "Prometheus' address")
	fs.Duration("churn-interval", demo.DefaultChurnInterval, "How often a pod is deleted and replaced; negative turns churn off")
	fs.Duration("duration", 0, "Stop after this long (0: run until interrupted)")
	fs.String("log-file", "", "Write the demo's, exporter's and agents' logs to this file (default: none; the terminal shows the table)")
	fs.String("log-level", "info", "Log level: debug, info, warn or error")

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := bindConfig(cmd)
		if err != nil {
			return err
		}
		log := slog.New(slog.DiscardHandler)
		if path := c.str("log-file"); path != "" {
			f, err := os.Create(path)
			if err != nil {
				return fmt.Errorf("--log-file: %w", err)
			}
			defer f.Close()
			c.set["log-format"] = "text"
			if log, err = c.logger(f); err != nil {
				return err
			}
		}
		opts := demo.Options{
			SourceDir:               c.str("source-dir"),
			Nodes:                   c.integer("nodes"),
			ListenAddress:           c.str("listen-address"),
			AgentListenAddress:      c.str("agent-listen-address"),
			Prometheus:              c.boolean("prometheus"),
			PrometheusBinary:        c.str("prometheus-binary"),
			PrometheusListenAddress: c.str("prometheus-listen-address"),
			ChurnInterval:           c.duration("churn-interval"),
			Out:                     stdout,
			Logger:                  log,
		}
		if err := c.err(); err != nil {
			return err
		}
		d, err := demo.New(opts)
		if err != nil {
			return err
		}
		ctx := cmd.Context()
		if d := c.duration("duration"); d > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, d)
			defer cancel()
		}
		return d.Start(ctx)
	}
	return cmd
}
