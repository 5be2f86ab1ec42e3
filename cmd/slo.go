package cmd

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/podslo/podslo/alerts"
)

func newSLOCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "slo",
		Short: "Work with podslo's SLO specification (alerts/slos.yaml)",
		Args:  cobra.NoArgs,
	}
	cmd.AddCommand(newSLOExportCommand())
	return cmd
}

func newSLOExportCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Print the SLOs for Sloth or OpenSLO, one per SLO and class label",
		Long: "Prints the SLOs of the specification, by default the slos.yaml this release ships, " +
			"as a Sloth specification (prometheus/v1, for `sloth generate`) or as OpenSLO v1 objects. " +
			"Each SLO becomes one per groupBy label, whose queries keep the cluster and class labels: " +
			"the error ratio podslo's rules record, per cluster and class.",
		Args: cobra.NoArgs,
	}
	fs := cmd.Flags()
	format := fs.String("format", "", "Output format: "+strings.Join(alerts.ExportFormats, " or "))
	specPath := fs.String("slos-file", "", "SLO specification to read, in the format of alerts/slos.yaml (default: the one this release ships)")
	valuesPath := fs.String("slos-values", "", "A values file of the Helm chart whose monitoring.slos and monitoring.extraSLOs change the SLOs, as they change its rules")
	service := fs.String("service", "podslo", "Service the SLOs belong to: Sloth's service, OpenSLO's Service object")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if !slices.Contains(alerts.ExportFormats, *format) {
			return fmt.Errorf("--format %q: want %s", *format, strings.Join(alerts.ExportFormats, " or "))
		}
		spec, err := alerts.LoadFlags(*specPath, *valuesPath)
		if err != nil {
			return err
		}
		out, err := spec.Export(*format, *service)
		if err != nil {
			return err
		}
		_, err = cmd.OutOrStdout().Write(out)
		return err
	}
	return cmd
}
