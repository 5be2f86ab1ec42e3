package charts

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/podslo/podslo/internal/testenv"
)

// restricted is the strictest Pod Security Standard, enforced on every
// namespace the chart is installed into here.
var restricted = map[string]string{"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "restricted"}

// TestOnAPIServer installs the chart's objects on a real kube-apiserver
// v1.36.3 with the Prometheus Operator's CRDs. One API server serves the
// subtests, each in namespaces of its own: starting one costs seconds of
// CPU.
func TestOnAPIServer(t *testing.T) {
	env := testenv.Start(t)
	crds := testenv.PrometheusOperatorCRDs(t)
	// The kinds the chart renders (the mixin's PrometheusRules included).
	env.InstallCRDs(t,
		filepath.Join(crds, "monitoring.coreos.com_servicemonitors.yaml"),
		filepath.Join(crds, "monitoring.coreos.com_podmonitors.yaml"),
		filepath.Join(crds, "monitoring.coreos.com_prometheusrules.yaml"))
	a := newApplier(t, env.Config)

	t.Run("server-side apply", func(t *testing.T) { testServerSideApply(t, env, a) })
	t.Run("admission policy", func(t *testing.T) { testAdmissionPolicy(t, env, a) })
	t.Run("exporter RBAC", func(t *testing.T) { testExporterRBAC(t, env, a) })
	t.Run("exporter NetworkPolicy values", func(t *testing.T) { testExporterNetworkPolicies(t, env, a) })
	t.Run("install modes", func(t *testing.T) { testInstallModes(t, env, a) })
	t.Run("namespaced exporter RBAC", func(t *testing.T) { testNamespacedRBAC(t, env, a) })
	t.Run("autosharding RBAC", func(t *testing.T) { testAutoshardingRBAC(t, env, a) })
	t.Run("histogram label RBAC", func(t *testing.T) { testHistogramLabelRBAC(t, env, a) })
}

// applier applies unstructured objects with server-side apply, as
// `kubectl apply --server-side` does, and records the API server's
// warnings.
type applier struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper

	mu       sync.Mutex
	warnings []string
}

func newApplier(t *testing.T, cfg *rest.Config) *applier {
	t.Helper()
	a := &applier{}
	cfg = rest.CopyConfig(cfg)
	cfg.WarningHandler = a
	var err error
	a.dyn, err = dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	require.NoError(t, err)
	// Made after the CRDs are served, so it knows their kinds.
	a.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	return a
}

func (a *applier) HandleWarningHeader(_ int, _ string, text string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.warnings = append(a.warnings, text)
}

// takeWarnings returns the warnings since the last call.
func (a *applier) takeWarnings() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	w := a.warnings
	a.warnings = nil
	return w
}

// apply applies o; dryRun asks the API server to run every admission step
// and persist nothing (--dry-run=server).
func (a *applier) apply(o *unstructured.Unstructured, dryRun bool) error {
	gvk := o.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("%s %s: %w", gvk.Kind, o.GetName(), err)
	}
	var r dynamic.ResourceInterface = a.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		r = a.dyn.Resource(m.Resource).Namespace(o.GetNamespace())
	}
	opts := metav1.ApplyOptions{FieldManager: "podslo-chart-test", Force: true}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	if _, err := r.Apply(context.Background(), o.GetName(), o, opts); err != nil {
		return fmt.Errorf("%s %s/%s: %w", gvk.Kind, o.GetNamespace(), o.GetName(), err)
	}
	return nil
}

func ensureNamespace(t *testing.T, c kubernetes.Interface, name string, labels map[string]string) {
	t.Helper()
	_, err := c.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}

// podOf is the pod a workload's controller would create from its template
// on node, named name.
func podOf(t *testing.T, o *unstructured.Unstructured, name, node string) *corev1.Pod {
	t.Helper()
	var tmpl corev1.PodTemplateSpec
	switch o.GetKind() {
	case "StatefulSet":
		sts := into[appsv1.StatefulSet](t, o)
		tmpl = sts.Spec.Template
		// The StatefulSet controller adds each claim template's volume.
		for _, vct := range sts.Spec.VolumeClaimTemplates {
			tmpl.Spec.Volumes = append(tmpl.Spec.Volumes, corev1.Volume{Name: vct.Name, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: vct.Name + "-" + sts.Name + "-0"},
			}})
		}
	case "DaemonSet":
		tmpl = into[appsv1.DaemonSet](t, o).Spec.Template
	default:
		t.Fatalf("no pod template in a %s", o.GetKind())
	}
	pod := &corev1.Pod{ObjectMeta: tmpl.ObjectMeta, Spec: tmpl.Spec}
	pod.Name, pod.Namespace, pod.Spec.NodeName = name, o.GetNamespace(), node
	return pod
}

// testServerSideApply applies every rendered object with
// --dry-run=server, after the namespaces exist and enforce the restricted
// Pod Security Standard; then the pods the workloads would create, which
// is where Pod Security and priority class admission decide.
func testServerSideApply(t *testing.T, env *testenv.Env, a *applier) {
	ctx := context.Background()
	for _, r := range []rendering{
		defaults,
		{release: "podslo", namespace: "podslo", args: []string{"--set", "agent.enabled=true"}},
		custom,
	} {
		t.Run(r.release+" in "+r.namespace, func(t *testing.T) {
			objs := r.render(t)
			ensureNamespace(t, env.Client, r.namespace, restricted)
			// Namespaces the chart writes to besides its own (the agent
			// probes' NetworkPolicies).
			for _, o := range objs {
				if o.GetNamespace() != "" && o.GetNamespace() != r.namespace {
					ensureNamespace(t, env.Client, o.GetNamespace(), nil)
				}
			}
			a.takeWarnings()
			for _, o := range objs {
				assert.NoError(t, a.apply(o, true))
				assert.Empty(t, a.takeWarnings(), "%s %s", o.GetKind(), o.GetName())
			}
			// The pods need their service accounts, for real.
			for _, o := range objs {
				if o.GetKind() == "ServiceAccount" {
					require.NoError(t, a.apply(o, false))
				}
			}
			for _, o := range objs {
				if o.GetKind() != "StatefulSet" && o.GetKind() != "DaemonSet" {
					continue
				}
				pod := podOf(t, o, o.GetName()+"-0", "")
				_, err := env.Client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				assert.NoError(t, err, "a pod of %s %s", o.GetKind(), o.GetName())
				assert.Empty(t, a.takeWarnings(), "a pod of %s %s", o.GetKind(), o.GetName())
			}
		})
	}
}

// testAdmissionPolicy installs the chart for release "slo" in namespace
// "obs" for real and writes pod status as the agent would, with the token
// the kubelet would give the agent's pod: the policy rendered for that
// namespace and account lets it write on its own node only.
func testAdmissionPolicy(t *testing.T, env *testenv.Env, a *applier) {
	ctx := context.Background()
	admin := env.Client
	r := rendering{release: "slo", namespace: "obs", args: []string{"--set", "agent.enabled=true"}}
	objs := r.render(t)
	ensureNamespace(t, admin, r.namespace, restricted)
	ensureNamespace(t, admin, "apps", nil)
	for _, o := range objs {
		require.NoError(t, a.apply(o, false))
	}
	policy := objs.get(t, "ValidatingAdmissionPolicy", "slo-podslo-agent-node-restriction").GetName()
	testenv.CreateNode(t, admin, "node-a")
	testenv.CreateNode(t, admin, "node-b")

	// The agent's pod on node-a, as the DaemonSet would create it.
	agentPod, err := admin.CoreV1().Pods(r.namespace).Create(ctx, podOf(t, objs.get(t, "DaemonSet", "slo-podslo-agent"), "slo-podslo-agent-a", "node-a"), metav1.CreateOptions{})
	require.NoError(t, err)
	account := agentPod.Spec.ServiceAccountName
	require.Equal(t, "slo-podslo-agent", account)
	app := func(name, node string) {
		_, err := admin.CoreV1().Pods("apps").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "apps"},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	app("web-a", "node-a")
	app("web-b", "node-b")
	app("probe-b", "node-b")

	asAgentA := testenv.ClientFor(t, env.ServiceAccountConfig(t, r.namespace, account, agentPod))
	review, err := asAgentA.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Equal(t, "system:serviceaccount:obs:slo-podslo-agent", review.Status.UserInfo.Username)
	require.Equal(t, authenticationv1.ExtraValue{"node-a"}, review.Status.UserInfo.Extra["authentication.kubernetes.io/node-name"])

	// Policies take effect when the API server's policy informer has them:
	// wait until a known-bad write is refused, on a pod kept for this.
	require.Eventually(t, func() bool {
		return apierrors.IsForbidden(testenv.PatchStableCondition(asAgentA, "apps", "probe-b"))
	}, 30*time.Second, 50*time.Millisecond, "the admission policy never took effect")

	err = testenv.PatchStableCondition(asAgentA, "apps", "web-b")
	assert.True(t, apierrors.IsForbidden(err), "another node's pod: %v", err)
	assert.EqualError(t, err, `pods "web-b" is forbidden: ValidatingAdmissionPolicy '`+policy+`' with binding '`+policy+`' denied request: `+
		`the podslo agent of node "node-a" may not write the status of pod apps/web-b on node "node-b": an agent writes to pods on its own node only, and its token must be bound to its own pod`)

	assert.NoError(t, testenv.PatchStableCondition(asAgentA, "apps", "web-a"), "its own node's pod")
	p, err := admin.CoreV1().Pods("apps").Get(ctx, "web-a", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Condition(t, func() bool {
		for _, c := range p.Status.Conditions {
			if c.Type == "podslo.io/Stable" && c.Reason == "NotReady" {
				return true
			}
		}
		return false
	}, "the write landed: %v", p.Status.Conditions)

	unbound := testenv.ClientFor(t, env.ServiceAccountConfig(t, r.namespace, account, nil))
	err = testenv.PatchStableCondition(unbound, "apps", "web-a")
	assert.True(t, apierrors.IsForbidden(err), "a token without a node: %v", err)
	assert.NoError(t, testenv.PatchStableCondition(admin, "apps", "web-b"), "the policy binds the agent only")
}

// testExporterRBAC runs the exporter, with the chart's arguments, as the
// chart's service account of a release in a namespace of its own: it must
// become ready (every informer listed and watched what it needs), and every
// write the API server is asked for with that token must be refused.
func testExporterRBAC(t *testing.T, env *testenv.Env, a *applier) {
	ctx := context.Background()
	admin := env.Client
	r := rendering{release: "reader", namespace: "rbac"}
	objs := r.render(t)
	ensureNamespace(t, admin, r.namespace, nil)
	for _, kind := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding"} {
		require.NoError(t, a.apply(objs.get(t, kind, "reader-podslo-exporter"), false))
	}
	sts := into[appsv1.StatefulSet](t, objs.get(t, "StatefulSet", "reader-podslo-exporter"))
	cfg := env.ServiceAccountConfig(t, r.namespace, sts.Spec.Template.Spec.ServiceAccountName, nil)

	// What the exporter reads, and one of each to write to.
	ensureNamespace(t, admin, "apps", nil)
	pod, err := admin.CoreV1().Pods("apps").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "rbac-web", Namespace: "apps"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	pvc, err := admin.CoreV1().PersistentVolumeClaims("apps").Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "rbac-data", Namespace: "apps"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	event, err := admin.CoreV1().Events("apps").Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{Name: "rbac-event", Namespace: "apps"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "apps", Name: "rbac-web"}, Reason: "FailedMount", Message: "x", Type: corev1.EventTypeWarning,
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	sc, err := admin.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "rbac-fast"}, Provisioner: "example.com/fast"}, metav1.CreateOptions{})
	require.NoError(t, err)

	t.Run("the exporter syncs", func(t *testing.T) {
		runExporter(t, env, cfg, sts.Spec.Template.Spec.Containers[0].Args)
	})

	sa := testenv.ClientFor(t, cfg)
	t.Run("reads", func(t *testing.T) {
		for name, read := range map[string]func() error{
			"list pods":  func() error { _, err := sa.CoreV1().Pods("").List(ctx, metav1.ListOptions{}); return err },
			"watch pods": func() error { return watchOnce(sa.CoreV1().Pods("").Watch(ctx, metav1.ListOptions{})) },
			"get pod":    func() error { _, err := sa.CoreV1().Pods("apps").Get(ctx, pod.Name, metav1.GetOptions{}); return err },
			"list pvcs": func() error {
				_, err := sa.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
				return err
			},
			"watch pvcs": func() error {
				return watchOnce(sa.CoreV1().PersistentVolumeClaims("").Watch(ctx, metav1.ListOptions{}))
			},
			"list events":         func() error { _, err := sa.CoreV1().Events("").List(ctx, metav1.ListOptions{}); return err },
			"watch events":        func() error { return watchOnce(sa.CoreV1().Events("").Watch(ctx, metav1.ListOptions{})) },
			"list storageclasses": func() error { _, err := sa.StorageV1().StorageClasses().List(ctx, metav1.ListOptions{}); return err },
			"watch storageclasses": func() error {
				return watchOnce(sa.StorageV1().StorageClasses().Watch(ctx, metav1.ListOptions{}))
			},
			"list networkpolicies": func() error {
				_, err := sa.NetworkingV1().NetworkPolicies("").List(ctx, metav1.ListOptions{})
				return err
			},
			"watch networkpolicies": func() error {
				return watchOnce(sa.NetworkingV1().NetworkPolicies("").Watch(ctx, metav1.ListOptions{}))
			},
		} {
			assert.NoError(t, read(), name)
		}
	})

	t.Run("every write is refused", func(t *testing.T) {
		merge := types.MergePatchType
		label := []byte(`{"metadata":{"labels":{"x":"y"}}}`)
		all := metav1.ListOptions{}
		writes := map[string]func() error{
			"create pod": func() error {
				_, err := sa.CoreV1().Pods("apps").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "new"}, Spec: pod.Spec}, metav1.CreateOptions{})
				return err
			},
			"update pod": func() error { _, err := sa.CoreV1().Pods("apps").Update(ctx, pod, metav1.UpdateOptions{}); return err },
			"patch pod": func() error {
				_, err := sa.CoreV1().Pods("apps").Patch(ctx, pod.Name, merge, label, metav1.PatchOptions{})
				return err
			},
			"delete pod":  func() error { return sa.CoreV1().Pods("apps").Delete(ctx, pod.Name, metav1.DeleteOptions{}) },
			"delete pods": func() error { return sa.CoreV1().Pods("apps").DeleteCollection(ctx, metav1.DeleteOptions{}, all) },
			"update pods/status": func() error {
				_, err := sa.CoreV1().Pods("apps").UpdateStatus(ctx, pod, metav1.UpdateOptions{})
				return err
			},
			"patch pods/status": func() error { return testenv.PatchStableCondition(sa, "apps", pod.Name) },
			"evict pod": func() error {
				return sa.CoreV1().Pods("apps").EvictV1(ctx, &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: "apps"}})
			},
			"create pvc": func() error {
				_, err := sa.CoreV1().PersistentVolumeClaims("apps").Create(ctx, renamed(pvc.DeepCopy(), "new"), metav1.CreateOptions{})
				return err
			},
			"update pvc": func() error {
				_, err := sa.CoreV1().PersistentVolumeClaims("apps").Update(ctx, pvc, metav1.UpdateOptions{})
				return err
			},
			"patch pvc": func() error {
				_, err := sa.CoreV1().PersistentVolumeClaims("apps").Patch(ctx, pvc.Name, merge, label, metav1.PatchOptions{})
				return err
			},
			"delete pvc": func() error {
				return sa.CoreV1().PersistentVolumeClaims("apps").Delete(ctx, pvc.Name, metav1.DeleteOptions{})
			},
			"create event": func() error {
				_, err := sa.CoreV1().Events("apps").Create(ctx, renamed(event.DeepCopy(), "new"), metav1.CreateOptions{})
				return err
			},
			"update event": func() error {
				_, err := sa.CoreV1().Events("apps").Update(ctx, event, metav1.UpdateOptions{})
				return err
			},
			"patch event": func() error {
				_, err := sa.CoreV1().Events("apps").Patch(ctx, event.Name, merge, label, metav1.PatchOptions{})
				return err
			},
			"delete event": func() error { return sa.CoreV1().Events("apps").Delete(ctx, event.Name, metav1.DeleteOptions{}) },
			"create storageclass": func() error {
				_, err := sa.StorageV1().StorageClasses().Create(ctx, renamed(sc.DeepCopy(), "new"), metav1.CreateOptions{})
				return err
			},
			"update storageclass": func() error {
				_, err := sa.StorageV1().StorageClasses().Update(ctx, sc, metav1.UpdateOptions{})
				return err
			},
			"patch storageclass": func() error {
				_, err := sa.StorageV1().StorageClasses().Patch(ctx, sc.Name, merge, label, metav1.PatchOptions{})
				return err
			},
			"delete storageclass": func() error { return sa.StorageV1().StorageClasses().Delete(ctx, sc.Name, metav1.DeleteOptions{}) },
			"create networkpolicy": func() error {
				_, err := sa.NetworkingV1().NetworkPolicies("apps").Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "new"}}, metav1.CreateOptions{})
				return err
			},
			"delete networkpolicies": func() error {
				return sa.NetworkingV1().NetworkPolicies("apps").DeleteCollection(ctx, metav1.DeleteOptions{}, all)
			},
			"list secrets":    func() error { _, err := sa.CoreV1().Secrets("").List(ctx, all); return err },
			"list configmaps": func() error { _, err := sa.CoreV1().ConfigMaps("").List(ctx, all); return err },
			"list nodes":      func() error { _, err := sa.CoreV1().Nodes().List(ctx, all); return err },
			"create token": func() error {
				_, err := sa.CoreV1().ServiceAccounts(r.namespace).CreateToken(ctx, "default", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
				return err
			},
		}
		for name, write := range writes {
			err := write()
			assert.True(t, apierrors.IsForbidden(err), "%s must be refused: %v", name, err)
		}
		// Nothing changed.
		_, err := admin.CoreV1().Pods("apps").Get(ctx, pod.Name, metav1.GetOptions{})
		assert.NoError(t, err)
	})
}

// renamed makes a copy of a stored object into a new object.
func renamed[T metav1.Object](o T, name string) T {
	o.SetName(name)
	o.SetResourceVersion("")
	o.SetUID("")
	return o
}

// watchOnce opens a watch and closes it: RBAC decides when it opens.
func watchOnce(w interface{ Stop() }, err error) error {
	if err != nil {
		return err
	}
	w.Stop()
	return nil
}

// runExporter runs `podslo exporter` with the chart's arguments, on a
// local address and state directory, authenticated by cfg's token, and
// waits until /readyz answers 200: its caches synced. It returns the
// exporter's address.
func runExporter(t *testing.T, env *testenv.Env, cfg *rest.Config, args []string) string {
	t.Helper()
	return startExporter(t, env, cfg, args).addr
}

// runningExporter is an exporter process that became ready.
type runningExporter struct {
	addr string
	// done is closed when the process has exited.
	done <-chan struct{}
	logs *testenv.Output
}

// startExporter is runExporter, for a test that watches the process too.
func startExporter(t *testing.T, env *testenv.Env, cfg *rest.Config, args []string) runningExporter {
	t.Helper()
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["exporter"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["exporter"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "exporter"}
	kc.CurrentContext = "exporter"
	require.NoError(t, clientcmd.WriteToFile(*kc, kubeconfig))

	addr := freeAddress(t)
	// The chart's flags, then the local ones, which win. The SLO values the
	// chart mounts are its values.yaml's where the test sets none of its
	// own (TestCustom checks what it mounts when they are set).
	require.Contains(t, args, "--slos-values=/etc/podslo/slos/values.yaml")
	local := []string{"--listen-address=" + addr, "--state-dir=" + t.TempDir(), "--kubeconfig=" + kubeconfig, "--slos-values=" + filepath.Join(ChartDir(), "values.yaml")}
	cmd := exec.Command(testenv.PodsloBinary(t), append(args, local...)...)
	logs, done := testenv.StartCommand(t, "the exporter", cmd)
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		select {
		case <-done:
			assert.Fail(c, "the exporter exited")
			return
		default:
		}
		resp, err := http.Get("http://" + addr + "/readyz")
		if !assert.NoError(c, err) {
			return
		}
		resp.Body.Close()
		assert.Equal(c, http.StatusOK, resp.StatusCode)
	}, 60*time.Second, 50*time.Millisecond, "the exporter never became ready with the chart's service account")
	return runningExporter{addr: addr, done: done, logs: logs}
}

// freeAddress returns a 127.0.0.1 address with a port free a moment ago.
func freeAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}
