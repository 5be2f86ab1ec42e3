package charts

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

var (
	nodeRule       = rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}}
	replicaSetRule = rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"replicasets"}, Verbs: []string{"get", "list", "watch"}}
	jobRule        = rbacv1.PolicyRule{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: []string{"get", "list", "watch"}}
)

// TestHistogramLabelRBAC: exporter.histogramLabels become the exporter's
// --histogram-label flags, and the reads they need are granted only when
// a node-label or owner-kind label is configured, here or in extraArgs:
// nodes in the ClusterRole, ReplicaSets and Jobs where pods are read.
func TestHistogramLabelRBAC(t *testing.T) {
	objs := defaults.render(t, "--set-json", `exporter.histogramLabels=["team=label:team","zone=node-label:topology.kubernetes.io/zone"]`)
	c := exporterContainer(t, into[appsv1.StatefulSet](t, objs.get(t, "StatefulSet", "podslo-exporter")).Spec.Template.Spec)
	assert.Equal(t, append(slices.Clone(exporterArgs), "--histogram-label=team=label:team", "--histogram-label=zone=node-label:topology.kubernetes.io/zone"), c.Args)
	assert.Equal(t, []rbacv1.PolicyRule{readRule, storageClassRule, nodeRule, networkPolicyRule}, rules(t, objs.get(t, "ClusterRole", "podslo-exporter")), "node-label: nodes")

	objs = defaults.render(t, "--set-json", `exporter.extraArgs=["--histogram-label=kind=owner-kind"]`)
	assert.Equal(t, []rbacv1.PolicyRule{readRule, replicaSetRule, jobRule, storageClassRule, networkPolicyRule}, rules(t, objs.get(t, "ClusterRole", "podslo-exporter")), "owner-kind in extraArgs: replicasets and jobs")

	objs = defaults.render(t, "--set-json", `exporter.histogramLabels=["team=label:team","tier=annotation:example.com/tier"]`)
	assert.Equal(t, []rbacv1.PolicyRule{readRule, storageClassRule, networkPolicyRule}, rules(t, objs.get(t, "ClusterRole", "podslo-exporter")), "pod labels and annotations need nothing more")

	objs = namespacedMode.render(t, "--set-json", `exporter.histogramLabels=["zone=node-label:topology.kubernetes.io/zone","kind=owner-kind"]`)
	assert.Equal(t, []rbacv1.PolicyRule{storageClassRule, nodeRule}, rules(t, objs.get(t, "ClusterRole", "tenant-podslo-exporter")), "nodes are cluster-scoped")
	roles := 0
	for _, o := range objs {
		if o.GetKind() == "Role" {
			roles++
			assert.Equal(t, []rbacv1.PolicyRule{readRule, replicaSetRule, jobRule, networkPolicyRule}, rules(t, o), o.GetNamespace())
		}
	}
	assert.Equal(t, 2, roles, "one per watched namespace")
}
