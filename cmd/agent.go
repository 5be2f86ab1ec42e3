//go:build !podslo_exporter

package cmd

import (
	"context"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/podslo/podslo/agent"
)

// startAgent is what `podslo agent` runs; tests of the command line pass
// their own function to newAgentCommand instead.
func startAgent(ctx context.Context, a *agent.Agent) error { return a.Start(ctx) }

func newAgentCommand(stderr io.Writer, run func(context.Context, *agent.Agent) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Write the pod conditions the kubelet does not (" + agent.DefaultStableConditionType + ") on the pods of one node",
		Args:  cobra.NoArgs,
	}
	var opts agent.Options
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
		// NODE_NAME comes last, after the flag, PODSLO_NODE_NAME and the
		// file: it is what a DaemonSet sets from spec.nodeName.
		if opts.NodeName == "" {
			opts.NodeName = os.Getenv("NODE_NAME")
		}
		opts.Logger = log
		a, err := agent.New(opts)
		if err != nil {
			return err
		}
		return run(cmd.Context(), a)
	}
	return cmd
}
