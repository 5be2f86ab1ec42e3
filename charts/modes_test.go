package charts

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// The install modes of docs/scaling.md, as the tests render them.
var (
	// namespacedMode: an allowlist less a denylist, with Roles.
	namespacedMode = rendering{release: "tenant", namespace: "tenant-obs", args: []string{
		"--set-json", `exporter.namespaces=["team-a","team-b","team-c"]`,
		"--set-json", `exporter.namespacesDenylist=["team-c"]`,
		"--set", "exporter.rbac.namespaced=true",
	}}
	shardedMode  = rendering{release: "podslo", namespace: "sharded", args: []string{"--set", "exporter.sharding.replicas=3"}}
	perNodeMode  = rendering{release: "podslo", namespace: "per-node", args: []string{"--set", "exporter.mode=perNode"}}
	exporterArgs = []string{"exporter", "--listen-address=:8080", "--state-dir=/var/lib/podslo", "--log-format=json", "--log-level=info", "--slos-values=/etc/podslo/slos/values.yaml"}
)

// exporterMounts are the exporter's mounts with neither TLS nor a network
// plugin profile: its state, and the SLO values of the chart.
var exporterMounts = []corev1.VolumeMount{{Name: "state", MountPath: "/var/lib/podslo"}, {Name: "slos", MountPath: "/etc/podslo/slos", ReadOnly: true}}

func slosVolume(configMap string) corev1.Volume {
	return corev1.Volume{Name: "slos", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: configMap}}}}
}

func exporterContainer(t *testing.T, spec corev1.PodSpec) corev1.Container {
	t.Helper()
	require.Len(t, spec.Containers, 1)
	// In every mode (Deployment, StatefulSet, DaemonSet), the exporter runs
	// the image's exporter binary.
	assert.Equal(t, []string{"/podslo-exporter"}, spec.Containers[0].Command)
	return spec.Containers[0]
}

func rules(t *testing.T, o *unstructured.Unstructured) []rbacv1.PolicyRule {
	t.Helper()
	if o.GetKind() == "Role" {
		return into[rbacv1.Role](t, o).Rules
	}
	return into[rbacv1.ClusterRole](t, o).Rules
}

var (
	readRule          = rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods", "persistentvolumeclaims", "events"}, Verbs: []string{"get", "list", "watch"}}
	networkPolicyRule = rbacv1.PolicyRule{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: []string{"get", "list", "watch"}}
	storageClassRule  = rbacv1.PolicyRule{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}, Verbs: []string{"get", "list", "watch"}}
	policyEventsRule  = rbacv1.PolicyRule{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}}
	exporterSubject   = func(release, ns string) []rbacv1.Subject {
		return []rbacv1.Subject{{Kind: "ServiceAccount", Name: release, Namespace: ns}}
	}
	nonMixinNonAccount = func(name string) bool { return mixinObject(name) || strings.HasPrefix(name, "ServiceAccount/") }
)

// TestNamespacedMode: exporter.namespaces less exporter.namespacesDenylist
// become the exporter's flags, and with exporter.rbac.namespaced each
// watched namespace gets the reads as a Role; only storageclasses stay in
// the ClusterRole.
func TestNamespacedMode(t *testing.T) {
	objs := namespacedMode.render(t)
	assert.ElementsMatch(t, []string{
		"ClusterRole/tenant-podslo-exporter",
		"ClusterRoleBinding/tenant-podslo-exporter",
		"Role/tenant-podslo-exporter", "RoleBinding/tenant-podslo-exporter",
		"Role/tenant-podslo-exporter", "RoleBinding/tenant-podslo-exporter",
		"Service/tenant-podslo-exporter",
		"StatefulSet/tenant-podslo-exporter",
		"PodDisruptionBudget/tenant-podslo-exporter",
		"ServiceMonitor/tenant-podslo-exporter",
	}, slices.DeleteFunc(objs.names(), nonMixinNonAccount))

	sts := into[appsv1.StatefulSet](t, objs.get(t, "StatefulSet", "tenant-podslo-exporter"))
	assert.Equal(t, ptrTo[int32](1), sts.Spec.Replicas)
	c := exporterContainer(t, sts.Spec.Template.Spec)
	assert.Equal(t, append(slices.Clone(exporterArgs), "--namespaces=team-a,team-b,team-c", "--namespaces-denylist=team-c"), c.Args)
	assert.Equal(t, []corev1.EnvVar{{Name: "GOMEMLIMIT", Value: "483183820"}}, c.Env, "no downward API variable")

	assert.Equal(t, []rbacv1.PolicyRule{storageClassRule}, rules(t, objs.get(t, "ClusterRole", "tenant-podslo-exporter")),
		"only the default StorageClass's read stays cluster-wide")
	var roleNamespaces []string
	for _, o := range objs {
		switch o.GetKind() {
		case "Role":
			roleNamespaces = append(roleNamespaces, o.GetNamespace())
			assert.Equal(t, []rbacv1.PolicyRule{readRule, networkPolicyRule}, rules(t, o), o.GetNamespace())
		case "RoleBinding":
			b := into[rbacv1.RoleBinding](t, o)
			assert.Equal(t, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "tenant-podslo-exporter"}, b.RoleRef)
			assert.Equal(t, exporterSubject("tenant-podslo-exporter", "tenant-obs"), b.Subjects, o.GetNamespace())
		}
	}
	assert.Equal(t, []string{"team-a", "team-b"}, roleNamespaces, "the watched namespaces, not the denied one")

	t.Run("without NetworkPolicies, with their Events", func(t *testing.T) {
		objs := namespacedMode.render(t, "--set", "exporter.networkPolicies.enabled=false")
		for _, o := range objs {
			if o.GetKind() == "Role" {
				assert.Equal(t, []rbacv1.PolicyRule{readRule}, rules(t, o), o.GetNamespace())
			}
		}
		objs = namespacedMode.render(t, "--set", "exporter.networkPolicies.events=true")
		var eventNamespaces []string
		for _, o := range objs {
			if strings.HasSuffix(o.GetName(), "-events") {
				require.Contains(t, []string{"Role", "RoleBinding"}, o.GetKind(), "no cluster-wide write")
				if o.GetKind() == "Role" {
					eventNamespaces = append(eventNamespaces, o.GetNamespace())
					assert.Equal(t, []rbacv1.PolicyRule{policyEventsRule}, rules(t, o))
				}
			}
		}
		assert.Equal(t, []string{"team-a", "team-b"}, eventNamespaces)
	})

	t.Run("allowlist with the ClusterRole", func(t *testing.T) {
		objs := defaults.render(t, "--set-json", `exporter.namespaces=["team-a"]`)
		assert.NotContains(t, objs.names(), "Role/podslo-exporter")
		assert.Equal(t, []rbacv1.PolicyRule{readRule, storageClassRule, networkPolicyRule}, rules(t, objs.get(t, "ClusterRole", "podslo-exporter")))
		c := exporterContainer(t, into[appsv1.StatefulSet](t, objs.get(t, "StatefulSet", "podslo-exporter")).Spec.Template.Spec)
		assert.Equal(t, append(slices.Clone(exporterArgs), "--namespaces=team-a"), c.Args)
	})

	t.Run("denylist only", func(t *testing.T) {
		objs := defaults.render(t, "--set-json", `exporter.namespacesDenylist=["kube-system","kube-public"]`)
		assert.Equal(t, []rbacv1.PolicyRule{readRule, storageClassRule, networkPolicyRule}, rules(t, objs.get(t, "ClusterRole", "podslo-exporter")),
			"a denylist is a cluster-wide watch")
		c := exporterContainer(t, into[appsv1.StatefulSet](t, objs.get(t, "StatefulSet", "podslo-exporter")).Spec.Template.Spec)
		assert.Equal(t, append(slices.Clone(exporterArgs), "--namespaces-denylist=kube-system,kube-public"), c.Args)
	})
}

// TestShardedMode: sharding.replicas autoshards the StatefulSet, each
// replica on a claim of its own, with the Role autosharding needs, and the
// ServiceMonitor scrapes every replica.
func TestShardedMode(t *testing.T) {
	objs := shardedMode.render(t)
	assert.ElementsMatch(t, []string{
		"ClusterRole/podslo-exporter",
		"ClusterRoleBinding/podslo-exporter",
		"Role/podslo-exporter-autosharding",
		"RoleBinding/podslo-exporter-autosharding",
		"Service/podslo-exporter",
		"StatefulSet/podslo-exporter",
		"PodDisruptionBudget/podslo-exporter",
		"ServiceMonitor/podslo-exporter",
	}, slices.DeleteFunc(objs.names(), nonMixinNonAccount))

	sts := into[appsv1.StatefulSet](t, objs.get(t, "StatefulSet", "podslo-exporter"))
	assert.Equal(t, ptrTo[int32](3), sts.Spec.Replicas)
	assert.Equal(t, &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
		WhenScaled: appsv1.DeletePersistentVolumeClaimRetentionPolicyType, WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType,
	}, sts.Spec.PersistentVolumeClaimRetentionPolicy, "a shard added again starts new")
	require.Len(t, sts.Spec.VolumeClaimTemplates, 1, "a claim per shard")
	assert.Equal(t, "state", sts.Spec.VolumeClaimTemplates[0].Name)
	pod := sts.Spec.Template.Spec
	c := exporterContainer(t, pod)
	assert.Equal(t, append(slices.Clone(exporterArgs), "--pod=$(POD_NAME)", "--pod-namespace=$(POD_NAMESPACE)"), c.Args)
	assert.Equal(t, []corev1.EnvVar{
		{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
		{Name: "GOMEMLIMIT", Value: "483183820"},
	}, c.Env, "the variables are defined before the arguments use them")
	assert.Equal(t, exporterMounts, c.VolumeMounts)
	assertLockedDown(t, pod, c)

	role := objs.get(t, "Role", "podslo-exporter-autosharding")
	assert.Equal(t, "sharded", role.GetNamespace())
	assert.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}},
		{APIGroups: []string{"apps"}, Resources: []string{"statefulsets"}, ResourceNames: []string{"podslo-exporter"}, Verbs: []string{"get", "list", "watch"}},
	}, rules(t, role))
	binding := into[rbacv1.RoleBinding](t, objs.get(t, "RoleBinding", "podslo-exporter-autosharding"))
	assert.Equal(t, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "podslo-exporter-autosharding"}, binding.RoleRef)
	assert.Equal(t, exporterSubject("podslo-exporter", "sharded"), binding.Subjects)

	// A ServiceMonitor scrapes every endpoint of the Service it selects:
	// the Service must select every shard's pod, whatever its ordinal.
	svc := into[corev1.Service](t, objs.get(t, "Service", "podslo-exporter"))
	assert.True(t, matches(sts.Spec.Template.Labels, svc.Spec.Selector), "the Service selects the shards' pods")
	for k := range svc.Spec.Selector {
		assert.NotEqual(t, "statefulset.kubernetes.io/pod-name", k, "one shard only")
	}
	assert.Equal(t, "podslo-exporter", scrapeJob(t, objs, objs.get(t, "ServiceMonitor", "podslo-exporter")), "the job the rules select")

	t.Run("one replica is the single mode", func(t *testing.T) {
		objs := shardedMode.render(t, "--set", "exporter.sharding.replicas=1")
		assert.NotContains(t, objs.names(), "Role/podslo-exporter-autosharding")
		sts := into[appsv1.StatefulSet](t, objs.get(t, "StatefulSet", "podslo-exporter"))
		assert.Nil(t, sts.Spec.PersistentVolumeClaimRetentionPolicy)
		assert.Equal(t, exporterArgs, exporterContainer(t, sts.Spec.Template.Spec).Args)
	})
}

// TestPerNodeMode: a DaemonSet with --node-name from spec.nodeName, its
// state on a hostPath given to uid 65532 by a root init container that
// can do nothing but chown and chmod, and a PodMonitor instead of the
// Service and ServiceMonitor.
func TestPerNodeMode(t *testing.T) {
	objs := perNodeMode.render(t)
	assert.ElementsMatch(t, []string{
		"ClusterRole/podslo-exporter",
		"ClusterRoleBinding/podslo-exporter",
		"DaemonSet/podslo-exporter",
		"PodMonitor/podslo-exporter",
	}, slices.DeleteFunc(objs.names(), nonMixinNonAccount))

	ds := into[appsv1.DaemonSet](t, objs.get(t, "DaemonSet", "podslo-exporter"))
	assert.Equal(t, appsv1.DaemonSetUpdateStrategy{Type: appsv1.RollingUpdateDaemonSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptrTo(intstr.FromInt32(1))}}, ds.Spec.UpdateStrategy)
	pod := ds.Spec.Template.Spec
	c := exporterContainer(t, pod)
	assert.Equal(t, append(slices.Clone(exporterArgs), "--node-name=$(NODE_NAME)"), c.Args)
	assert.Equal(t, []corev1.EnvVar{
		{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		{Name: "GOMEMLIMIT", Value: "483183820"},
	}, c.Env)
	assert.Equal(t, []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, pod.Tolerations, "every node's pods need their exporter")
	assert.Equal(t, []corev1.Volume{{Name: "state", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
		Path: "/var/lib/podslo/per-node/podslo-exporter", Type: ptrTo(corev1.HostPathDirectoryOrCreate)}}}, slosVolume("podslo-exporter-slos")}, pod.Volumes,
		"a directory per release")
	assert.Equal(t, exporterMounts, c.VolumeMounts)
	assertLockedDown(t, pod, c)
	assert.Nil(t, pod.SecurityContext.FSGroup, "a hostPath ignores it")

	require.Len(t, pod.InitContainers, 1)
	init := pod.InitContainers[0]
	assert.Equal(t, "docker.io/library/busybox:1.37.0", init.Image)
	assert.Equal(t, []string{"sh", "-c", "chown 65532:65532 /var/lib/podslo && chmod 0700 /var/lib/podslo"}, init.Command)
	assert.Equal(t, []corev1.VolumeMount{{Name: "state", MountPath: "/var/lib/podslo"}}, init.VolumeMounts)
	sc := init.SecurityContext
	assert.Equal(t, int64(0), *sc.RunAsUser)
	assert.Equal(t, false, *sc.RunAsNonRoot)
	assert.Equal(t, false, *sc.AllowPrivilegeEscalation)
	assert.Equal(t, true, *sc.ReadOnlyRootFilesystem)
	assert.Equal(t, &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"CHOWN", "FOWNER"}}, sc.Capabilities)

	mon := objs.get(t, "PodMonitor", "podslo-exporter")
	sel, _, _ := unstructured.NestedStringMap(mon.Object, "spec", "selector", "matchLabels")
	assert.True(t, matches(ds.Spec.Template.Labels, sel), "the PodMonitor selects every node's exporter")
	assert.Equal(t, "podslo-exporter", scrapeJob(t, objs, mon), "the job the rules select")
	ep := endpoint(t, mon, "podMetricsEndpoints")
	assert.Equal(t, true, ep["honorLabels"])
	assert.Contains(t, ep["relabelings"], map[string]any{"action": "replace", "sourceLabels": []any{"__meta_kubernetes_pod_node_name"}, "targetLabel": "node"})

	t.Run("own path, no init container, namespaced", func(t *testing.T) {
		objs := perNodeMode.render(t, "--set", "exporter.perNode.hostPath=/data/podslo,exporter.volumePermissions.enabled=false,exporter.rbac.namespaced=true",
			"--set-json", `exporter.namespaces=["team-a"]`)
		pod := into[appsv1.DaemonSet](t, objs.get(t, "DaemonSet", "podslo-exporter")).Spec.Template.Spec
		assert.Empty(t, pod.InitContainers)
		assert.Equal(t, "/data/podslo", pod.Volumes[0].HostPath.Path)
		assert.Equal(t, append(slices.Clone(exporterArgs), "--namespaces=team-a", "--node-name=$(NODE_NAME)"), exporterContainer(t, pod).Args)
		assert.Equal(t, "team-a", objs.get(t, "Role", "podslo-exporter").GetNamespace())
	})
}

func ptrTo[T any](v T) *T { return &v }
