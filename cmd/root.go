package cmd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/prometheus/common/version"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/podslo/podslo/exporter"
)

// NewRoot returns the podslo command with its subcommands.
func NewRoot(stderr io.Writer) *cobra.Command {
	return newRoot(stderr, func(ctx context.Context, e *exporter.Exporter) error { return e.Start(ctx) })
}

// newRoot takes what each subcommand runs, so tests can see the merged
// options without starting anything.
func newRoot(stderr io.Writer, runExporter func(context.Context, *exporter.Exporter) error) *cobra.Command {
	root := &cobra.Command{
		Use:           "podslo",
		Short:         "Service level indicators for Kubernetes pod start-up and tear-down",
		Version:       version.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetErr(stderr)
	root.SetVersionTemplate(versionText())
	root.AddCommand(newExporterCommand(stderr, runExporter))
	addNodeCommands(root, stderr)
	root.AddCommand(newSLOCommand())
	root.AddCommand(newVersionCommand())
	root.AddCommand(newReportCommand())
	if filepath.Base(os.Args[0]) == "kubectl-podslo" {
		// Installed as a kubectl plugin, it is run as `kubectl podslo`, and
		// its help says so.
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl podslo"}
	}
	return root
}

func addCommonFlags(fs *pflag.FlagSet) {
	fs.String("config", "", "YAML file with flag values, keyed by flag name")
	fs.String("log-level", "info", "Log level: debug, info, warn or error")
	fs.String("log-format", "text", "Log format: text or json")
}

// logger builds the logger --log-level and --log-format ask for.
func (c *config) logger(w io.Writer) (*slog.Logger, error) {
	level, err := c.flags.GetString("log-level")
	if err != nil {
		return nil, err
	}
	format, err := c.flags.GetString("log-format")
	if err != nil {
		return nil, err
	}
	return newLogger(w, level, format)
}

// newLogger builds the slog logger and sends klog's output (client-go's) to
// it.
func newLogger(w io.Writer, levelName, format string) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(levelName)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	hopts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch format {
	case "text":
		h = slog.NewTextHandler(w, hopts)
	case "json":
		h = slog.NewJSONHandler(w, hopts)
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", format)
	}
	log := slog.New(h)
	klog.SetSlogLogger(log)
	return log, nil
}
