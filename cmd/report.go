package cmd

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/podslo/podslo/alerts"
	"github.com/podslo/podslo/internal/slostatus"
)

// BreachedExitCode is what `podslo report` exits with when an SLO has
// spent its error budget, apart from 1, which says the report failed.
const BreachedExitCode = 2

// ExitError carries a process exit code other than 1.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

// ExitCode is the process exit code for the error a command returned.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	if ee := (*ExitError)(nil); errors.As(err, &ee) {
		return ee.Code
	}
	return 1
}

// reportOptions are `podslo report`'s settings.
type reportOptions struct {
	// URLs are the exporters' base URLs; their reports are added up.
	URLs []string
	// PrometheusURL is a Prometheus that runs podslo's rules, read instead
	// of exporters; SLOsFile and SLOsValues say which SLOs its rules were
	// generated for.
	PrometheusURL, SLOsFile, SLOsValues string
	// Output is table, json or markdown.
	Output string
	// Timeout bounds each exporter's answer.
	Timeout time.Duration
	// CAFile verifies an exporter served over TLS; InsecureSkipVerify does
	// not verify it at all.
	CAFile             string
	InsecureSkipVerify bool
	// Username and PasswordFile are an exporter's basic auth
	// (--web.config.file).
	Username, PasswordFile string
}

func (o *reportOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringArrayVar(&o.URLs, "url", nil, "Base URL of an exporter, e.g. http://127.0.0.1:8080 (repeatable: the reports of shards or per-node exporters are added up)")
	fs.StringVar(&o.PrometheusURL, "prometheus-url", "", "Read the SLOs' recording rules off this Prometheus (or Thanos) instead of exporters: every cluster it holds, by the cluster label")
	fs.StringVar(&o.SLOsFile, "slos-file", "", "With --prometheus-url: the slos.yaml its rules were generated from (default: the one this release ships)")
	fs.StringVar(&o.SLOsValues, "slos-values", "", "With --prometheus-url: the chart values its rules were rendered with (monitoring.slos, monitoring.extraSLOs)")
	fs.StringVarP(&o.Output, "output", "o", "table", "Output format: table, json or markdown")
	fs.DurationVar(&o.Timeout, "timeout", 30*time.Second, "How long each exporter may take to answer")
	fs.StringVar(&o.CAFile, "ca-file", "", "CA certificates (PEM) that verify exporters served over TLS")
	fs.BoolVar(&o.InsecureSkipVerify, "insecure-skip-tls-verify", false, "Do not verify the exporters' TLS certificates")
	fs.StringVar(&o.Username, "username", "", "Basic auth user name for the exporters")
	fs.StringVar(&o.PasswordFile, "password-file", "", "File holding the basic auth password for the exporters")
}

func newReportCommand() *cobra.Command {
	var o reportOptions
	c := &cobra.Command{
		Use:   "report",
		Short: "Print whether the SLOs are met, per class, from running exporters",
		Long: `Reads /api/v1/slos from each exporter given with --url, adds their counts
up (the shards or per-node replicas of one cluster), and prints every SLO per
class, worst error budget first: objective, attainment, events, budget left,
burn rates, the alerts that would fire and the latency. It exits with 2 when
an SLO has spent its error budget, so that a script can tell.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd.Context(), cmd.OutOrStdout())
		},
	}
	o.addFlags(c.Flags())
	return c
}

func (o *reportOptions) run(ctx context.Context, out io.Writer) error {
	write, ok := map[string]func(io.Writer, *slostatus.Report, []slostatus.Status) error{
		"table": slostatus.WriteTable, "json": slostatus.WriteJSON, "markdown": slostatus.WriteMarkdown,
	}[o.Output]
	if !ok {
		return fmt.Errorf("--output %q: want table, json or markdown", o.Output)
	}
	switch {
	case len(o.URLs) > 0 && o.PrometheusURL != "":
		return errors.New("--url and --prometheus-url: give one or the other")
	case len(o.URLs) == 0 && o.PrometheusURL == "":
		return errors.New("give the exporters' addresses with --url (e.g. after kubectl port-forward svc/podslo-exporter 8080), or a Prometheus with --prometheus-url")
	case o.PrometheusURL == "" && (o.SLOsFile != "" || o.SLOsValues != ""):
		return errors.New("--slos-file and --slos-values go with --prometheus-url: an exporter says which SLOs it evaluates")
	}
	client, err := o.client()
	if err != nil {
		return err
	}
	var merged slostatus.Report
	if o.PrometheusURL != "" {
		if merged, err = o.fromPrometheus(ctx, client); err != nil {
			return err
		}
	} else {
		reports := make([]slostatus.Report, 0, len(o.URLs))
		for _, u := range o.URLs {
			r, err := o.fetch(ctx, client, u)
			if err != nil {
				return err
			}
			reports = append(reports, r)
		}
		if merged, err = slostatus.Merge(reports...); err != nil {
			return err
		}
	}
	statuses := slostatus.Evaluate(&merged)
	if err := write(out, &merged, statuses); err != nil {
		return err
	}
	if slostatus.Breached(statuses) {
		return &ExitError{Code: BreachedExitCode, Err: errors.New(strings.TrimSuffix(slostatus.Summary(statuses), "."))}
	}
	return nil
}

// fromPrometheus reads the recording rules of --slos-file and
// --slos-values off --prometheus-url.
func (o *reportOptions) fromPrometheus(ctx context.Context, client *http.Client) (slostatus.Report, error) {
	u, err := url.Parse(o.PrometheusURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return slostatus.Report{}, fmt.Errorf("--prometheus-url %q: want an http or https URL such as http://127.0.0.1:9090", o.PrometheusURL)
	}
	spec, err := alerts.LoadFlags(o.SLOsFile, o.SLOsValues)
	if err != nil {
		return slostatus.Report{}, err
	}
	return slostatus.FromPrometheus(ctx, client, o.PrometheusURL, spec, time.Now())
}

func (o *reportOptions) client() (*http.Client, error) {
	tlsConfig := &tls.Config{InsecureSkipVerify: o.InsecureSkipVerify} //nolint:gosec // only when asked for
	if o.CAFile != "" {
		pem, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file %q: no PEM certificate in it", o.CAFile)
		}
		tlsConfig.RootCAs = pool
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = tlsConfig
	return &http.Client{Transport: transport, Timeout: o.Timeout}, nil
}

// fetch reads one exporter's report. The URL may carry a path prefix (an
// API server's service proxy, a reverse proxy): /api/v1/slos is appended.
func (o *reportOptions) fetch(ctx context.Context, client *http.Client, base string) (slostatus.Report, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return slostatus.Report{}, fmt.Errorf("--url %q: want an http or https URL such as http://127.0.0.1:8080", base)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/api/v1/slos"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return slostatus.Report{}, fmt.Errorf("--url %q: %w", base, err)
	}
	if o.Username != "" || o.PasswordFile != "" {
		password, err := os.ReadFile(o.PasswordFile)
		if err != nil {
			return slostatus.Report{}, fmt.Errorf("--password-file: %w", err)
		}
		req.SetBasicAuth(o.Username, strings.TrimRight(string(password), "\r\n"))
	}
	resp, err := client.Do(req)
	if err != nil {
		return slostatus.Report{}, fmt.Errorf("read the SLOs of %s: %w", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return slostatus.Report{}, fmt.Errorf("read the SLOs of %s: %s: %s", base, resp.Status, strings.TrimSpace(string(body)))
	}
	var r slostatus.Report
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return slostatus.Report{}, fmt.Errorf("read the SLOs of %s: %w", base, err)
	}
	for i := range r.Sources {
		r.Sources[i].URL = base
	}
	return r, nil
}
