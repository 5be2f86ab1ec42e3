package charts

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podslo/podslo/internal/testenv"
)

// privileged is the Pod Security level a hostPath needs: the baseline and
// restricted standards both refuse one.
var privileged = map[string]string{"pod-security.kubernetes.io/enforce": "privileged"}

// baseline is the Pod Security level a root init container needs.
var baseline = map[string]string{"pod-security.kubernetes.io/enforce": "baseline", "pod-security.kubernetes.io/warn": "baseline"}

// testInstallModes applies every object of each install mode with
// --dry-run=server, then the pods its workload would create, as
// testServerSideApply does for the default install. The per-node mode's
// hostPath is refused under the restricted standard, which its docs say.
func testInstallModes(t *testing.T, env *testenv.Env, a *applier) {
	ctx := context.Background()
	for _, m := range []struct {
		name   string
		r      rendering
		labels map[string]string
	}{
		{"namespaced", namespacedMode, restricted},
		{"sharded", shardedMode, restricted},
		{"per node", perNodeMode, privileged},
		// A PersistentVolume that ignores fsGroup: the root init container
		// needs baseline, as exporter.volumePermissions says.
		{"volume permissions", rendering{release: "podslo", namespace: "volume-permissions", args: []string{"--set", "exporter.volumePermissions.enabled=true"}}, baseline},
	} {
		t.Run(m.name, func(t *testing.T) {
			objs := m.r.render(t)
			ensureNamespace(t, env.Client, m.r.namespace, m.labels)
			for _, o := range objs {
				if o.GetNamespace() != "" && o.GetNamespace() != m.r.namespace {
					ensureNamespace(t, env.Client, o.GetNamespace(), nil)
				}
			}
			a.takeWarnings()
			for _, o := range objs {
				assert.NoError(t, a.apply(o, true))
				assert.Empty(t, a.takeWarnings(), "%s %s", o.GetKind(), o.GetName())
			}
			for _, o := range objs {
				if o.GetKind() == "ServiceAccount" {
					require.NoError(t, a.apply(o, false))
				}
			}
			workloads := 0
			for _, o := range objs {
				if o.GetKind() != "StatefulSet" && o.GetKind() != "DaemonSet" {
					continue
				}
				workloads++
				pod := podOf(t, o, o.GetName()+"-0", "")
				_, err := env.Client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				assert.NoError(t, err, "a pod of %s %s", o.GetKind(), o.GetName())
				assert.Empty(t, a.takeWarnings(), "a pod of %s %s", o.GetKind(), o.GetName())
			}
			assert.Equal(t, 1, workloads)
		})
	}

	t.Run("per node under the restricted standard", func(t *testing.T) {
		r := rendering{release: "podslo", namespace: "per-node-restricted", args: perNodeMode.args}
		objs := r.render(t)
		ensureNamespace(t, env.Client, r.namespace, restricted)
		require.NoError(t, a.apply(objs.get(t, "ServiceAccount", "podslo-exporter"), false))
		pod := podOf(t, objs.get(t, "DaemonSet", "podslo-exporter"), "podslo-exporter-x", "")
		_, err := env.Client.CoreV1().Pods(r.namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		assert.True(t, apierrors.IsForbidden(err), "%v", err)
		assert.ErrorContains(t, err, `restricted volume types (volume "state" uses restricted volume type "hostPath")`)
	})
}

// testNamespacedRBAC installs the namespaced mode's account, ClusterRole
// and Roles for real and runs the exporter with the chart's --namespaces
// as that account: it becomes ready with only those Roles and the
// StorageClass read, and can read nothing cluster-wide nor in a namespace
// it does not watch.
func testNamespacedRBAC(t *testing.T, env *testenv.Env, a *applier) {
	ctx := context.Background()
	admin := env.Client
	r := namespacedMode
	objs := r.render(t)
	for _, ns := range []string{r.namespace, "team-a", "team-b", "team-c"} {
		ensureNamespace(t, admin, ns, nil)
	}
	roles := 0
	for _, o := range objs {
		switch o.GetKind() {
		case "Role", "RoleBinding":
			roles++
			fallthrough
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding":
			require.NoError(t, a.apply(o, false))
		}
	}
	require.Equal(t, 4, roles, "a Role and a RoleBinding in each of team-a and team-b")
	sts := objs.get(t, "StatefulSet", "tenant-podslo-exporter")
	cfg := env.ServiceAccountConfig(t, r.namespace, "tenant-podslo-exporter", nil)

	t.Run("the exporter syncs", func(t *testing.T) {
		runExporter(t, env, cfg, exporterContainer(t, podOf(t, sts, "tenant-podslo-exporter-0", "").Spec).Args)
	})

	sa := testenv.ClientFor(t, cfg)
	list := map[string]func(ns string) error{
		"pods": func(ns string) error { _, err := sa.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); return err },
		"persistentvolumeclaims": func(ns string) error {
			_, err := sa.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
			return err
		},
		"events": func(ns string) error { _, err := sa.CoreV1().Events(ns).List(ctx, metav1.ListOptions{}); return err },
		"networkpolicies": func(ns string) error {
			_, err := sa.NetworkingV1().NetworkPolicies(ns).List(ctx, metav1.ListOptions{})
			return err
		},
	}
	for resource, list := range list {
		for _, ns := range []string{"team-a", "team-b"} {
			assert.NoError(t, list(ns), "list %s in watched namespace %s", resource, ns)
		}
		for _, ns := range []string{metav1.NamespaceAll, "team-c", r.namespace} {
			err := list(ns)
			assert.True(t, apierrors.IsForbidden(err), "list %s in %q must be refused: %v", resource, ns, err)
		}
	}
	_, err := sa.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{})
	assert.NoError(t, err, "the default class is read cluster-wide")
}

// testAutoshardingRBAC installs the sharded mode's account and roles, and
// its StatefulSet, for real, and runs the exporter as the account in a pod
// the StatefulSet controls, with the arguments the kubelet would expand:
// it takes its shard from the ordinal and the total from the replicas, and
// its watch of the StatefulSet (by name, which the Role's resourceNames
// allow) sees a scale-up and stops it for the restart that hands pods over.
func testAutoshardingRBAC(t *testing.T, env *testenv.Env, a *applier) {
	ctx := context.Background()
	admin := env.Client
	r := rendering{release: "shards", namespace: "shards", args: shardedMode.args}
	objs := r.render(t)
	ensureNamespace(t, admin, r.namespace, nil)
	const name = "shards-podslo-exporter"
	// From the single mode, sharding is an in-place upgrade: every field
	// it changes on the StatefulSet may change.
	single := rendering{release: r.release, namespace: r.namespace}
	require.NoError(t, a.apply(single.render(t).get(t, "StatefulSet", name), false))
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "StatefulSet":
			// No controller runs here: the StatefulSet is only read.
			require.NoError(t, a.apply(o, false))
		}
	}
	set, err := admin.AppsV1().StatefulSets(r.namespace).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	pod := podOf(t, objs.get(t, "StatefulSet", name), name+"-1", "")
	pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: set.Name, UID: set.UID, Controller: ptrTo(true)}}
	pod, err = admin.CoreV1().Pods(r.namespace).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)

	cfg := env.ServiceAccountConfig(t, r.namespace, name, nil)
	ex := startExporter(t, env, cfg, kubeletArgs(t, pod, exporterContainer(t, pod.Spec)))
	assert.Contains(t, ex.logs.String(), `"shard":1,"totalShards":3`, "shard = ordinal, total = replicas")

	sa := testenv.ClientFor(t, cfg)
	_, err = sa.AppsV1().StatefulSets(r.namespace).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	assert.NoError(t, err, "its own StatefulSet, by name")
	_, err = sa.AppsV1().StatefulSets(r.namespace).List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "every StatefulSet: %v", err)
	_, err = sa.CoreV1().Pods(r.namespace).Get(ctx, pod.Name, metav1.GetOptions{})
	assert.NoError(t, err, "its own pod")
	_, err = sa.AppsV1().StatefulSets(r.namespace).Get(ctx, "another", metav1.GetOptions{})
	assert.True(t, apierrors.IsForbidden(err), "another StatefulSet: %v", err)
	_, err = sa.CoreV1().Secrets(r.namespace).List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsForbidden(err), "list secrets: %v", err)

	_, err = admin.AppsV1().StatefulSets(r.namespace).Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"replicas":4}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	select {
	case <-ex.done:
		assert.Contains(t, ex.logs.String(), "autosharded StatefulSet's replicas changed")
	case <-time.After(60 * time.Second):
		t.Fatalf("the exporter did not stop after the replicas changed:\n%s", ex.logs.String())
	}
}

// kubeletArgs expands $(VAR) in c's arguments from its downward API
// variables, as the kubelet does.
func kubeletArgs(t *testing.T, pod *corev1.Pod, c corev1.Container) []string {
	t.Helper()
	var pairs []string
	for _, e := range c.Env {
		if e.ValueFrom == nil || e.ValueFrom.FieldRef == nil {
			continue
		}
		var v string
		switch e.ValueFrom.FieldRef.FieldPath {
		case "metadata.name":
			v = pod.Name
		case "metadata.namespace":
			v = pod.Namespace
		case "spec.nodeName":
			v = pod.Spec.NodeName
		default:
			t.Fatalf("no value for %s's field %s", e.Name, e.ValueFrom.FieldRef.FieldPath)
		}
		pairs = append(pairs, "$("+e.Name+")", v)
	}
	expand := strings.NewReplacer(pairs...)
	args := make([]string, len(c.Args))
	for i, arg := range c.Args {
		args[i] = expand.Replace(arg)
	}
	return args
}
