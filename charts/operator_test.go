package charts

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podslo/podslo/internal/testenv"
)

// operatorKinds are the kinds of monitoring.coreos.com/v1 the chart renders.
var operatorKinds = []string{"ServiceMonitor", "PodMonitor", "PrometheusRule"}

// withOperator tells `helm template` that the cluster serves the Prometheus
// Operator's kinds, as a cluster with its CRDs does: with
// prometheusOperator "auto" (the default) the chart renders them only then.
var withOperator = func() []string {
	var args []string
	for _, k := range operatorKinds {
		args = append(args, "--api-versions", "monitoring.coreos.com/v1/"+k)
	}
	return args
}()

// operatorObjects lists the rendered objects of the operator's API group.
func operatorObjects(objs objects) []string {
	var out []string
	for _, o := range objs {
		if strings.HasPrefix(o.GetAPIVersion(), "monitoring.coreos.com/") {
			out = append(out, o.GetKind()+"/"+o.GetName())
		}
	}
	return out
}

// TestPrometheusOperatorAPI: the chart renders the operator's objects
// only for a cluster that serves their kinds, or when told to (issue 26,
// defect 4: the README's install without the operator failed on its
// PrometheusRules).
func TestPrometheusOperatorAPI(t *testing.T) {
	agentOn := []string{"--set", "agent.enabled=true"}
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"no operator", agentOn, nil},
		{"the README's command without the operator", append(slices.Clone(agentOn), "--set", "exporter.serviceMonitor.enabled=false,agent.podMonitor.enabled=false"), nil},
		{"with the operator", append(slices.Clone(agentOn), withOperator...), []string{
			"ServiceMonitor/podslo-exporter", "PodMonitor/podslo-agent", "PrometheusRule/podslo-rules", "PrometheusRule/podslo-alerts",
		}},
		{"the README's command with the operator", append(slices.Clone(agentOn), append(slices.Clone(withOperator), "--set", "exporter.serviceMonitor.enabled=false,agent.podMonitor.enabled=false")...), []string{
			"PrometheusRule/podslo-rules", "PrometheusRule/podslo-alerts",
		}},
		{"only the PrometheusRule kind served", append(slices.Clone(agentOn), "--api-versions", "monitoring.coreos.com/v1/PrometheusRule"), []string{
			"PrometheusRule/podslo-rules", "PrometheusRule/podslo-alerts",
		}},
		{"per node: a PodMonitor of the exporters", append(slices.Clone(agentOn), "--api-versions", "monitoring.coreos.com/v1/PodMonitor", "--set", "exporter.mode=perNode"), []string{
			"PodMonitor/podslo-exporter", "PodMonitor/podslo-agent",
		}},
		{"forced on", append(slices.Clone(agentOn), "--set", "prometheusOperator=true"), []string{
			"ServiceMonitor/podslo-exporter", "PodMonitor/podslo-agent", "PrometheusRule/podslo-rules", "PrometheusRule/podslo-alerts",
		}},
		{"forced off", append(slices.Clone(agentOn), append(slices.Clone(withOperator), "--set", "prometheusOperator=false")...), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := rendering{release: "podslo", namespace: "monitoring", args: tc.args, withoutOperator: true}.render(t)
			assert.ElementsMatch(t, tc.want, operatorObjects(objs))
			assert.NotEmpty(t, objs, "the exporter is rendered")
		})
	}
	t.Run("a bad value", func(t *testing.T) {
		_, err := Template(helm(t), "podslo", "monitoring", "--set", "prometheusOperator=maybe")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "prometheusOperator")
	})
}

// TestInstallWithoutPrometheusOperator renders the chart as `helm install`
// does on a real kube-apiserver without the Prometheus Operator's CRDs
// (its Capabilities.APIVersions from the server's discovery) and applies
// every object there (--dry-run=server): the README's command and the
// defaults both install. (e2e/realnode's TestChartOnARealNode runs the
// README's `helm install` itself, on a real node.)
func TestInstallWithoutPrometheusOperator(t *testing.T) {
	env := testenv.Start(t)
	a := newApplier(t, env.Config)
	_, lists, err := env.Client.Discovery().ServerGroupsAndResources()
	require.NoError(t, err)
	var served []string
	for _, l := range lists {
		served = append(served, "--api-versions", l.GroupVersion)
		for _, r := range l.APIResources {
			if !strings.Contains(r.Name, "/") {
				served = append(served, "--api-versions", l.GroupVersion+"/"+r.Kind)
			}
		}
	}
	require.Contains(t, served, "apps/v1/StatefulSet", "discovery lists the kinds")
	for _, r := range []rendering{
		{release: "podslo", namespace: "monitoring", withoutOperator: true, args: []string{"--set", "agent.enabled=true",
			"--set", "exporter.serviceMonitor.enabled=false,agent.podMonitor.enabled=false"}},
		{release: "slo", namespace: "obs", withoutOperator: true},
	} {
		objs := r.render(t, served...)
		assert.Empty(t, operatorObjects(objs))
		ensureNamespace(t, env.Client, r.namespace, restricted)
		for _, o := range objs {
			assert.NoError(t, a.apply(o, true))
		}
	}
}
