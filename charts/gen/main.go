// Command gen writes the kustomize bases of deploy/ from charts/podslo
// (`make manifests`), so that the two cannot drift; the chart tests fail
// while the committed files differ from what it writes.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/podslo/podslo/charts"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run() error {
	helm, err := charts.Helm()
	if err != nil {
		return err
	}
	for _, f := range charts.DeployFiles {
		out, err := charts.RenderDeploy(helm, f)
		if err != nil {
			return fmt.Errorf("render %s: %w", f.Path, err)
		}
		if err := os.WriteFile(filepath.Join(charts.Root(), f.Path), out, 0o644); err != nil {
			return err
		}
	}
	return nil
}
