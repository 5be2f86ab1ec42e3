//go:build !podslo_exporter

package cmd

import (
	"io"
	"os"

	"github.com/spf13/cobra"
)

// build names what this binary holds, for `podslo version`: the full
// binary runs every role.
const build = "full (exporter, agent, demo)"

// addNodeCommands adds the commands the exporter's image does not need:
// the agent (gRPC and the probers) and the demo (kwok, the control plane).
// The exporter's binary, built with the podslo_exporter tag, leaves them
// out so that their code is not mapped into the exporter's memory.
func addNodeCommands(root *cobra.Command, stderr io.Writer) {
	root.AddCommand(newAgentCommand(stderr, startAgent))
	root.AddCommand(newDemoCommand(os.Stdout, stderr))
}
