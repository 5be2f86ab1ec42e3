// Command gen writes the Prometheus rule files of an SLO specification,
// and with -chart the Helm chart's rule templates and monitoring values.
// Operators who need other objectives, selectors or URLs without the chart
// run it on a copy of slos.yaml.
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
	chart := flag.String("chart", "", "Helm chart whose templates/_monitoring.tpl, templates/prometheusrule-*.yaml and the monitoring section of values.yaml to write; empty: none")
	flag.Parse()
	if err := run(*specPath, *rulesPath, *alertsPath, *chart); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(specPath, rulesPath, alertsPath, chart string) error {
	spec, err := alerts.Load(specPath)
	if err != nil {
		return err
	}
	source := filepath.Base(specPath)
	rules, alertRules := alerts.Generate(spec, source)
	if err := os.WriteFile(rulesPath, rules, 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(alertsPath, alertRules, 0o644); err != nil {
		return err
	}
	if chart == "" {
		return nil
	}
	files, err := alerts.ChartFiles(spec, source, chart)
	if err != nil {
		return err
	}
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
