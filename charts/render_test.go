package charts

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	podsloalerts "github.com/podslo/podslo/alerts"
)

// helm finds the helm binary; the chart tests cannot run without it, and
// CI must not pass by skipping them.
func helm(t testing.TB) string {
	t.Helper()
	bin, err := Helm()
	if err != nil {
		if testing.Short() {
			t.Skip(err)
		}
		t.Fatal(err)
	}
	return bin
}

// rendering is one `helm template` of the chart.
type rendering struct {
	release, namespace string
	args               []string
	// withoutOperator renders for a cluster without the Prometheus
	// Operator's kinds; by default the cluster has them (withOperator).
	withoutOperator bool
}

var (
	defaults = rendering{release: "podslo", namespace: "monitoring"}
	// custom is what a default-minded chart gets wrong: another release
	// name and namespace, and every optional part on.
	custom = rendering{release: "slo", namespace: "obs", args: []string{"--values", "testdata/custom.yaml"}}
)

// render renders r and decodes every object.
func (r rendering) render(t testing.TB, extra ...string) objects {
	t.Helper()
	args := append(slices.Clone(r.args), extra...)
	if !r.withoutOperator {
		args = append(slices.Clone(withOperator), args...)
	}
	out, err := Template(helm(t), r.release, r.namespace, args...)
	require.NoError(t, err)
	return decode(t, out)
}

type objects []*unstructured.Unstructured

func decode(t testing.TB, raw []byte) objects {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var out objects
	for {
		var o unstructured.Unstructured
		if err := dec.Decode(&o.Object); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("decode: %v\n%s", err, raw)
		}
		if o.Object != nil {
			out = append(out, &o)
		}
	}
}

// get returns the one object of kind and name, failing the test otherwise.
func (objs objects) get(t testing.TB, kind, name string) *unstructured.Unstructured {
	t.Helper()
	var found *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			require.Nil(t, found, "two %s %s", kind, name)
			found = o
		}
	}
	require.NotNil(t, found, "no %s %s in %v", kind, name, objs.names())
	return found
}

func (objs objects) names() []string {
	var names []string
	for _, o := range objs {
		names = append(names, o.GetKind()+"/"+o.GetName())
	}
	return names
}

// into converts o to a typed object.
func into[T any](t testing.TB, o *unstructured.Unstructured) *T {
	t.Helper()
	var typed T
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, &typed, true), "%s %s", o.GetKind(), o.GetName())
	return &typed
}

func env(c corev1.Container, name string) *corev1.EnvVar {
	for i := range c.Env {
		if c.Env[i].Name == name {
			return &c.Env[i]
		}
	}
	return nil
}

func TestLint(t *testing.T) {
	bin := helm(t)
	for _, args := range [][]string{nil, {"--values", "testdata/custom.yaml"}} {
		out, err := Run(bin, append([]string{"lint", "--strict", ChartDir()}, args...)...)
		require.NoError(t, err, "%s", out)
		assert.Contains(t, string(out), "1 chart(s) linted, 0 chart(s) failed")
	}
}

// TestDefaults: what `helm install podslo charts/podslo -n monitoring`
// creates.
func TestDefaults(t *testing.T) {
	objs := defaults.render(t)
	assert.ElementsMatch(t, []string{
		"ServiceAccount/podslo-exporter",
		"ClusterRole/podslo-exporter",
		"ClusterRoleBinding/podslo-exporter",
		"Service/podslo-exporter",
		"StatefulSet/podslo-exporter",
		"PodDisruptionBudget/podslo-exporter",
		"ServiceMonitor/podslo-exporter",
	}, slices.DeleteFunc(objs.names(), mixinObject))
	for _, o := range objs {
		if o.GetKind() != "ClusterRole" && o.GetKind() != "ClusterRoleBinding" {
			assert.Equal(t, "monitoring", o.GetNamespace(), "%s %s", o.GetKind(), o.GetName())
		}
		assert.Equal(t, "podslo", o.GetLabels()["app.kubernetes.io/instance"], "%s %s", o.GetKind(), o.GetName())
	}

	sts := into[appsv1.StatefulSet](t, objs.get(t, "StatefulSet", "podslo-exporter"))
	pod := sts.Spec.Template.Spec
	require.Len(t, pod.Containers, 1)
	c := pod.Containers[0]
	assert.Equal(t, "ghcr.io/podslo/podslo:"+releaseVersion(t), c.Image, "the chart's appVersion, VERSION")
	assert.Equal(t, exporterArgs, c.Args)
	assert.Equal(t, "podslo-exporter", pod.ServiceAccountName)
	// 90% of 512Mi.
	assert.Equal(t, &corev1.EnvVar{Name: "GOMEMLIMIT", Value: "483183820"}, env(c, "GOMEMLIMIT"))
	require.Len(t, sts.Spec.VolumeClaimTemplates, 1)
	claim := sts.Spec.VolumeClaimTemplates[0]
	assert.Equal(t, "state", claim.Name)
	assert.Equal(t, "1Gi", claim.Spec.Resources.Requests.Storage().String())
	assert.Nil(t, claim.Spec.StorageClassName, "the cluster's default StorageClass")
	assert.Equal(t, exporterMounts, c.VolumeMounts)
	assert.Equal(t, []corev1.Volume{slosVolume("podslo-exporter-slos")}, pod.Volumes)
	assert.Equal(t, corev1.URISchemeHTTP, c.ReadinessProbe.HTTPGet.Scheme)
	assert.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path)
	assert.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path)
	assertLockedDown(t, pod, c)

	sm := objs.get(t, "ServiceMonitor", "podslo-exporter")
	ep := endpoint(t, sm, "endpoints")
	assert.Equal(t, true, ep["honorLabels"])
	assert.Equal(t, "http", ep["scheme"])
	assert.NotContains(t, ep, "tlsConfig")
	assert.NotContains(t, ep, "basicAuth")
}

// mixinObject: the PrometheusRules and dashboard ConfigMaps of the
// monitoring mixin, which its own tests cover.
func mixinObject(name string) bool {
	return strings.HasPrefix(name, "PrometheusRule/") || strings.HasPrefix(name, "ConfigMap/")
}

// assertLockedDown checks what the restricted Pod Security Standard asks
// and more: the apiserver test enforces the standard itself.
func assertLockedDown(t *testing.T, pod corev1.PodSpec, c corev1.Container) {
	t.Helper()
	psc := pod.SecurityContext
	require.NotNil(t, psc)
	assert.Equal(t, true, *psc.RunAsNonRoot)
	assert.Equal(t, int64(65532), *psc.RunAsUser)
	assert.Equal(t, int64(65532), *psc.RunAsGroup)
	assert.Equal(t, corev1.SeccompProfileTypeRuntimeDefault, psc.SeccompProfile.Type)
	sc := c.SecurityContext
	require.NotNil(t, sc)
	assert.Equal(t, false, *sc.AllowPrivilegeEscalation)
	assert.Equal(t, true, *sc.ReadOnlyRootFilesystem)
	assert.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
	assert.Empty(t, sc.Capabilities.Add)
}

// endpoint returns the one scrape endpoint of a ServiceMonitor (field
// "endpoints") or PodMonitor ("podMetricsEndpoints").
func endpoint(t *testing.T, monitor *unstructured.Unstructured, field string) map[string]any {
	t.Helper()
	eps, found, err := unstructured.NestedSlice(monitor.Object, "spec", field)
	require.NoError(t, err)
	require.True(t, found)
	require.Len(t, eps, 1)
	return eps[0].(map[string]any)
}

// TestCustom: another release name and namespace, and every option on.
// Nothing may still say "podslo" where the release's names belong.
func TestCustom(t *testing.T) {
	objs := custom.render(t)
	assert.ElementsMatch(t, []string{
		"ServiceAccount/slo-podslo-exporter",
		"ClusterRole/slo-podslo-exporter",
		"ClusterRoleBinding/slo-podslo-exporter",
		"ClusterRole/slo-podslo-exporter-events",
		"ClusterRoleBinding/slo-podslo-exporter-events",
		"Service/slo-podslo-exporter",
		"StatefulSet/slo-podslo-exporter",
		"PodDisruptionBudget/slo-podslo-exporter",
		"ServiceMonitor/slo-podslo-exporter",
		"NetworkPolicy/slo-podslo-exporter",
		"Secret/slo-podslo-web-config",
		"ServiceAccount/slo-podslo-agent",
		"ClusterRole/slo-podslo-agent",
		"ClusterRoleBinding/slo-podslo-agent",
		"DaemonSet/slo-podslo-agent",
		"PodMonitor/slo-podslo-agent",
		"NetworkPolicy/slo-podslo-agent",
		"NetworkPolicy/slo-podslo-agent-probes",
		"ValidatingAdmissionPolicy/slo-podslo-agent-node-restriction",
		"ValidatingAdmissionPolicyBinding/slo-podslo-agent-node-restriction",
	}, slices.DeleteFunc(objs.names(), mixinObject))
	for _, o := range objs {
		switch {
		case o.GetKind() == "NetworkPolicy" && o.GetName() == "slo-podslo-agent-probes":
			assert.Equal(t, "apps", o.GetNamespace(), "it admits the agents to the probed pods, in their namespace")
		case o.GetNamespace() != "":
			assert.Equal(t, "obs", o.GetNamespace(), "%s %s", o.GetKind(), o.GetName())
		}
		assert.Equal(t, "platform", o.GetLabels()["team"], "commonLabels on %s %s", o.GetKind(), o.GetName())
		assert.True(t, strings.HasPrefix(o.GetName(), "slo-podslo-"), "%s %s", o.GetKind(), o.GetName())
	}

	// The values' class threshold and extra SLO are in the rules.
	rules, err := json.Marshal(objs.get(t, "PrometheusRule", "slo-podslo-rules").Object)
	require.NoError(t, err)
	assert.Contains(t, string(rules), `runtime_class=\"kata\",le=~\"20(\\\\.0)?\"`)
	assert.Contains(t, string(rules), "cluster_runtime_class:podslo_kata_sandbox_creation_latency_errors:ratio_rate5m")
	alerts, err := json.Marshal(objs.get(t, "PrometheusRule", "slo-podslo-alerts").Object)
	require.NoError(t, err)
	assert.Contains(t, string(alerts), `"alert":"PodsloKataSandboxCreationLatencyBudgetBurn"`)

	sts := into[appsv1.StatefulSet](t, objs.get(t, "StatefulSet", "slo-podslo-exporter"))
	pod := sts.Spec.Template.Spec
	c := pod.Containers[0]
	assert.Equal(t, "ghcr.io/podslo/podslo@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", c.Image)
	assert.Equal(t, []string{"/podslo-exporter"}, c.Command, "the image's exporter binary, without the agent's code")
	assert.Equal(t, []string{"exporter", "--listen-address=:8080", "--state-dir=/var/lib/podslo", "--log-format=json", "--log-level=debug",
		"--slos-values=/etc/podslo/slos/values.yaml", "--web.config.file=/etc/podslo/web/web-config.yml",
		"--network-plugin-profile=/etc/podslo/network-plugin-profile/profile.yaml", "--networkpolicy-target-pods", "--networkpolicy-events",
		"--pod-label=team"}, c.Args)
	assert.Equal(t, "slo-podslo-exporter", pod.ServiceAccountName)
	// 90% of 1.5Gi.
	assert.Equal(t, &corev1.EnvVar{Name: "GOMEMLIMIT", Value: "1449551462"}, env(c, "GOMEMLIMIT"))
	assert.Empty(t, sts.Spec.VolumeClaimTemplates, "the existing claim instead")
	assert.ElementsMatch(t, []corev1.Volume{
		{Name: "state", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "slo-state"}}},
		{Name: "web-config", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "slo-podslo-web-config"}}},
		{Name: "tls", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "slo-tls"}}},
		{Name: "network-plugin-profile", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "slo-podslo-exporter-network-plugin-profile"}}}},
		{Name: "slos", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "slo-podslo-exporter-slos"}}}},
	}, pod.Volumes)
	assert.ElementsMatch(t, []corev1.VolumeMount{
		{Name: "state", MountPath: "/var/lib/podslo"},
		{Name: "web-config", MountPath: "/etc/podslo/web", ReadOnly: true},
		{Name: "tls", MountPath: "/etc/podslo/tls", ReadOnly: true},
		{Name: "network-plugin-profile", MountPath: "/etc/podslo/network-plugin-profile", ReadOnly: true},
		{Name: "slos", MountPath: "/etc/podslo/slos", ReadOnly: true},
	}, c.VolumeMounts)
	// The exporter evaluates the SLOs the rules hold: the values' class
	// threshold and extra SLO, and a recording rule for each of its SLOs.
	slos := into[corev1.ConfigMap](t, objs.get(t, "ConfigMap", "slo-podslo-exporter-slos"))
	spec, err := podsloalerts.Default()
	require.NoError(t, err)
	spec, err = spec.WithValues([]byte(slos.Data["values.yaml"]))
	require.NoError(t, err, slos.Data["values.yaml"])
	evaluated := map[string]bool{}
	for i, slo := range spec.SLOs {
		evaluated[slo.Name] = true
		if slo.Name == "sandbox_creation_latency" {
			assert.Equal(t, 20.0, spec.SLOs[i].ThresholdFor(map[string]string{"runtime_class": "kata"}))
		}
	}
	assert.True(t, evaluated["kata_sandbox_creation_latency"])
	recorded := map[string]bool{}
	period := regexp.MustCompile(`^[a-z_]+:podslo_([a-z0-9_]+)_errors:ratio_rate30d$`)
	groups, _, err := unstructured.NestedSlice(objs.get(t, "PrometheusRule", "slo-podslo-rules").Object, "spec", "groups")
	require.NoError(t, err)
	for _, g := range groups {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			if m := period.FindStringSubmatch(fmt.Sprint(r.(map[string]any)["record"])); m != nil {
				recorded[m[1]] = true
			}
		}
	}
	assert.Equal(t, recorded, evaluated, "the SLOs of the rules are those the exporter evaluates")
	profile := into[corev1.ConfigMap](t, objs.get(t, "ConfigMap", "slo-podslo-exporter-network-plugin-profile"))
	assert.Equal(t, "maxVersion: \"1.8\"\nname: example-cni\nunimplemented:\n- egress\n", profile.Data["profile.yaml"])
	// Basic auth covers the probes' paths too.
	assert.Nil(t, c.ReadinessProbe.HTTPGet)
	assert.Equal(t, "metrics", c.ReadinessProbe.TCPSocket.Port.StrVal)
	assertLockedDown(t, pod, c)

	ds := into[appsv1.DaemonSet](t, objs.get(t, "DaemonSet", "slo-podslo-agent"))
	apod := ds.Spec.Template.Spec
	ac := apod.Containers[0]
	assert.Equal(t, []string{"agent", "--listen-address=:8081", "--log-format=json", "--log-level=debug", "--web.config.file=/etc/podslo/web/web-config.yml"}, ac.Args)
	assert.Equal(t, "slo-podslo-agent", apod.ServiceAccountName)
	assert.Equal(t, "system-node-critical", apod.PriorityClassName)
	assert.Equal(t, []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, apod.Tolerations, "every node's pods need the agent")
	assert.Equal(t, "spec.nodeName", env(ac, "NODE_NAME").ValueFrom.FieldRef.FieldPath)
	// 90% of 300M.
	assert.Equal(t, &corev1.EnvVar{Name: "GOMEMLIMIT", Value: "270000000"}, env(ac, "GOMEMLIMIT"))
	assertLockedDown(t, apod, ac)

	secret := into[corev1.Secret](t, objs.get(t, "Secret", "slo-podslo-web-config"))
	webConfig := map[string]any{}
	require.NoError(t, utilyaml.Unmarshal([]byte(secret.StringData["web-config.yml"]), &webConfig))
	assert.Equal(t, map[string]any{
		"tls_server_config": map[string]any{"cert_file": "/etc/podslo/tls/tls.crt", "key_file": "/etc/podslo/tls/tls.key", "min_version": "TLS13"},
		"basic_auth_users":  map[string]any{"prometheus": "$2y$10$nNZ8cZFzG1mRixNbb0Gv3uNT0CLMpgp6bULYBgt0c3p/jkGL9Vg7y"},
	}, webConfig)

	wantScrape := map[string]any{
		"scheme": "https",
		"tlsConfig": map[string]any{
			"ca":         map[string]any{"secret": map[string]any{"name": "slo-tls", "key": "ca.crt"}},
			"serverName": "slo-podslo-exporter.obs.svc",
		},
		"basicAuth": map[string]any{
			"username": map[string]any{"name": "slo-scrape", "key": "username"},
			"password": map[string]any{"name": "slo-scrape", "key": "password"},
		},
	}
	for _, m := range []struct{ kind, name, field string }{{"ServiceMonitor", "slo-podslo-exporter", "endpoints"}, {"PodMonitor", "slo-podslo-agent", "podMetricsEndpoints"}} {
		mon := objs.get(t, m.kind, m.name)
		assert.Equal(t, "kube-prometheus-stack", mon.GetLabels()["release"], m.kind)
		ep := endpoint(t, mon, m.field)
		for k, v := range wantScrape {
			assert.Equal(t, v, ep[k], "%s %s", m.kind, k)
		}
		ns, _, _ := unstructured.NestedStringSlice(mon.Object, "spec", "namespaceSelector", "matchNames")
		assert.Equal(t, []string{"obs"}, ns, m.kind)
	}

	policy := objs.get(t, "ValidatingAdmissionPolicy", "slo-podslo-agent-node-restriction")
	conds, _, _ := unstructured.NestedSlice(policy.Object, "spec", "matchConditions")
	require.Len(t, conds, 1)
	assert.Equal(t, `request.userInfo.username == "system:serviceaccount:obs:slo-podslo-agent"`, conds[0].(map[string]any)["expression"])
	binding := objs.get(t, "ValidatingAdmissionPolicyBinding", "slo-podslo-agent-node-restriction")
	name, _, _ := unstructured.NestedString(binding.Object, "spec", "policyName")
	assert.Equal(t, policy.GetName(), name)

	for _, kind := range []string{"ClusterRoleBinding"} {
		for _, n := range []string{"slo-podslo-exporter", "slo-podslo-agent"} {
			subjects, _, _ := unstructured.NestedSlice(objs.get(t, kind, n).Object, "subjects")
			assert.Equal(t, []any{map[string]any{"kind": "ServiceAccount", "name": n, "namespace": "obs"}}, subjects)
		}
	}
}

// TestGOMEMLIMIT: 90% of the memory limit, for every suffix the schema
// admits, and no GOMEMLIMIT without a limit.
func TestGOMEMLIMIT(t *testing.T) {
	for limit, want := range map[string]string{
		"512Mi": "483183820", "1Gi": "966367641", "0.5Gi": "483183820", "1000": "900",
		"64k": "57600", "1M": "900000", "2G": "1800000000", "1Ti": "989560464998", "100Ki": "92160",
	} {
		t.Run(limit, func(t *testing.T) {
			objs := defaults.render(t, "--set-string", "exporter.resources.limits.memory="+limit)
			c := into[appsv1.StatefulSet](t, objs.get(t, "StatefulSet", "podslo-exporter")).Spec.Template.Spec.Containers[0]
			assert.Equal(t, &corev1.EnvVar{Name: "GOMEMLIMIT", Value: want}, env(c, "GOMEMLIMIT"))
		})
	}
	objs := defaults.render(t, "--set", "exporter.resources.limits=null")
	c := into[appsv1.StatefulSet](t, objs.get(t, "StatefulSet", "podslo-exporter")).Spec.Template.Spec.Containers[0]
	assert.Nil(t, env(c, "GOMEMLIMIT"), "no limit, no GOMEMLIMIT")
}

// TestRefused: values that would deploy something broken or silently open
// fail the rendering, with an error naming the value. Each case in
// testdata/invalid-*.yaml sits next to its expected error (.err).
func TestRefused(t *testing.T) {
	files, err := filepath.Glob("testdata/invalid-*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".yaml"), func(t *testing.T) {
			want, err := os.ReadFile(strings.TrimSuffix(f, ".yaml") + ".err")
			require.NoError(t, err)
			args := []string{"--values", f}
			// A first line "# kube-version: X" renders for that cluster.
			raw, err := os.ReadFile(f)
			require.NoError(t, err)
			if m := regexp.MustCompile(`^# kube-version: (\S+)`).FindSubmatch(raw); m != nil {
				args = append(args, "--kube-version", string(m[1]))
			}
			_, err = Template(helm(t), "podslo", "monitoring", args...)
			require.Error(t, err)
			for _, line := range strings.Split(strings.TrimSpace(string(want)), "\n") {
				assert.Contains(t, err.Error(), line)
			}
		})
	}
}

// TestKubernetesVersions: the chart installs on the minors the version
// matrix ran (docs/compatibility.md), the agent with its node restriction
// on each, and refuses the others.
func TestKubernetesVersions(t *testing.T) {
	for _, v := range []string{"1.34.0", "1.35.4", "1.36.3", "1.37.2"} {
		objs := defaults.render(t, "--kube-version", v, "--set", "agent.enabled=true")
		objs.get(t, "ValidatingAdmissionPolicy", "podslo-agent-node-restriction")
	}
	for _, v := range []string{"1.33.13", "1.38.0"} {
		_, err := Template(helm(t), "podslo", "monitoring", "--kube-version", v)
		assert.ErrorContains(t, err, "chart requires kubeVersion: >=1.34.0-0 <1.38.0-0 which is incompatible with Kubernetes v"+v)
	}
}

// TestDeployIsGenerated: deploy/ is what `make manifests` writes from the
// chart, so the kustomize bases and the chart cannot drift.
func TestDeployIsGenerated(t *testing.T) {
	bin := helm(t)
	var paths []string
	for _, f := range DeployFiles {
		paths = append(paths, f.Path)
		want, err := RenderDeploy(bin, f)
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join(Root(), f.Path))
		require.NoError(t, err)
		if !bytes.Equal(want, got) {
			t.Errorf("%s is stale: run `make manifests` and commit the result", f.Path)
		}
	}
	// Every manifest of the two bases is generated; deploy/kwok is the
	// demo's, not the chart's.
	for _, dir := range []string{"deploy/exporter", "deploy/agent"} {
		files, err := filepath.Glob(filepath.Join(Root(), dir, "*.yaml"))
		require.NoError(t, err)
		for _, f := range files {
			rel, _ := filepath.Rel(Root(), f)
			if filepath.Base(f) != "kustomization.yaml" {
				assert.Contains(t, paths, rel, "not generated from the chart")
			}
		}
	}
}
