package cmd

import (
	"fmt"
	"runtime/debug"

	"github.com/prometheus/common/version"
	"github.com/spf13/cobra"

	"github.com/podslo/podslo/store"
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
		Short: "Print the version, revision, branch, build user and date, Go version, and the state formats read and written",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprint(cmd.OutOrStdout(), versionText())
			return err
		},
	}
}

// versionText is what `podslo version` and `podslo --version` print:
// prometheus/common's version lines, then the state formats.
func versionText() string {
	return version.Print("podslo") + "\n  build:            " + build + "\n  state formats:    " + stateFormats() + "\n"
}

// stateFormats says which formats of the state directory this binary reads
// and which it writes: what decides whether an upgrade or a rollback onto
// a state is safe (CHANGELOG.md).
func stateFormats() string {
	reads := fmt.Sprint(store.OldestFormat)
	if store.NewestFormat != store.OldestFormat {
		reads += " to " + fmt.Sprint(store.NewestFormat)
	}
	return fmt.Sprintf("reads %s, writes %d", reads, store.WriteFormat)
}
