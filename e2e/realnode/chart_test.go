package realnode_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/podslo/podslo/charts"
	"github.com/podslo/podslo/internal/realnode"
	"github.com/podslo/podslo/internal/testenv"
)

// The release, its namespace and the PV's StorageClass: none of them the
// chart's defaults, so that nothing passes by a default name.
const (
	chartRelease   = "obs"
	chartNamespace = "slo-system"
	chartClass     = "podslo-hostpath"
)

// TestChartOnARealNode installs charts/podslo with `helm install`, with the
// agent, on a real node, from the image `make image` writes, without the
// Prometheus Operator's CRDs, with the README's command for such a
// cluster, and scrapes the exporter over the pod network; `helm uninstall`
// then removes the release and keeps the state's claim, as the release
// notes say.
func TestChartOnARealNode(t *testing.T) {
	layout := filepath.Join(charts.Root(), "bin", "image")
	if _, err := os.Stat(filepath.Join(layout, "index.json")); err != nil {
		t.Fatalf("no image layout in %s: run `make image` first (make test does): %v", layout, err)
	}
	helm, err := charts.Helm()
	require.NoError(t, err)
	version, err := testenv.KubernetesVersion()
	require.NoError(t, err)

	began := time.Now()
	// A cluster's API server mounts each pod's service account token;
	// envtest's does not, unless its ServiceAccount admission plugin runs.
	s := startSuite(t, testenv.APIServerFlagUnset("disable-admission-plugins"))
	node := s.node
	ctx := context.Background()
	c := node.Client

	// make clusterbin stamps the control plane: unstamped, kube-apiserver
	// says v0.0.0-master, which `helm install` refuses against the
	// chart's kubeVersion.
	server, err := c.Discovery().ServerVersion()
	require.NoError(t, err)
	require.Equal(t, version, server.GitVersion, "kube-apiserver's version (an old unstamped cache: run `make clusterbin`)")

	// 1. The image, as `make image` built it, in the node's containerd.
	require.NoError(t, node.ImportOCILayout(layout))

	createStateVolume(t, node)

	// 2. The chart, as the README installs it on a cluster without the
	// Prometheus Operator's CRDs, with this node's own values.
	rel := &installedRelease{}
	// Registered after the node's cleanups, so it runs before them: the
	// controllers would re-create the pods the node's teardown deletes.
	t.Cleanup(func() { uninstallChart(t, node, helm, rel) })
	out, err := charts.Run(helm, "install", chartRelease, charts.ChartDir(), "--namespace", chartNamespace, "--create-namespace",
		"--kubeconfig", node.Kubeconfig, "--output", "json",
		"--set", "exporter.serviceMonitor.enabled=false,agent.podMonitor.enabled=false",
		"--set", "agent.enabled=true",
		// No registry is reachable: the imported image or nothing.
		"--set", "image.pullPolicy=Never",
		"--set", "exporter.persistence.storageClassName="+chartClass)
	if !chartSupports(t) {
		// make test-versions runs older minors than the chart claims.
		refusedByKubeVersion(t, err, out)
		return
	}
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(out, rel), "helm install's output: %s", out)
	require.Equal(t, "deployed", rel.Info.Status)
	objs := decodeAll(t, []byte(rel.Manifest))
	rel.objects = objs
	kinds := map[string]int{}
	for _, o := range objs {
		require.NotEqual(t, "monitoring.coreos.com", o.GroupVersionKind().Group,
			"%s %s rendered on a cluster without the Prometheus Operator's CRDs", o.GetKind(), o.GetName())
		kinds[o.GetKind()]++
	}
	for _, k := range []string{"StatefulSet", "DaemonSet", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"} {
		require.Equal(t, 1, kinds[k], "installed %s objects", k)
	}
	// The notes say which claim holds the state and that `helm
	// uninstall` keeps it; uninstallChart checks that it does.
	claim := "state-" + chartRelease + "-podslo-exporter-0"
	assert.Contains(t, rel.Info.Notes, "the PersistentVolumeClaim "+claim+".\n`helm uninstall` keeps it")
	m := regexpNotesSelector.FindStringSubmatch(rel.Info.Notes)
	require.NotNil(t, m, "the notes' command that starts over:\n%s", rel.Info.Notes)
	rel.keptSelector = m[1]
	t.Logf("chart installed %v after the start (%d objects); notes:\n%s", time.Since(began).Round(time.Millisecond), len(objs), rel.Info.Notes)

	// 3. The claim bound to the PV, the exporter and the agent Ready.
	require.Eventually(t, func() bool {
		pvc, err := c.CoreV1().PersistentVolumeClaims(chartNamespace).Get(ctx, claim, metav1.GetOptions{})
		return err == nil && pvc.Status.Phase == corev1.ClaimBound && pvc.Spec.VolumeName == "podslo-state"
	}, time.Minute, 100*time.Millisecond, "claim %s never bound to the PV podslo-state", claim)
	exporterName, agentName := chartRelease+"-podslo-exporter", chartRelease+"-podslo-agent"
	if !assertEventually(t, func() bool {
		sts, err := c.AppsV1().StatefulSets(chartNamespace).Get(ctx, exporterName, metav1.GetOptions{})
		if err != nil || sts.Status.ReadyReplicas != 1 {
			return false
		}
		ds, err := c.AppsV1().DaemonSets(chartNamespace).Get(ctx, agentName, metav1.GetOptions{})
		return err == nil && ds.Status.DesiredNumberScheduled == 1 && ds.Status.NumberReady == 1
	}, 30*time.Second) {
		logChartPods(t, node)
		t.Fatal("the exporter StatefulSet and the agent DaemonSet never became Ready")
	}
	t.Logf("exporter and agent Ready %v after the start", time.Since(began).Round(time.Millisecond))

	// 4. /metrics over the pod network, from this process through the
	// node's bridge, on the exporter pod's own IP.
	pod, err := c.CoreV1().Pods(chartNamespace).Get(ctx, exporterName+"-0", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, pod.Status.PodIP)
	url := "http://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(8080))
	fams := scrape(t, url)
	info := fams["podslo_build_info"]
	require.NotNil(t, info, "podslo_build_info")
	require.Len(t, info.GetMetric(), 1)
	assert.Equal(t, releaseVersion(t), label(info.GetMetric()[0], "version"), "the image's podslo version, VERSION")

	// A pod of a RuntimeClass of its own, created after the exporter runs:
	// its sandbox creation is the only one in that class, and the chart's
	// exporter records it as the pod's own conditions say.
	_, err = c.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "runc"}, Handler: "runc"}, metav1.CreateOptions{})
	require.NoError(t, err)
	// The ServiceAccount admission plugin refuses a pod until its
	// namespace's default account exists, which the controller-manager
	// creates.
	require.Eventually(t, func() bool {
		_, err := c.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "no default service account in %s", ns)
	waitCurrent(t, url)
	s.createPod("probe", inClass("runc"))
	var count map[string]uint64
	var sum map[string]float64
	require.Eventually(t, func() bool {
		var ready int
		count, sum, _, ready = s.tr.creations()
		return ready == 1
	}, time.Minute, 100*time.Millisecond, "the pod's sandbox never became ready")
	require.Equal(t, map[string]uint64{"runc": 1}, count)
	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		fams := scrape(ct, url)
		gotCount, gotSum := histogramByClass(fams["podslo_sandbox_creation_duration_seconds"])
		assert.Equal(ct, count["runc"], gotCount["runc"])
		// The chart's exporter runs with the default --watch-time-tolerance
		// (250ms): on a loaded machine the sandbox's update may arrive
		// later than that after its second, and then it is rightly
		// measured in seconds. Either way it says which, and agrees with
		// the pod.
		precision := counterBy(fams["podslo_observations_total"], "sli", "precision")
		switch {
		case precision["sandbox_creation,millisecond"] == 1:
			assertSumsInMs(ct, count, s.tr.creationsInMs(), gotSum, "sandbox creation")
		case precision["sandbox_creation,second"] == 1:
			assert.Equal(ct, sum["runc"], gotSum["runc"], "sandbox creation in seconds")
		default:
			assert.Fail(ct, "no sandbox creation by precision", "%v", precision)
		}
	}, 30*time.Second, 100*time.Millisecond, "the chart's exporter's sandbox creation differs from the pod's conditions")
	t.Logf("sandbox creation of the runc pod %v s (%.3f s by the test's watch), scraped over the pod network at %s; %v after the start",
		sum["runc"], s.tr.creationsInMs()["runc"], url, time.Since(began).Round(time.Millisecond))

	// 5. The agent writes podslo.io/Stable on the pod (Ready, no
	// minReadySeconds, no restart: True at once), and the exporter observes
	// the pod's stabilization.
	require.Eventually(t, func() bool {
		p, err := c.CoreV1().Pods(ns).Get(ctx, "probe", metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == "podslo.io/Stable" {
				return cond.Status == corev1.ConditionTrue && cond.Reason == "MinReadySecondsElapsed"
			}
		}
		return false
	}, 30*time.Second, 100*time.Millisecond, "the agent never wrote podslo.io/Stable True on the pod")
	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		gotCount, _ := histogramByClass(scrape(ct, url)["podslo_stabilization_duration_seconds"])
		assert.Equal(ct, uint64(1), gotCount["runc"])
	}, 30*time.Second, 100*time.Millisecond, "the chart's exporter never observed the pod's stabilization")

	// The ValidatingAdmissionPolicy: the agent's token, bound to its pod
	// and so to this node, may write the conditions of this node's pods
	// only. Another node, without a kubelet, and a pod bound to it.
	other := "elsewhere"
	_, err = c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: other}}, metav1.CreateOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.CoreV1().Nodes().Delete(context.Background(), other, metav1.DeleteOptions{}) })
	no := false
	_, err = c.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "stranger"},
		Spec: corev1.PodSpec{NodeName: other, AutomountServiceAccountToken: &no,
			Containers: []corev1.Container{{Name: "app", Image: realnode.Image, ImagePullPolicy: corev1.PullNever}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	// No kubelet ever deletes it: forced, before the node's teardown
	// waits for its pods.
	t.Cleanup(func() {
		zero := int64(0)
		_ = c.CoreV1().Pods(ns).Delete(context.Background(), "stranger", metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	agents, err := c.CoreV1().Pods(chartNamespace).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + realnode.NodeName})
	require.NoError(t, err)
	var agentPod *corev1.Pod
	for i := range agents.Items {
		if agents.Items[i].Spec.ServiceAccountName == agentName {
			agentPod = &agents.Items[i]
		}
	}
	require.NotNil(t, agentPod, "the agent's pod")
	asAgent := testenv.ClientFor(t, node.ServiceAccountConfig(t, chartNamespace, agentName, agentPod))
	err = testenv.PatchStableCondition(asAgent, ns, "stranger")
	assert.True(t, apierrors.IsForbidden(err), "the agent's token on another node's pod: %v", err)
	assert.ErrorContains(t, err, "ValidatingAdmissionPolicy '"+agentName+"-node-restriction'")
	// Last: it writes Stable False on the pod.
	assert.NoError(t, testenv.PatchStableCondition(asAgent, ns, "probe"), "the agent's token on its own node's pod")
	t.Logf("Stable written and the admission policy checked %v after the start", time.Since(began).Round(time.Millisecond))
}

// regexpNotesSelector finds, in the release notes, the label selector of
// the claims `helm uninstall` keeps, in the command that starts over.
var regexpNotesSelector = regexp.MustCompile(`kubectl -n ` + chartNamespace + ` delete pvc -l (\S+)`)

// createStateVolume makes the exporter's state volume: a hostPath PV under
// the node's directory, of StorageClass chartClass, for the
// controller-manager to bind the StatefulSet's claim to. A hostPath
// ignores fsGroup (issue 26, defect 6), so the directory is made the
// exporter's (uid 65532) here, as an administrator would.
func createStateVolume(t *testing.T, node *realnode.Node) {
	t.Helper()
	ctx := context.Background()
	c := node.Client
	state := filepath.Join(node.Dir(), "podslo-state")
	require.NoError(t, os.Mkdir(state, 0o700))
	require.NoError(t, os.Chown(state, 65532, 65532))
	_, err := c.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta:  metav1.ObjectMeta{Name: chartClass},
		Provisioner: "kubernetes.io/no-provisioner",
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	dirType := corev1.HostPathDirectory
	_, err = c.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "podslo-state"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              chartClass,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: state, Type: &dirType}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

// releaseVersion is the VERSION file: the version make image stamps into
// the image and its tag, and the chart's version and appVersion.
func releaseVersion(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(charts.Root(), "VERSION"))
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}

// decodeAll splits helm's output into objects.
func decodeAll(t *testing.T, raw []byte) []*unstructured.Unstructured {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	var out []*unstructured.Unstructured
	for {
		var o unstructured.Unstructured
		if err := dec.Decode(&o.Object); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("decode helm's output: %v", err)
		}
		if o.Object != nil {
			out = append(out, &o)
		}
	}
}

// installedRelease is what `helm install --output json` says of the release,
// and what uninstallChart checks.
type installedRelease struct {
	Info struct {
		Status string `json:"status"`
		Notes  string `json:"notes"`
	} `json:"info"`
	Manifest string `json:"manifest"`
	// objects are the release's objects; keptSelector is the notes' label
	// selector of the claims `helm uninstall` keeps.
	objects      []*unstructured.Unstructured
	keptSelector string
}

// uninstallChart runs `helm uninstall`, waits until the release's pods are
// gone, so that no controller re-creates a pod the node's teardown
// deletes, and checks what the notes said: every object of the release is
// gone, and the state's claim, which the StatefulSet made, is kept and is
// what the notes' `kubectl delete pvc -l` selects.
func uninstallChart(t *testing.T, node *realnode.Node, helm string, rel *installedRelease) {
	ctx := context.Background()
	c := node.Client
	_, err := charts.Run(helm, "uninstall", chartRelease, "--namespace", chartNamespace, "--kubeconfig", node.Kubeconfig,
		"--ignore-not-found", "--cascade", "foreground", "--wait")
	if err != nil {
		t.Errorf("helm uninstall: %v", err)
	}
	if !assertEventually(t, func() bool {
		pods, err := c.CoreV1().Pods(chartNamespace).List(ctx, metav1.ListOptions{})
		return err == nil && len(pods.Items) == 0
	}, time.Minute) {
		t.Errorf("the chart's pods outlived helm uninstall")
	}
	if rel.objects == nil {
		return // not installed: nothing to check
	}
	// No require here: a cleanup that stops early would skip the node's
	// teardown checks after it.
	dyn, err := dynamic.NewForConfig(node.Config)
	if !assert.NoError(t, err) {
		return
	}
	dc, err := discovery.NewDiscoveryClientForConfig(node.Config)
	if !assert.NoError(t, err) {
		return
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	for _, o := range rel.objects {
		gvk := o.GroupVersionKind()
		m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if !assert.NoError(t, err) {
			continue
		}
		var r dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			r = dyn.Resource(m.Resource).Namespace(chartNamespace)
		}
		_, err = r.Get(ctx, o.GetName(), metav1.GetOptions{})
		assert.True(t, apierrors.IsNotFound(err), "%s %s after helm uninstall: %v", o.GetKind(), o.GetName(), err)
	}
	claims, err := c.CoreV1().PersistentVolumeClaims(chartNamespace).List(ctx, metav1.ListOptions{LabelSelector: rel.keptSelector})
	if !assert.NoError(t, err) {
		return
	}
	var kept []string
	for _, pvc := range claims.Items {
		kept = append(kept, pvc.Name+" "+string(pvc.Status.Phase))
	}
	assert.Equal(t, []string{"state-" + chartRelease + "-podslo-exporter-0 Bound"}, kept,
		"the claims helm uninstall kept, as the notes' selector %s finds them", rel.keptSelector)
}

// logChartPods logs the chart's pods' containers' states and their last
// logs, for a failure message.
func logChartPods(t *testing.T, node *realnode.Node) {
	ctx := context.Background()
	pods, err := node.Client.CoreV1().Pods(chartNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Logf("list the chart's pods: %v", err)
		return
	}
	for _, p := range pods.Items {
		for _, cs := range p.Status.ContainerStatuses {
			t.Logf("pod %s container %s: ready %v, restarts %d, state %+v, last state %+v", p.Name, cs.Name, cs.Ready,
				cs.RestartCount, cs.State, cs.LastTerminationState)
			tail := int64(20)
			for _, previous := range []bool{true, false} {
				b, err := node.Client.CoreV1().Pods(chartNamespace).GetLogs(p.Name, &corev1.PodLogOptions{Container: cs.Name,
					Previous: previous, TailLines: &tail}).DoRaw(ctx)
				t.Logf("pod %s container %s log (previous %v): %s %v", p.Name, cs.Name, previous, b, err)
			}
		}
	}
}

// chartKubeVersion is the chart's kubeVersion range, a span of minors.
var chartKubeVersion = regexp.MustCompile(`(?m)^kubeVersion: ">=1\.(\d+)\.0-0 <1\.(\d+)\.0-0"$`)

// chartSupports reports whether charts/podslo's kubeVersion admits the
// node's Kubernetes minor.
func chartSupports(t *testing.T) bool {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(charts.ChartDir(), "Chart.yaml"))
	require.NoError(t, err)
	m := chartKubeVersion.FindSubmatch(raw)
	require.NotNil(t, m, "charts/podslo/Chart.yaml: a kubeVersion of the form \">=1.A.0-0 <1.B.0-0\"")
	from, err := strconv.Atoi(string(m[1]))
	require.NoError(t, err)
	below, err := strconv.Atoi(string(m[2]))
	require.NoError(t, err)
	minor := kubeletMinor(t)
	return minor >= from && minor < below
}

// refusedByKubeVersion checks that helm refused the chart on a version
// outside its kubeVersion, with Helm's own error, as the README promises.
func refusedByKubeVersion(t *testing.T, err error, out []byte) {
	t.Helper()
	version, verr := testenv.KubernetesVersion()
	require.NoError(t, verr)
	require.Error(t, err, "helm installed the chart on %s, outside its kubeVersion: %s", version, out)
	require.Contains(t, err.Error(), "chart requires kubeVersion", "helm's refusal on %s", version)
	t.Logf("%s: helm refused the chart, as its kubeVersion says: %v", version, err)
}
