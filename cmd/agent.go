package cmd

import (
	"context"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/podslo/podslo/agent"
	"github.com/podslo/podslo/agent/probe"
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
	fs := cmd.Flags()
	addCommonFlags(fs)
	fs.String("node-name", "", "Node whose pods the agent watches and writes (default $NODE_NAME)")
	fs.String("listen-address", agent.DefaultListenAddress, "Address serving /metrics, /healthz and /readyz")
	addWebConfigFlag(fs)
	fs.String("stable-condition-type", agent.DefaultStableConditionType, "Type of the condition set once a pod has been Ready for minReadySeconds without a container restart")
	fs.String("probe-condition-type", agent.DefaultProbeConditionType, "Type of the readiness gate condition written from the probe in a pod's "+probe.Annotation+" annotation")
	fs.Duration("min-probe-period", agent.DefaultMinProbePeriod, "Shortest period and timeout a readiness probe may ask for")
	fs.Int("max-probe-workers", agent.DefaultMaxProbeWorkers, "Most pods probed at once; a pod beyond it gets a Warning Event and waits for a free worker")

	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		c, err := bindConfig(cmd)
		if err != nil {
			return err
		}
		log, err := c.logger(stderr)
		if err != nil {
			return err
		}
		// NODE_NAME comes last, after the flag, PODSLO_NODE_NAME and the
		// file: it is what a DaemonSet sets from spec.nodeName.
		node := c.str("node-name")
		if node == "" {
			node = os.Getenv("NODE_NAME")
		}
		opts := agent.Options{
			NodeName:            node,
			Kubeconfig:          c.str("kubeconfig"),
			ListenAddress:       c.str("listen-address"),
			WebConfigFile:       c.str("web.config.file"),
			StableConditionType: c.str("stable-condition-type"),
			ProbeConditionType:  c.str("probe-condition-type"),
			MinProbePeriod:      c.duration("min-probe-period"),
			MaxProbeWorkers:     c.integer("max-probe-workers"),
			Logger:              log,
		}
		if err := c.err(); err != nil {
			return err
		}
		a, err := agent.New(opts)
		if err != nil {
			return err
		}
		return run(cmd.Context(), a)
	}
	return cmd
}
