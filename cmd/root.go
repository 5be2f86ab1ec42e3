package cmd

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/prometheus/common/version"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"k8s.io/klog/v2"

	"github.com/podslo/podslo/exporter"
)

// NewRoot returns the podslo command with its subcommands.
func NewRoot(stderr io.Writer) *cobra.Command {
	return newRoot(stderr, func(ctx context.Context, o *exporter.Options) error { return o.Start(ctx) })
}

// newRoot takes what each subcommand runs, so tests can see the merged
// options without starting anything.
func newRoot(stderr io.Writer, runExporter func(context.Context, *exporter.Options) error) *cobra.Command {
	root := &cobra.Command{
		Use:           "podslo",
		Short:         "Service level indicators for Kubernetes pod start-up and tear-down",
		Version:       version.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetErr(stderr)
	root.SetVersionTemplate(version.Print("podslo") + "\n")
	root.AddCommand(newExporterCommand(stderr, runExporter))
	root.AddCommand(newAgentCommand(stderr, startAgent))
	root.AddCommand(newDemoCommand(os.Stdout, stderr))
	root.AddCommand(newVersionCommand())
	return root
}

// config merges flags, PODSLO_* environment variables and an optional YAML
// file, in that order of precedence.
type config struct {
	v *viper.Viper
}

func bindConfig(cmd *cobra.Command) (*config, error) {
	v := viper.New()
	v.SetEnvPrefix("PODSLO")
	v.SetEnvKeyReplacer(strings.NewReplacer("-", "_"))
	v.AutomaticEnv()
	if err := v.BindPFlags(cmd.Flags()); err != nil {
		return nil, fmt.Errorf("bind flags: %w", err)
	}
	if path := v.GetString("config"); path != "" {
		v.SetConfigFile(path)
		v.SetConfigType("yaml")
		if err := v.ReadInConfig(); err != nil {
			return nil, fmt.Errorf("read --config %q: %w", path, err)
		}
	}
	return &config{v: v}, nil
}

// list reads a repeatable flag. From the environment it also takes a
// comma-separated list (PODSLO_POD_LABEL=app,team), which viper alone would
// split on spaces.
func (c *config) list(key string) []string {
	var out []string
	for _, s := range c.v.GetStringSlice(key) {
		for _, part := range strings.Split(s, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}

func addCommonFlags(fs *pflag.FlagSet) {
	fs.String("config", "", "YAML file with flag values, keyed by flag name")
	fs.String("kubeconfig", "", "Path of a kubeconfig file (default: in-cluster configuration)")
	fs.String("log-level", "info", "Log level: debug, info, warn or error")
	fs.String("log-format", "text", "Log format: text or json")
}

// logger builds the slog logger and sends klog's output (client-go's) to it.
func (c *config) logger(w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.v.GetString("log-level"))); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	hopts := &slog.HandlerOptions{Level: level}
	var h slog.Handler
	switch f := c.v.GetString("log-format"); f {
	case "text":
		h = slog.NewTextHandler(w, hopts)
	case "json":
		h = slog.NewJSONHandler(w, hopts)
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", f)
	}
	log := slog.New(h)
	klog.SetSlogLogger(log)
	return log, nil
}
