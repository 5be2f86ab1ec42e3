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

	"go.yaml.in/yaml/v2"
)

// prometheusConfig scrapes the exporter and the agents under the job names
// podslo's rules and dashboards select (alerts/slos.yaml), every 5 s, and
// evaluates every rule as often (everyEvaluation), so that a demo shows its
// burn rates within minutes.
const prometheusConfig = `global:
  scrape_interval: 5s
  evaluation_interval: 5s
%srule_files:
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

// nativeHistograms are the global settings of a Prometheus 3 that scrapes
// native histograms and keeps the classic ones beside them, which podslo's
// rules and dashboards read.
const nativeHistograms = `  scrape_native_histograms: true
  always_scrape_classic_histograms: true
`

type prometheus struct {
	cmd    *exec.Cmd
	done   chan error
	logs   bytes.Buffer
	config string
}

// startPrometheus runs Prometheus on the demo's targets until stop.
func startPrometheus(ctx context.Context, o *Options, dir string, agents []string) (*prometheus, error) {
	quoted := make([]string, len(agents))
	for i, a := range agents {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	rules, err := filepath.Abs(filepath.Join(o.SourceDir, "alerts"))
	if err != nil {
		return nil, fmt.Errorf("find the alert rules: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create Prometheus' directory: %w", err)
	}
	files := make([]string, 0, 2)
	for _, name := range []string{"prometheus_rules.yaml", "prometheus_alerts.yaml"} {
		dst := filepath.Join(dir, name)
		if err := everyEvaluation(filepath.Join(rules, name), dst); err != nil {
			return nil, err
		}
		files = append(files, dst)
	}
	native := ""
	if o.PrometheusNativeHistograms {
		native = nativeHistograms
	}
	cfg := fmt.Sprintf(prometheusConfig, native, files[0], files[1], o.ListenAddress, strings.Join(quoted, ", "))
	path := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		return nil, fmt.Errorf("write the Prometheus config: %w", err)
	}
	p := &prometheus{done: make(chan error, 1), config: path}
	p.cmd = exec.Command(o.PrometheusBinary, "--config.file="+path, "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+o.PrometheusListenAddress)
	p.cmd.Stdout, p.cmd.Stderr = &p.logs, &p.logs
	dieWithParent(p.cmd)
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start Prometheus (%s; make promstackbin builds it): %w", o.PrometheusBinary, err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	url := "http://" + o.PrometheusListenAddress + "/-/ready"
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

// everyEvaluation copies the rule file src to dst without the groups' own
// intervals. The 30-day ratios are evaluated every 5 minutes, at a phase
// set by the wall clock: a demo of a few minutes would show them only if an
// evaluation happened to fall after its first scrapes. Evaluated at the
// demo's 5 s instead, they show within seconds, and cost little on a
// demo's few series.
func everyEvaluation(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("read the rules: %w", err)
	}
	var f struct {
		Groups []yaml.MapSlice `yaml:"groups"`
	}
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return fmt.Errorf("parse the rules %s: %w", src, err)
	}
	for i, g := range f.Groups {
		kept := g[:0]
		for _, item := range g {
			if item.Key != "interval" {
				kept = append(kept, item)
			}
		}
		f.Groups[i] = kept
	}
	out, err := yaml.Marshal(f)
	if err != nil {
		return fmt.Errorf("write the rules %s: %w", src, err)
	}
	if err := os.WriteFile(dst, out, 0o644); err != nil {
		return fmt.Errorf("write the rules: %w", err)
	}
	return nil
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
