package cmd

import (
	"fmt"
	"runtime/debug"

	"github.com/prometheus/common/version"
	"github.com/spf13/cobra"
)

// The release build (make build, make image, the Dockerfile) stamps the
// version through ldflags. A build without them (go build, go install
// github.com/podslo/podslo@v0.1.0) still has the module's version ("(devel)"
// for a local checkout), which says more than an empty one in `podslo
// version`, podslo_build_info and the User-Agent.
func init() {
	if bi, ok := debug.ReadBuildInfo(); ok && version.Version == "" {
		version.Version = bi.Main.Version
	}
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, revision, branch, build user and date, and Go version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), version.Print("podslo"))
			return err
		},
	}
}
