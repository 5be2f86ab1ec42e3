// Command gen writes the Prometheus rule files of an SLO specification.
// Operators who need other objectives, selectors or URLs run it on a copy
// of slos.yaml.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/podslo/podslo/alerts"
)

func main() {
	specPath := flag.String("spec", "slos.yaml", "SLO specification")
	rulesPath := flag.String("rules", "prometheus_rules.yaml", "recording rules to write")
	alertsPath := flag.String("alerts", "prometheus_alerts.yaml", "alerting rules to write")
	flag.Parse()
	if err := run(*specPath, *rulesPath, *alertsPath); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(specPath, rulesPath, alertsPath string) error {
	spec, err := alerts.Load(specPath)
	if err != nil {
		return err
	}
	rules, alertRules := alerts.Generate(spec, filepath.Base(specPath))
	if err := os.WriteFile(rulesPath, rules, 0o644); err != nil {
		return err
	}
	return os.WriteFile(alertsPath, alertRules, 0o644)
}
