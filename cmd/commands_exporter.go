//go:build podslo_exporter

package cmd

import (
	"io"

	"github.com/spf13/cobra"
)

// build names what this binary holds, for `podslo version`.
const build = "exporter (no agent, no demo)"

// addNodeCommands adds nothing: see commands_full.go.
func addNodeCommands(*cobra.Command, io.Writer) {}
