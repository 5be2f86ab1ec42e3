package alerts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Buckets are the classic bucket bounds, in seconds, of every
// podslo start-up and tear-down histogram (store.Buckets). A
// latency threshold must be one of them: between two bounds the share of
// fast events cannot be read off a classic histogram.
var Buckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}

// ClassLabels are the labels an SLO can be grouped by: the classes podslo
// resolves for every pod.
var ClassLabels = []string{"runtime_class", "storage_class"}

// Spec is slos.yaml: the objectives and what the generated rules need to
// know about the Prometheus and Grafana they run in.
type Spec struct {
	Config Config `json:"config"`
	SLOs   []SLO  `json:"slos"`

	// chart makes the configurable parts template actions (ForChart).
	chart bool
}

// Config holds the mixin settings every rule shares.
type Config struct {
	// ClusterLabel is kept in every aggregation, so that one Prometheus or
	// Thanos can evaluate the rules for many clusters.
	ClusterLabel string `json:"clusterLabel"`
	// Cluster, when set, is the value of ClusterLabel on every alert: for a
	// Prometheus whose series carry no cluster label but whose alerts meet
	// other clusters' in one Alertmanager. It overrides the series' own
	// label, so leave it empty where they carry one.
	Cluster string `json:"cluster,omitempty"`
	// ExporterSelector and AgentSelector are the label matchers, without
	// braces, of the exporter's and the agent's scrape jobs. The agent's
	// targets should carry the node's name as label node (a relabeling of
	// __meta_kubernetes_pod_node_name) for PodsloAgentDownOnNode to name it,
	// and so should per-node exporters' for PodsloExporterInstanceDown.
	ExporterSelector string `json:"exporterSelector"`
	// An empty AgentSelector leaves out the agent's alert, for clusters that
	// run the exporter alone.
	AgentSelector string `json:"agentSelector"`
	// RunbookURL is docs/runbooks.md as served to whoever is paged; each
	// alert links to its section.
	RunbookURL string `json:"runbookURL"`
	// GrafanaURL prefixes the dashboard_url annotations.
	GrafanaURL string `json:"grafanaURL"`
	// SandboxCreationTimeout is refused with its reason: the stuck-sandbox
	// alert reads the exporter's own timeout (the pending gauge's
	// timed_out label), so no copy of the flag can disagree with it.
	SandboxCreationTimeout string `json:"sandboxCreationTimeout,omitempty"`
	// AlertLabels are added to every alert, for an Alertmanager to route
	// on (team: platform). The labels the alerts set themselves or carry
	// from their series (SeriesLabels), and the cluster label, are refused.
	AlertLabels map[string]string `json:"alertLabels,omitempty"`
	// DisabledAlerts are left out, by name.
	DisabledAlerts []string `json:"disabledAlerts,omitempty"`
}

// AlertLabels are the labels the alerts set themselves; the cluster label
// must not be one of them.
var AlertLabels = append([]string{"severity", "long", "short"}, ClassLabels...)

// SeriesLabels are labels some alerts carry from the series they select (a
// target's job and instance, a NetworkPolicy's namespace and name): an
// extra alert label of the same name would overwrite them, and merge
// alerts that must stay apart.
var SeriesLabels = []string{"job", "instance", "namespace", "pod", "node", "container", "service", "endpoint", "networkpolicy", "type", "status", "reason"}

// SLO is one objective. Exactly one of Latency and Success is set.
type SLO struct {
	// Name is snake_case; it names the recording rules.
	Name string `json:"name"`
	// Alert is the name of the burn-rate alert.
	Alert string `json:"alert"`
	// Title names the SLO on dashboards and in alert summaries.
	Title string `json:"title"`
	// Events is a plural noun for what the SLI counts, for alert texts.
	Events  string   `json:"events"`
	Latency *Latency `json:"latency,omitempty"`
	Success *Success `json:"success,omitempty"`
	// Objective is the percentage of good events, e.g. 99.
	Objective float64 `json:"objective"`
	// GroupBy lists the class labels; the SLO holds for each value of each
	// label separately.
	GroupBy []string `json:"groupBy"`
	// Matchers narrow the SLO to the series they match, e.g.
	// runtime_class="runc": an objective that holds for one kind of pod
	// only (a sub-second sandbox for runc, not for a microVM).
	Matchers []string `json:"matchers,omitempty"`
	// Window is the SLO period, e.g. 30d.
	Window string `json:"window"`
	// MinEvents is the number of events an alert's long window must hold
	// before the alert may fire.
	MinEvents int `json:"minEvents"`
	// Dashboard is the UID of the dashboard the alerts link to.
	Dashboard string `json:"dashboard"`
	// Runbook is the alert whose section of the runbooks the burn-rate
	// alert links to; empty, its own. An SLO made from another (the
	// chart's extraSLOs) shares that one's runbook.
	Runbook string `json:"runbook,omitempty"`

	window time.Duration
	// chart makes the SLO's numbers template actions (ForChart), and
	// sentinel stands for its objective in the dashboards' JSON numbers.
	chart    bool
	sentinel float64
	// keys is where the chart keeps the SLO's values: $m.slos.<name>, or
	// $x for the template of the extra SLOs made from this one.
	keys string
}

// Latency is an SLI of a histogram: an event is good when it took at most
// Threshold.
type Latency struct {
	Histogram string `json:"histogram"`
	Threshold string `json:"threshold"`
	// ClassThresholds gives classes of one label a threshold of their own,
	// e.g. {runtime_class: {kata: 20s}}: a microVM's sandbox is good
	// within 20s while every other class keeps Threshold (KEP-3085,
	// stories 2 and 3). One label only, so that every pod has exactly one
	// threshold.
	ClassThresholds map[string]map[string]string `json:"classThresholds,omitempty"`

	threshold       time.Duration
	classThresholds []classThreshold
}

// classThreshold is one class's own threshold, parsed.
type classThreshold struct {
	label, class, threshold string
	seconds                 float64
}

// Success is an SLI of two counters: good events and failed ones.
type Success struct {
	Successes string `json:"successes"`
	Failures  string `json:"failures"`
	// Failure is a past participle for alert texts: "timed out".
	Failure string `json:"failure"`
}

// Load reads and validates a specification.
func Load(path string) (*Spec, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	spec, err := Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return spec, nil
}

// Parse decodes and validates a specification. Unknown fields are errors:
// a misspelt field would otherwise silently keep its zero value.
func Parse(raw []byte) (*Spec, error) {
	js, err := utilyaml.ToJSON(raw)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	var spec Spec
	if err := dec.Decode(&spec); err != nil {
		return nil, err
	}
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	return &spec, nil
}

var (
	sloName   = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)
	alertName = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
	labelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
	// A metric name that must not be a PromQL expression: the generator
	// appends _bucket and _count, and adds matchers.
	metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	// The value of a class label: a RuntimeClass's or StorageClass's name
	// (a DNS subdomain name), or "none". It needs no escaping in PromQL.
	className = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)
)

// Validate checks the specification and fills in the parsed durations. It
// reports every problem at once, each prefixed by where it is.
func (s *Spec) Validate() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	c := &s.Config
	if !labelName.MatchString(c.ClusterLabel) {
		add("config.clusterLabel: %q is not a label name", c.ClusterLabel)
	}
	if slices.Contains(AlertLabels, c.ClusterLabel) {
		add("config.clusterLabel: %q is a label the alerts set themselves", c.ClusterLabel)
	}
	if c.ExporterSelector == "" {
		add("config.exporterSelector: must not be empty")
	}
	for _, sel := range []struct{ field, matchers string }{{"exporterSelector", c.ExporterSelector}, {"agentSelector", c.AgentSelector}} {
		if strings.ContainsAny(sel.matchers, "{}\n") {
			add("config.%s: %q holds a brace or a line break; give the matchers alone, e.g. job=\"podslo-exporter\"", sel.field, sel.matchers)
		}
	}
	if c.RunbookURL == "" {
		add("config.runbookURL: must not be empty")
	}
	if c.GrafanaURL == "" {
		add("config.grafanaURL: must not be empty")
	}
	if c.SandboxCreationTimeout != "" {
		add("config.sandboxCreationTimeout: no longer used, remove it: PodsloSandboxCreationStuck follows the exporter's --sandbox-creation-timeout (podslo_sandbox_creation_pending_pods{timed_out=\"true\"})")
	}

	if len(s.SLOs) == 0 {
		add("slos: none given")
	}
	seen := map[string]bool{}
	for i := range s.SLOs {
		slo := &s.SLOs[i]
		where := fmt.Sprintf("slos[%d] (%s)", i, slo.Name)
		for _, err := range slo.validate() {
			add("%s: %w", where, err)
		}
		for _, name := range []string{slo.Name, slo.Alert} {
			if seen[name] {
				add("%s: %q is used twice", where, name)
			}
			seen[name] = true
		}
	}
	for _, k := range slices.Sorted(maps.Keys(c.AlertLabels)) {
		switch {
		case !labelName.MatchString(k):
			add("config.alertLabels: %q is not a label name", k)
		case slices.Contains(AlertLabels, k) || k == c.ClusterLabel:
			add("config.alertLabels: %q is a label the alerts set themselves", k)
		case slices.Contains(SeriesLabels, k):
			add("config.alertLabels: %q is a label alerts carry from their series", k)
		}
	}
	if len(errs) == 0 && len(c.DisabledAlerts) > 0 {
		// Only a valid spec can name its alerts.
		known := s.alertNames()
		for _, a := range c.DisabledAlerts {
			if !slices.Contains(known, a) {
				add("config.disabledAlerts: %q is no alert; the alerts are %s", a, strings.Join(known, ", "))
			}
		}
	}
	return errors.Join(errs...)
}

// isAlertName says whether name is one of podslo's: CamelCase, starting
// with Podslo.
func isAlertName(name string) bool {
	return alertName.MatchString(name) && strings.HasPrefix(name, "Podslo")
}

// labelMatcher is one PromQL label matcher: a label name, an operator and
// a double-quoted value.
var labelMatcher = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*(=|!=|=~|!~)"([^"\\]|\\.)*"$`)

func (slo *SLO) validate() []error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if !sloName.MatchString(slo.Name) {
		add("name: %q is not snake_case", slo.Name)
	}
	if r := slo.Runbook; r != "" && !isAlertName(r) {
		add("runbook: %q is not an alert's name", r)
	}
	if !isAlertName(slo.Alert) {
		add("alert: %q is not a CamelCase name starting with Podslo", slo.Alert)
	}
	if slo.Title == "" || slo.Events == "" || slo.Dashboard == "" {
		add("title, events and dashboard must all be set")
	}
	switch {
	case (slo.Latency == nil) == (slo.Success == nil):
		add("exactly one of latency and success must be set")
	case slo.Latency != nil:
		errs = append(errs, slo.Latency.validate()...)
	default:
		errs = append(errs, slo.Success.validate()...)
	}
	if !(slo.Objective > 0 && slo.Objective < 100) {
		add("objective: %v is not a percentage strictly between 0 and 100", slo.Objective)
	}
	if len(slo.GroupBy) == 0 {
		add("groupBy: give at least one of %s", strings.Join(ClassLabels, ", "))
	}
	for _, l := range slo.GroupBy {
		if !slices.Contains(ClassLabels, l) {
			add("groupBy: %q is not one of %s", l, strings.Join(ClassLabels, ", "))
		}
	}
	for _, m := range slo.Matchers {
		if !labelMatcher.MatchString(m) {
			add("matchers: %q is not a PromQL label matcher such as runtime_class=\"runc\"", m)
		}
	}
	d, err := parseDuration(slo.Window)
	switch {
	case err != nil:
		add("window: %v", err)
	case d < longestAlertWindow():
		add("window: %s is shorter than the longest alert window, %s", slo.Window, model.Duration(longestAlertWindow()))
	default:
		slo.window = d
	}
	// With only MinEvents events in the long window, one bad event is an
	// error ratio of 1/MinEvents; it must stay below every paging threshold,
	// or one slow pod of a quiet class would wake someone up.
	switch {
	case slo.MinEvents < 1:
		add("minEvents: %d is not positive", slo.MinEvents)
	case slo.window > 0 && slo.Objective > 0 && slo.Objective < 100:
		for _, w := range BurnWindows {
			threshold := w.Factor(slo.window) * (1 - slo.Objective/100)
			if w.Severity == "critical" && 1/float64(slo.MinEvents) > threshold {
				add("minEvents: %d lets one bad event page through the %s/%s alert (1/%d > %.4g); use at least %d",
					slo.MinEvents, model.Duration(w.Long), model.Duration(w.Short), slo.MinEvents, threshold, int(math.Ceil(1/threshold)))
			}
		}
	}
	return errs
}

func (l *Latency) validate() []error {
	var errs []error
	if !metricName.MatchString(l.Histogram) {
		errs = append(errs, fmt.Errorf("latency.histogram: %q is not a metric name", l.Histogram))
	}
	d, err := l.bucketBound(l.Threshold)
	if err != nil {
		return append(errs, fmt.Errorf("latency.threshold: %w", err))
	}
	l.threshold = d
	l.classThresholds = nil
	if len(l.ClassThresholds) > 1 {
		errs = append(errs, fmt.Errorf("latency.classThresholds: %s: give the classes of one label only, so that every pod has one threshold",
			strings.Join(slices.Sorted(maps.Keys(l.ClassThresholds)), ", ")))
	}
	for _, label := range slices.Sorted(maps.Keys(l.ClassThresholds)) {
		if !slices.Contains(ClassLabels, label) {
			errs = append(errs, fmt.Errorf("latency.classThresholds: %q is not one of %s", label, strings.Join(ClassLabels, ", ")))
			continue
		}
		classes := l.ClassThresholds[label]
		if len(classes) == 0 {
			errs = append(errs, fmt.Errorf("latency.classThresholds.%s: give at least one class and its threshold", label))
		}
		for _, class := range slices.Sorted(maps.Keys(classes)) {
			where := "latency.classThresholds." + label + "." + class
			if !className.MatchString(class) {
				errs = append(errs, fmt.Errorf("%s: %q is not the name of a class (a DNS subdomain name, or none)", where, class))
				continue
			}
			d, err := l.bucketBound(classes[class])
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
				continue
			}
			l.classThresholds = append(l.classThresholds, classThreshold{label: label, class: class, threshold: classes[class], seconds: d.Seconds()})
		}
	}
	return errs
}

// bucketBound parses a threshold, which must be a bucket bound of the
// histogram: a classic histogram cannot tell what happened between two.
func (l *Latency) bucketBound(threshold string) (time.Duration, error) {
	d, err := parseDuration(threshold)
	if err != nil {
		return 0, err
	}
	if !slices.Contains(Buckets, d.Seconds()) {
		bounds := make([]string, len(Buckets))
		for i, b := range Buckets {
			bounds[i] = strconv.FormatFloat(b, 'f', -1, 64)
		}
		return 0, fmt.Errorf("%s is not a bucket bound of %s; the bounds, in seconds, are %s", threshold, l.Histogram, strings.Join(bounds, ", "))
	}
	return d, nil
}

func (s *Success) validate() []error {
	var errs []error
	if !metricName.MatchString(s.Successes) {
		errs = append(errs, fmt.Errorf("success.successes: %q is not a metric name", s.Successes))
	}
	if !metricName.MatchString(s.Failures) {
		errs = append(errs, fmt.Errorf("success.failures: %q is not a metric name", s.Failures))
	}
	if s.Failure == "" {
		errs = append(errs, fmt.Errorf("success.failure: must not be empty"))
	}
	return errs
}

func parseDuration(s string) (time.Duration, error) {
	d, err := model.ParseDuration(s)
	if err != nil {
		return 0, err
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q is not positive", s)
	}
	return time.Duration(d), nil
}
