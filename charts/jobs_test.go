package charts

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// scrapeJob is the job label Prometheus gives the targets of a
// ServiceMonitor or PodMonitor: the operator's default (the Service's name,
// or its label named by jobLabel, for a ServiceMonitor; <namespace>/<name>
// for a PodMonitor), then the endpoint's relabelings that write job.
func scrapeJob(t *testing.T, objs objects, monitor *unstructured.Unstructured) string {
	t.Helper()
	field := "podMetricsEndpoints"
	job := monitor.GetNamespace() + "/" + monitor.GetName()
	if monitor.GetKind() == "ServiceMonitor" {
		field = "endpoints"
		// The Service the monitor selects, among the rendered ones.
		sel, _, _ := unstructured.NestedStringMap(monitor.Object, "spec", "selector", "matchLabels")
		var svc *unstructured.Unstructured
		for _, o := range objs {
			if o.GetKind() == "Service" && matches(o.GetLabels(), sel) {
				require.Nil(t, svc, "the ServiceMonitor selects two Services")
				svc = o
			}
		}
		require.NotNil(t, svc, "the ServiceMonitor selects no rendered Service")
		job = svc.GetName()
		if label, _, _ := unstructured.NestedString(monitor.Object, "spec", "jobLabel"); label != "" && svc.GetLabels()[label] != "" {
			job = svc.GetLabels()[label]
		}
	}
	relabelings, _, err := unstructured.NestedSlice(endpoint(t, monitor, field), "relabelings")
	require.NoError(t, err)
	for _, r := range relabelings {
		r := r.(map[string]any)
		if r["targetLabel"] != "job" {
			continue
		}
		// Only the form the chart uses is understood; anything else must
		// fail here rather than be guessed at.
		require.Contains(t, []any{nil, "replace"}, r["action"], "relabeling %v", r)
		require.Nil(t, r["sourceLabels"], "relabeling %v", r)
		job = r["replacement"].(string)
	}
	return job
}

func matches(labels, selector map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return len(selector) > 0
}

var jobMatcher = regexp.MustCompile(`\bjob\s*(=~?|!=|!~)\s*"([^"]*)"`)

// ruleJobs returns the job matchers of every rule expression in a rule
// file, or in a PrometheusRule's spec.
func ruleJobs(t *testing.T, spec map[string]any) map[string]bool {
	t.Helper()
	jobs := map[string]bool{}
	groups, _, err := unstructured.NestedSlice(spec, "groups")
	require.NoError(t, err)
	for _, g := range groups {
		rules, _, err := unstructured.NestedSlice(g.(map[string]any), "rules")
		require.NoError(t, err)
		for _, r := range rules {
			expr, _, _ := unstructured.NestedString(r.(map[string]any), "expr")
			for _, m := range jobMatcher.FindAllStringSubmatch(expr, -1) {
				require.Equal(t, "=", m[1], "only exact job matchers can be checked against the monitors: %s", expr)
				jobs[m[2]] = true
			}
		}
	}
	return jobs
}

// TestJobNames: the job selectors of the rules are the job labels of the
// rendered ServiceMonitor and PodMonitor, for any release name: a rule
// selecting a job no monitor gives would never fire (PodsloAgentDown
// would not see a dead agent) or fire forever (absent()).
func TestJobNames(t *testing.T) {
	for _, r := range []rendering{
		{release: "podslo", namespace: "monitoring", args: []string{"--set", "agent.enabled=true"}},
		custom,
	} {
		t.Run(r.release, func(t *testing.T) {
			objs := r.render(t)
			exporter := scrapeJob(t, objs, objs.get(t, "ServiceMonitor", r.fullname()+"-exporter"))
			agent := scrapeJob(t, objs, objs.get(t, "PodMonitor", r.fullname()+"-agent"))
			assert.Equal(t, "podslo-exporter", exporter)
			assert.Equal(t, "podslo-agent", agent)
			monitored := []string{exporter, agent}

			selected := map[string]bool{}
			for _, file := range []string{"prometheus_rules.yaml", "prometheus_alerts.yaml"} {
				raw, err := os.ReadFile(filepath.Join(Root(), "alerts", file))
				require.NoError(t, err)
				spec := map[string]any{}
				require.NoError(t, utilyaml.Unmarshal(raw, &spec))
				for job := range ruleJobs(t, spec) {
					selected[job] = true
					assert.Contains(t, monitored, job, "alerts/%s selects a job no monitor of the chart gives", file)
				}
			}
			for _, job := range monitored {
				assert.True(t, selected[job], "no rule selects job %q", job)
			}

			// The mixin's PrometheusRules, when the chart renders them.
			for _, o := range objs {
				if o.GetKind() != "PrometheusRule" {
					continue
				}
				spec, _, _ := unstructured.NestedMap(o.Object, "spec")
				for job := range ruleJobs(t, spec) {
					assert.True(t, slices.Contains(monitored, job), "PrometheusRule %s selects job %q, which no monitor gives", o.GetName(), job)
				}
			}
		})
	}
}

func (r rendering) fullname() string {
	if r.release == "podslo" {
		return "podslo"
	}
	return r.release + "-podslo"
}
