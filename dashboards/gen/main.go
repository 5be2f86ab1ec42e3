// Command gen writes the Grafana dashboards of an SLO specification, and
// with -chart the Helm chart's dashboard ConfigMaps.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/podslo/podslo/alerts"
	"github.com/podslo/podslo/dashboards"
)

func main() {
	specPath := flag.String("spec", "../alerts/slos.yaml", "SLO specification")
	out := flag.String("out", "dashboards_out", "directory to write the dashboards to")
	chart := flag.String("chart", "", "Helm chart whose templates/dashboards.yaml to write; empty: none")
	flag.Parse()
	if err := run(*specPath, *out, *chart); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(specPath, out, chart string) error {
	spec, err := alerts.Load(specPath)
	if err != nil {
		return err
	}
	files, err := dashboards.Generate(spec)
	if err != nil {
		return err
	}
	// A dashboard that is no longer generated must not linger.
	stale, err := filepath.Glob(filepath.Join(out, "*.json"))
	if err != nil {
		return err
	}
	for _, f := range stale {
		if _, ok := files[filepath.Base(f)]; !ok {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(out, name), data, 0o644); err != nil {
			return err
		}
	}
	if chart == "" {
		return nil
	}
	tmpl, err := dashboards.ChartTemplate(spec, filepath.Base(specPath))
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(chart, "templates", "dashboards.yaml"), tmpl, 0o644)
}
