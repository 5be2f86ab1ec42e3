package demo

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// prometheusConfig scrapes the exporter and the agents under the job names
// podslo's rules and dashboards select (alerts/slos.yaml), every 5 s, and
// evaluates the rules as often, so that a demo shows its burn rates within
// minutes.
const prometheusConfig = `global:
  scrape_interval: 5s
  evaluation_interval: 5s
rule_files:
  - %q
  - %q
scrape_configs:
  - job_name: podslo-exporter
    static_configs:
      - targets: [%q]
  - job_name: podslo-agent
    static_configs:
      - targets: [%s]
`

type prometheus struct {
	cmd  *exec.Cmd
	done chan error
	logs bytes.Buffer
}

// startPrometheus runs Prometheus on the demo's targets until stop.
func (d *Demo) startPrometheus(ctx context.Context, dir string, agents []string) (*prometheus, error) {
	quoted := make([]string, len(agents))
	for i, a := range agents {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	rules, err := filepath.Abs(filepath.Join(d.opts.SourceDir, "alerts"))
	if err != nil {
		return nil, fmt.Errorf("find the alert rules: %w", err)
	}
	cfg := fmt.Sprintf(prometheusConfig, filepath.Join(rules, "prometheus_rules.yaml"), filepath.Join(rules, "prometheus_alerts.yaml"),
		d.opts.ListenAddress, strings.Join(quoted, ", "))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create Prometheus' directory: %w", err)
	}
	path := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return nil, fmt.Errorf("write the Prometheus config: %w", err)
	}
	p := &prometheus{done: make(chan error, 1)}
	p.cmd = exec.Command(d.opts.PrometheusBinary, "--config.file="+path, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+d.opts.PrometheusListenAddress)
	p.cmd.Stdout, p.cmd.Stderr = &p.logs, &p.logs
	dieWithParent(p.cmd)
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start Prometheus (%s; Debian: apt-get install prometheus): %w", d.opts.PrometheusBinary, err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	url := "http://" + d.opts.PrometheusListenAddress + "/-/ready"
	err = poll(ctx, time.Minute, func() (bool, error) {
		select {
		case err := <-p.done:
			p.done <- err
			return false, fmt.Errorf("prometheus exited: %v\n%s", err, p.logs.String())
		default:
		}
		resp, err := http.Get(url)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("wait for Prometheus: %w", err)
	}
	return p, nil
}

// stop asks Prometheus to shut down and kills it after 10 s.
func (p *prometheus) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}
