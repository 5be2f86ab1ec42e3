package alerts

import (
	"bytes"
	"cmp"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// The SLOs for other tools: Sloth, which generates Prometheus rules of its
// own from them, and OpenSLO, the vendor-neutral specification. Each podslo
// SLO holds for each value of each of its groupBy labels on its own, so it
// becomes one SLO per groupBy label, named <name>_by_<label>, whose
// queries keep the cluster label and that class label (sum by): a tool
// that keeps the labels of the queries evaluates it per cluster and class,
// as podslo's rules do. The queries are those of the recording rules
// (rules.go), so that both compute the same SLI.

// ExportFormats are the formats Export writes.
var ExportFormats = []string{"sloth", "openslo"}

// Export writes the SLOs in format, one of ExportFormats, for service.
func (s *Spec) Export(format, service string) ([]byte, error) {
	switch format {
	case "sloth":
		return s.Sloth(service)
	case "openslo":
		return s.OpenSLO(service)
	}
	return nil, fmt.Errorf("format %q: want one of %s", format, strings.Join(ExportFormats, ", "))
}

// exported is one SLO of an export: a podslo SLO for one class label.
type exported struct {
	slo   *SLO
	class string
}

func (e exported) name() string { return e.slo.Name + "_by_" + e.class }

func (s *Spec) exported() ([]exported, error) {
	if s.chart {
		return nil, fmt.Errorf("a chart's spec has template holes, not values")
	}
	// The parsed windows and thresholds the queries read.
	if err := s.Validate(); err != nil {
		return nil, err
	}
	var out []exported
	for i := range s.SLOs {
		for _, class := range s.SLOs[i].GroupBy {
			out = append(out, exported{&s.SLOs[i], class})
		}
	}
	return out, nil
}

// A Sloth name: its SLO names, IDs and services (Sloth's
// conventions.NameRegexp).
var slothName = regexp.MustCompile(`^[A-Za-z0-9][-A-Za-z0-9_.]*[A-Za-z0-9]$`)

// slothVersion is the plain form of a Sloth specification, the one `sloth
// generate` reads from a file (Sloth's pkg/prometheus/api/v1).
const slothVersion = "prometheus/v1"

// slothDisableOptimized is the plugin configuration that makes Sloth
// compute the SLO period's error ratio as podslo does. By default Sloth's
// core SLI rules plugin records it as the average of the 5m ratios over the
// period: every 5 minutes weigh the same, however many events they hold,
// and 5 minutes without events (0/0, NaN) make the period's ratio NaN for
// a whole period after them. Without the optimization the period's ratio
// is that of the period's bad and total events, podslo's.
var slothDisableOptimized = slothPlugin{ID: "sloth.dev/core/sli_rules/v1", Config: map[string]bool{"disableOptimized": true}}

// The Sloth specification, as Sloth's pkg/prometheus/api/v1 types it. The
// tests decode the output strictly into Sloth's own types.
type slothSpec struct {
	Version    string       `yaml:"version"`
	Service    string       `yaml:"service"`
	SLOPlugins slothPlugins `yaml:"slo_plugins"`
	SLOs       []slothSLO   `yaml:"slos"`
}

type slothPlugins struct {
	Chain []slothPlugin `yaml:"chain"`
}

type slothPlugin struct {
	ID     string          `yaml:"id"`
	Config map[string]bool `yaml:"config,omitempty"`
}

type slothSLO struct {
	Name        string            `yaml:"name"`
	Description string            `yaml:"description"`
	Objective   float64           `yaml:"objective"`
	Labels      map[string]string `yaml:"labels"`
	SLI         struct {
		Events struct {
			ErrorQuery string `yaml:"error_query"`
			TotalQuery string `yaml:"total_query"`
		} `yaml:"events"`
	} `yaml:"sli"`
	Alerting slothAlerting `yaml:"alerting"`
}

type slothAlerting struct {
	Name        string            `yaml:"name"`
	Labels      map[string]string `yaml:"labels,omitempty"`
	Annotations map[string]string `yaml:"annotations"`
	PageAlert   slothAlert        `yaml:"page_alert"`
	TicketAlert slothAlert        `yaml:"ticket_alert"`
}

type slothAlert struct {
	Disable     bool              `yaml:"disable,omitempty"`
	Labels      map[string]string `yaml:"labels,omitempty"`
	Annotations map[string]string `yaml:"annotations,omitempty"`
}

// Sloth writes the SLOs as a Sloth specification of service, in the plain
// prometheus/v1 form that `sloth generate` turns into a Prometheus rule
// file. Sloth's library generates from it and from the
// PrometheusServiceLevel resource of its Kubernetes controller alike; the
// plain form needs no Kubernetes name and namespace, which podslo cannot
// know, and its rules are a file like podslo's own, which promtool
// evaluates beside them. The resource has the same fields under spec, in
// camelCase.
//
// Sloth's SLO period is not part of a specification but of its run
// (--default-slo-period), so every SLO must have the same window. Sloth's
// page alert is podslo's two critical burn-rate alerts in one, its ticket
// alert the two warnings, with the same windows and factors; they have no
// minEvents guard and no for, which Sloth has no field for.
func (s *Spec) Sloth(service string) ([]byte, error) {
	if !slothName.MatchString(service) {
		return nil, fmt.Errorf("service %q is not a Sloth name: letters, digits, '.', '_' and '-', starting and ending with a letter or digit", service)
	}
	slos, err := s.exported()
	if err != nil {
		return nil, err
	}
	window, err := sameWindow(slos)
	if err != nil {
		return nil, fmt.Errorf("sloth: the SLO period is one for all SLOs of a run (sloth generate --default-slo-period): %w", err)
	}
	const tw = "{{.window}}"
	out := slothSpec{Version: slothVersion, Service: service, SLOPlugins: slothPlugins{Chain: []slothPlugin{slothDisableOptimized}}}
	for _, e := range slos {
		slo, class, cluster := e.slo, e.class, s.Config.ClusterLabel
		o := slothSLO{
			Name: e.name(),
			Description: fmt.Sprintf("%s per %s: %s%% of %s, per %s and %s, over %s.",
				slo.Title, class, slo.ObjectiveText(), goodPhrase(slo), class, cluster, modelDuration(window)),
			Objective: slo.Objective,
			// The name of podslo's SLO, as on its slo:podslo_* series.
			Labels: map[string]string{"slo": slo.Name},
		}
		if slo.Latency != nil {
			o.SLI.Events.ErrorQuery = fmt.Sprintf("%s\n-\n%s", s.latencyEvents(slo, class, tw), s.latencyGood(slo, class, tw))
			o.SLI.Events.TotalQuery = s.latencyEvents(slo, class, tw)
		} else {
			// As podslo's ratio, 0 for a class with successes but no
			// failures series yet; but where podslo records 0 for one
			// whose successes did not increase either, Sloth's 0/0 is NaN.
			o.SLI.Events.ErrorQuery = fmt.Sprintf("%s\nor\n0 * %s", s.failures(slo, class, tw), s.successes(slo, class, tw))
			o.SLI.Events.TotalQuery = s.eventsOver(slo, class, tw)
		}
		o.Alerting = s.slothAlerting(slo, class, window)
		out.SLOs = append(out.SLOs, o)
	}
	header := fmt.Sprintf(`Sloth SLOs of podslo, written by podslo slo export --format sloth: one per
SLO of its slos.yaml and class label, evaluated per cluster and class. For
Sloth's rules, run
  sloth generate -i THIS_FILE --default-slo-period=%s
%s
The SLI plugin's disableOptimized makes Sloth's period error ratio that of
the period's events, as podslo's, instead of an average of 5m ratios.
Sloth's page alert is podslo's two critical burn-rate alerts in one, its
ticket alert the two warnings, without podslo's minEvents and for.`, modelDuration(window), slothWindowsNote(window))
	return yamlDocs(header, out)
}

// slothWindowsNote says where the burn-rate windows of a period come from:
// Sloth's catalog holds Google's for 28d and 30d, the windows podslo's
// alerts use.
func slothWindowsNote(window time.Duration) string {
	if window == 28*24*time.Hour || window == 30*24*time.Hour {
		return "Sloth's windows for the period are podslo's burn-rate windows."
	}
	return "Sloth knows burn-rate windows for 28d and 30d only: give it podslo's\n(BurnWindows) with --slo-period-windows-path."
}

func (s *Spec) slothAlerting(slo *SLO, class string, window time.Duration) slothAlerting {
	cluster := s.Config.ClusterLabel
	labels := maps.Clone(s.Config.AlertLabels)
	if c := s.Config.Cluster; c != "" {
		if labels == nil {
			labels = map[string]string{}
		}
		labels[cluster] = c
	}
	var bad string
	if slo.Latency != nil {
		bad = "were slower than " + slo.ThresholdText()
	} else {
		bad = slo.Success.Failure
	}
	disabled := slices.Contains(s.Config.DisabledAlerts, slo.Alert)
	alert := func(severity string) slothAlert {
		var burns []string
		for _, w := range BurnWindows {
			if w.Severity == severity {
				budget := ""
				if len(burns) == 0 {
					budget = " its " + slo.ErrorBudgetPercent() + "%"
				}
				burns = append(burns, fmt.Sprintf("%s times%s over the last %s and %s", formatFloat(w.Factor(window)), budget, modelDuration(w.Long), modelDuration(w.Short)))
			}
		}
		return slothAlert{
			Disable: disabled,
			Labels:  map[string]string{"severity": severity},
			Annotations: map[string]string{
				"description": fmt.Sprintf("Of the %s of %s {{ $labels.%s }} in %s {{ $labels.%s }}, more than the objective allows %s: more than %s. The objective is %s%% per %s.",
					slo.Events, class, class, cluster, cluster, bad, strings.Join(burns, ", or more than "), slo.ObjectiveText(), modelDuration(window)),
			},
		}
	}
	return slothAlerting{
		Name:   slo.Alert,
		Labels: labels,
		Annotations: map[string]string{
			"summary":       fmt.Sprintf("%s SLO of %s {{ $labels.%s }} burns its error budget too fast.", slo.Title, class, class),
			"runbook_url":   s.runbook(cmp.Or(slo.Runbook, slo.Alert)),
			"dashboard_url": s.dashboard(slo.Dashboard, true, class),
		},
		// Sloth's page and ticket are podslo's critical and warning
		// burn-rate alerts.
		PageAlert:   alert("critical"),
		TicketAlert: alert("warning"),
	}
}

func sameWindow(slos []exported) (time.Duration, error) {
	window := slos[0].slo.window
	for _, e := range slos[1:] {
		if e.slo.window != window {
			return 0, fmt.Errorf("the windows differ: %s is %s, %s is %s; export the SLOs of each window from a spec of their own",
				slos[0].slo.Name, slos[0].slo.Window, e.slo.Name, e.slo.Window)
		}
	}
	return window, nil
}

// OpenSLO v1 (github.com/OpenSLO/OpenSLO, README.md, "Specification"): the
// sections named below are that document's.

// openSLOName is a name every implementation must accept ("Notes (General
// Schema)", metadata.name: RFC 1123).
var openSLOName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)

// openSLOObject is an object of "General Schema".
type openSLOObject struct {
	APIVersion string          `yaml:"apiVersion"`
	Kind       string          `yaml:"kind"`
	Metadata   openSLOMetadata `yaml:"metadata"`
	Spec       any             `yaml:"spec"`
}

type openSLOMetadata struct {
	Name        string `yaml:"name"`
	DisplayName string `yaml:"displayName,omitempty"`
	// "Notes (General Schema)": implementation metadata; keys with a DNS
	// prefix, openslo.com/ being reserved.
	Annotations map[string]string `yaml:"annotations,omitempty"`
}

// openSLOService is the spec of "Service".
type openSLOService struct {
	Description string `yaml:"description"`
}

// openSLOSLO is the spec of "SLO", with its indicator inline ("SLI").
type openSLOSLO struct {
	Description string `yaml:"description"`
	Service     string `yaml:"service"`
	Indicator   struct {
		Metadata openSLOMetadata `yaml:"metadata"`
		Spec     struct {
			RatioMetric openSLORatio `yaml:"ratioMetric"`
		} `yaml:"spec"`
	} `yaml:"indicator"`
	TimeWindow      []openSLOTimeWindow `yaml:"timeWindow"`
	BudgetingMethod string              `yaml:"budgetingMethod"`
	Objectives      []openSLOObjective  `yaml:"objectives"`
}

// openSLORatio is "Ratio Metric": good or bad, and total.
type openSLORatio struct {
	Counter bool           `yaml:"counter"`
	Good    *openSLOMetric `yaml:"good,omitempty"`
	Bad     *openSLOMetric `yaml:"bad,omitempty"`
	Total   *openSLOMetric `yaml:"total"`
}

type openSLOMetric struct {
	MetricSource struct {
		Type string `yaml:"type"`
		Spec struct {
			Query string `yaml:"query"`
		} `yaml:"spec"`
	} `yaml:"metricSource"`
}

type openSLOTimeWindow struct {
	Duration  string `yaml:"duration"`
	IsRolling bool   `yaml:"isRolling"`
}

// openSLOObjective is one of "Objectives"; target is the objective as a
// ratio in [0, 1).
type openSLOObjective struct {
	DisplayName string  `yaml:"displayName"`
	Target      float64 `yaml:"target"`
}

func prometheusQuery(query string) *openSLOMetric {
	var m openSLOMetric
	m.MetricSource.Type = "Prometheus"
	m.MetricSource.Spec.Query = query
	return &m
}

// OpenSLO writes the SLOs as OpenSLO v1 objects: a Service named service,
// and an SLO of that service per podslo SLO and class label, each with its
// indicator inline.
//
// The indicator is a ratioMetric of counters (counter: true): good and
// total events for a latency SLO, bad and total for a success SLO, each a
// PromQL query of the counters' values summed by cluster and class label,
// whose increase over the window the tool computes. Summing counters before
// taking their increase would misread a counter reset; podslo's do not
// reset, as the exporter keeps its counts across restarts in its state
// directory. The time window is rolling, the budgeting method Occurrences
// ("Notes (SLO)": the ratio of good events to all over the window), as
// podslo's error ratio over its window. Alert policies are left out: an
// "AlertCondition" has one lookback window, and podslo's burn-rate alerts
// need a long and a short one.
func (s *Spec) OpenSLO(service string) ([]byte, error) {
	if !openSLOName.MatchString(service) {
		return nil, fmt.Errorf("service %q is not an OpenSLO name: up to 63 lower-case letters, digits and '-', starting and ending with a letter or digit", service)
	}
	slos, err := s.exported()
	if err != nil {
		return nil, err
	}
	docs := []any{openSLOObject{
		APIVersion: "openslo/v1",
		Kind:       "Service",
		Metadata:   openSLOMetadata{Name: service, DisplayName: service},
		Spec:       openSLOService{Description: "Kubernetes pod start-up and tear-down, per cluster and class, as podslo measures them."},
	}}
	for _, e := range slos {
		slo, class, cluster := e.slo, e.class, s.Config.ClusterLabel
		name := strings.ReplaceAll(e.name(), "_", "-")
		if !openSLOName.MatchString(name) {
			return nil, fmt.Errorf("slo %s: %q is not an OpenSLO name: up to 63 lower-case letters, digits and '-'", slo.Name, name)
		}
		var spec openSLOSLO
		spec.Description = fmt.Sprintf("%s%% of %s, per %s and %s.", slo.ObjectiveText(), goodPhrase(slo), class, cluster)
		spec.Service = service
		spec.Indicator.Metadata = openSLOMetadata{Name: name, DisplayName: slo.Title + " per " + class}
		by := s.by(class)
		sel := s.Selector(slo.Matchers...)
		ratio := &spec.Indicator.Spec.RatioMetric
		ratio.Counter = true
		if l := slo.Latency; l != nil {
			var good []string
			for _, g := range slo.goodMatchers() {
				good = append(good, l.Histogram+"_bucket"+s.Selector(append(slices.Clone(slo.Matchers), g)...))
			}
			ratio.Good = prometheusQuery(fmt.Sprintf("%s (%s)", by, strings.Join(good, " or ")))
			ratio.Total = prometheusQuery(fmt.Sprintf("%s (%s_count%s)", by, l.Histogram, sel))
		} else {
			ok := fmt.Sprintf("%s (%s%s)", by, slo.Success.Successes, sel)
			failed := fmt.Sprintf("%s (%s%s)", by, slo.Success.Failures, sel)
			// As the recording rules: either counter may be missing for a
			// class (rules.go, errorRatio).
			ratio.Bad = prometheusQuery(fmt.Sprintf("%s\nor\n0 * %s", failed, ok))
			ratio.Total = prometheusQuery(fmt.Sprintf("(%s + %s)\nor\n%s\nor\n%s", ok, failed, ok, failed))
		}
		spec.TimeWindow = []openSLOTimeWindow{{Duration: durationShorthand(slo.window), IsRolling: true}}
		spec.BudgetingMethod = "Occurrences"
		spec.Objectives = []openSLOObjective{{DisplayName: goodPhrase(slo), Target: quo100(slo.Objective)}}
		docs = append(docs, openSLOObject{
			APIVersion: "openslo/v1",
			Kind:       "SLO",
			Metadata: openSLOMetadata{
				Name:        name,
				DisplayName: slo.Title + " per " + class,
				Annotations: map[string]string{
					"podslo.io/slo":      slo.Name,
					"podslo.io/group-by": class,
					"podslo.io/alert":    slo.Alert,
				},
			},
			Spec: spec,
		})
	}
	header := `OpenSLO v1 SLOs of podslo, written by podslo slo export --format openslo:
one per SLO of its slos.yaml and class label. Each query keeps the
cluster and class labels (sum by): one SLI per cluster and class.`
	return yamlDocs(header, docs...)
}

// durationShorthand is d as an OpenSLO duration ("duration-shorthand"): a
// whole number of days, hours or minutes.
func durationShorthand(d time.Duration) string {
	switch day := 24 * time.Hour; {
	case d%day == 0:
		return fmt.Sprintf("%dd", d/day)
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	}
	return fmt.Sprintf("%dm", d/time.Minute)
}

// yamlDocs writes the documents under a comment header.
func yamlDocs(header string, docs ...any) ([]byte, error) {
	var b bytes.Buffer
	for _, line := range strings.Split(header, "\n") {
		b.WriteString(strings.TrimRight("# "+line, " ") + "\n")
	}
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	for _, d := range docs {
		if err := enc.Encode(d); err != nil {
			return nil, err
		}
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
