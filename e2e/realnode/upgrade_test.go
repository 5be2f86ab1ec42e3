package realnode_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podslo/podslo/charts"
	"github.com/podslo/podslo/internal/realnode"
	"github.com/podslo/podslo/internal/testenv"
)

// The previous release, whose chart and image `helm upgrade` replaces, as
// exporter/upgrade_test.go names it: its state is format 1.
const (
	previousVersion = "0.1.0"
	previousCommit  = "3b7944d1236f4f7ea1fd33c1712bc8ad427d6f2f"
)

// TestChartUpgradeAndRollbackOnARealNode installs chart 0.1.0 with its
// image, both built from 0.1.0's commit, on a real node, then `helm
// upgrade`s to this chart and image, upgrades once more, and `helm
// rollback`s to this release's first revision and then to 0.1.0, with the
// README's commands, once on a cluster without the Prometheus Operator's
// CRDs and once with them served. Every revision runs on the same state
// claim. The upgrade and the rollback within this release count nothing
// twice and lose nothing; the rollback to 0.1.0 is refused at its start,
// as CHANGELOG.md says, with the state untouched, and a rollback to this
// release again finds everything.
func TestChartUpgradeAndRollbackOnARealNode(t *testing.T) {
	for _, operator := range []bool{false, true} {
		name := "without the Prometheus Operator's CRDs"
		if operator {
			name = "with the Prometheus Operator's CRDs"
		}
		t.Run(name, func(t *testing.T) { chartUpgradeAndRollback(t, operator) })
	}
}

func chartUpgradeAndRollback(t *testing.T, operator bool) {
	layout := filepath.Join(charts.Root(), "bin", "image")
	if _, err := os.Stat(filepath.Join(layout, "index.json")); err != nil {
		t.Fatalf("no image layout in %s: run `make image` first (make test does): %v", layout, err)
	}
	helm, err := charts.Helm()
	require.NoError(t, err)
	version := releaseVersion(t)
	prevChart, prevLayout := previousRelease(t)

	began := time.Now()
	s := startSuite(t, testenv.APIServerFlagUnset("disable-admission-plugins"))
	node := s.node
	ctx := context.Background()
	c := node.Client
	if operator {
		crds := testenv.PrometheusOperatorCRDs(t)
		node.InstallCRDs(t,
			filepath.Join(crds, "monitoring.coreos.com_servicemonitors.yaml"),
			filepath.Join(crds, "monitoring.coreos.com_podmonitors.yaml"),
			filepath.Join(crds, "monitoring.coreos.com_prometheusrules.yaml"))
	}
	require.NoError(t, node.ImportOCILayout(prevLayout), "the image of %s", previousVersion)
	require.NoError(t, node.ImportOCILayout(layout), "the image of %s", version)
	createStateVolume(t, node)

	// The README's commands: without the operator's CRDs, the flags it
	// gives for such a cluster. 0.1.0 rendered its PrometheusRules
	// whatever the cluster served (issue 26, defect 4), so its install
	// there also turns them off; this chart leaves them out by itself.
	common := []string{"--namespace", chartNamespace, "--kubeconfig", node.Kubeconfig,
		"--set", "agent.enabled=true",
		// No registry is reachable: the imported images or nothing.
		"--set", "image.pullPolicy=Never",
		"--set", "exporter.persistence.storageClassName=" + chartClass}
	readme := common
	if !operator {
		readme = append(append([]string(nil), common...), "--set", "exporter.serviceMonitor.enabled=false,agent.podMonitor.enabled=false")
	}
	install := append([]string{"install", chartRelease, prevChart, "--create-namespace", "--output", "json"}, readme...)
	if !operator {
		install = append(install, "--set", "monitoring.rules.enabled=false,monitoring.alerts.enabled=false")
	}

	rel := &installedRelease{}
	t.Cleanup(func() { uninstallChart(t, node, helm, rel) })
	out, err := charts.Run(helm, install...)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(out, rel), "helm install's output: %s", out)
	require.Equal(t, "deployed", rel.Info.Status)
	rel.objects = decodeAll(t, []byte(rel.Manifest))
	assertOperatorObjects(t, rel, operator, previousVersion)
	claim := "state-" + chartRelease + "-podslo-exporter-0"
	// 0.1.0's notes name no command that starts over: the selector the
	// cleanup checks the kept claim with comes from this release's notes,
	// at the upgrade.

	// Revision 1: 0.1.0 observes a pod of its own RuntimeClass.
	exporter := waitExporter(t, node, previousVersion, "")
	pvc, err := c.CoreV1().PersistentVolumeClaims(chartNamespace).Get(ctx, claim, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "podslo-state", pvc.Spec.VolumeName)
	_, err = c.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "runc"}, Handler: "runc"}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := c.CoreV1().ServiceAccounts(ns).Get(ctx, "default", metav1.GetOptions{})
		return err == nil
	}, 30*time.Second, 100*time.Millisecond, "no default service account in %s", ns)
	observe(t, s, exporter, "before-upgrade", 1)
	carried := runcSeries(t, exporter.url)
	require.NotEmpty(t, carried)
	t.Logf("%s installed and observing %v after the start", previousVersion, time.Since(began).Round(time.Millisecond))

	// Revision 2: `helm upgrade` to this chart, with the README's command.
	upgrade := func(extra ...string) *installedRelease {
		t.Helper()
		args := append(append([]string{"upgrade", chartRelease, charts.ChartDir(), "--output", "json"}, readme...), extra...)
		out, err := charts.Run(helm, args...)
		require.NoError(t, err)
		r := &installedRelease{}
		require.NoError(t, json.Unmarshal(out, r), "helm upgrade's output: %s", out)
		require.Equal(t, "deployed", r.Info.Status)
		r.objects = decodeAll(t, []byte(r.Manifest))
		return r
	}
	if !chartSupports(t) {
		// 0.1.0 claimed 1.30 on; this chart does not: the upgrade is
		// refused and 0.1.0 runs on.
		args := append([]string{"upgrade", chartRelease, charts.ChartDir(), "--output", "json"}, readme...)
		out, err := charts.Run(helm, args...)
		refusedByKubeVersion(t, err, out)
		return
	}
	upgraded := upgrade()
	assertOperatorObjects(t, upgraded, operator, version)
	m := regexpNotesSelector.FindStringSubmatch(upgraded.Info.Notes)
	require.NotNil(t, m, "the notes' command that starts over:\n%s", upgraded.Info.Notes)
	rel.keptSelector = m[1]
	exporter = waitExporter(t, node, version, exporter.uid)
	assertSameClaim(t, node, claim, pvc.UID)
	// Everything 0.1.0 showed of the class, the same; then one more pod,
	// counted once.
	assertCarried(t, exporter.url, carried, "after the upgrade from "+previousVersion)
	waitCurrent(t, exporter.url)
	observe(t, s, exporter, "after-upgrade", 2)
	t.Logf("upgraded to %s, the state carried, %v after the start", version, time.Since(began).Round(time.Millisecond))

	// Revision 3: an upgrade within this release; revision 4: `helm
	// rollback` to revision 2, the same release on the same state: safe.
	carried = runcSeries(t, exporter.url)
	upgrade("--set", "logLevel=debug")
	exporter = waitExporter(t, node, version, exporter.uid)
	assertCarried(t, exporter.url, carried, "after the upgrade to revision 3")
	_, err = charts.Run(helm, "rollback", chartRelease, "2", "--namespace", chartNamespace, "--kubeconfig", node.Kubeconfig)
	require.NoError(t, err)
	exporter = waitExporter(t, node, version, exporter.uid)
	assertSameClaim(t, node, claim, pvc.UID)
	assertCarried(t, exporter.url, carried, "after the rollback to revision 2")
	observe(t, s, exporter, "after-rollback", 3)

	// Revision 5: `helm rollback` to 0.1.0's revision. 0.1.0 deletes every
	// record it cannot read, so it must not run on this state: it refuses
	// to start on a state directory holding a file that is not badger's,
	// and this release's first write left one (the format marker). The
	// rollback is refused at start-up, the state left as it was
	// (CHANGELOG.md).
	carried = runcSeries(t, exporter.url)
	_, err = charts.Run(helm, "rollback", chartRelease, "1", "--namespace", chartNamespace, "--kubeconfig", node.Kubeconfig)
	require.NoError(t, err, "helm rollback to %s: helm itself does not refuse it", previousVersion)
	refused := waitRefused(t, node, previousVersion, exporter.uid)
	assert.Contains(t, refused, "PODSLO_STATE_FORMAT", "%s's error names the marker", previousVersion)
	assert.Contains(t, refused, "which is not podslo state", "%s refuses the state directory", previousVersion)
	assertSameClaim(t, node, claim, pvc.UID)

	// Revision 6: back to this release, which finds everything where it was.
	// A StatefulSet does not replace a pod that never became Ready (its
	// "forced rollback"): the pod of the refused revision is deleted by
	// hand, as the README says.
	_, err = charts.Run(helm, "rollback", chartRelease, "4", "--namespace", chartNamespace, "--kubeconfig", node.Kubeconfig)
	require.NoError(t, err)
	require.NoError(t, c.CoreV1().Pods(chartNamespace).Delete(ctx, chartRelease+"-podslo-exporter-0", metav1.DeleteOptions{}))
	exporter = waitExporter(t, node, version, "")
	assertSameClaim(t, node, claim, pvc.UID)
	assertCarried(t, exporter.url, carried, "after the refused rollback to "+previousVersion+" and the roll forward")
	waitCurrent(t, exporter.url)
	observe(t, s, exporter, "after-refused-rollback", 4)

	history, err := charts.Run(helm, "history", chartRelease, "--namespace", chartNamespace, "--kubeconfig", node.Kubeconfig, "--output", "json")
	require.NoError(t, err)
	var revisions []struct {
		Revision   int    `json:"revision"`
		Status     string `json:"status"`
		Chart      string `json:"chart"`
		AppVersion string `json:"app_version"`
	}
	require.NoError(t, json.Unmarshal(history, &revisions), "helm history: %s", history)
	var got []string
	for _, r := range revisions {
		got = append(got, strconv.Itoa(r.Revision)+" "+r.Status+" "+r.Chart+" "+r.AppVersion)
	}
	prev, cur := "podslo-"+previousVersion, "podslo-"+version
	assert.Equal(t, []string{
		"1 superseded " + prev + " " + previousVersion, "2 superseded " + cur + " " + version, "3 superseded " + cur + " " + version,
		"4 superseded " + cur + " " + version, "5 superseded " + prev + " " + previousVersion, "6 deployed " + cur + " " + version,
	}, got, "helm history")
	t.Logf("rollback to %s refused, rolled forward %v after the start", previousVersion, time.Since(began).Round(time.Millisecond))
}

// exporterPod is the chart's exporter pod, and where it serves /metrics.
type exporterPod struct {
	name, url string
	uid       types.UID
}

// waitExporterPod waits until the StatefulSet's pod is one other than the
// pod with UID replaced, runs podslo version's image and satisfies ok, and
// returns it; it fails the test with what it waited for.
func waitExporterPod(t *testing.T, node *realnode.Node, version string, replaced types.UID, what string, ok func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	image := "ghcr.io/podslo/podslo:" + version
	var pod *corev1.Pod
	if !assertEventually(t, func() bool {
		p, err := node.Client.CoreV1().Pods(chartNamespace).Get(context.Background(), chartRelease+"-podslo-exporter-0", metav1.GetOptions{})
		if err != nil || p.UID == replaced || p.DeletionTimestamp != nil || len(p.Spec.Containers) == 0 || p.Spec.Containers[0].Image != image || !ok(p) {
			return false
		}
		pod = p
		return true
	}, 2*time.Minute) {
		logChartPods(t, node)
		t.Fatalf("no exporter pod of %s after the one with UID %q that %s", image, replaced, what)
	}
	return pod
}

// waitExporter waits until the StatefulSet's pod is one other than the pod
// with UID replaced, runs podslo version's image and is Ready, and the
// agent is Ready too; then it checks the version the exporter reports.
func waitExporter(t *testing.T, node *realnode.Node, version string, replaced types.UID) exporterPod {
	t.Helper()
	pod := waitExporterPod(t, node, version, replaced, "is Ready, with the agent Ready", func(p *corev1.Pod) bool {
		ds, err := node.Client.AppsV1().DaemonSets(chartNamespace).Get(context.Background(), chartRelease+"-podslo-agent", metav1.GetOptions{})
		if err != nil || ds.Status.UpdatedNumberScheduled != 1 || ds.Status.NumberReady != 1 {
			return false
		}
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady {
				return cond.Status == corev1.ConditionTrue && p.Status.PodIP != ""
			}
		}
		return false
	})
	url := "http://" + pod.Status.PodIP + ":8080"
	info := scrape(t, url)["podslo_build_info"]
	require.NotNil(t, info, "podslo_build_info")
	require.Len(t, info.GetMetric(), 1)
	require.Equal(t, version, label(info.GetMetric()[0], "version"), "the version the exporter of %s reports", version)
	return exporterPod{name: pod.Name, url: url, uid: pod.UID}
}

// waitRefused waits until the StatefulSet's pod, other than the one with
// UID replaced, runs version's image and its exporter has exited with an
// error at least once, and returns that run's log.
func waitRefused(t *testing.T, node *realnode.Node, version string, replaced types.UID) string {
	t.Helper()
	pod := waitExporterPod(t, node, version, replaced, "exited with an error", func(p *corev1.Pod) bool {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.Name == p.Spec.Containers[0].Name {
				return cs.LastTerminationState.Terminated != nil && cs.LastTerminationState.Terminated.ExitCode != 0
			}
		}
		return false
	})
	// The refusal, from the container log files the kubelet wrote for the
	// pod (one per run, under the node's podLogsDir). Through the API
	// server, 1.34.4 and 1.35.4 answered "unable to retrieve container
	// logs" for the previous container, while 1.37.2 served it; the files
	// are the same on every version.
	dir := filepath.Join(node.Dir(), "pod-logs", fmt.Sprintf("%s_%s_%s", chartNamespace, pod.Name, pod.UID), pod.Spec.Containers[0].Name)
	var logs strings.Builder
	require.Eventually(t, func() bool {
		logs.Reset()
		files, err := filepath.Glob(filepath.Join(dir, "*.log"))
		if err != nil {
			return false
		}
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err == nil {
				logs.Write(raw)
			}
		}
		return logs.Len() > 0
	}, time.Minute, time.Second, "no log of the refusing container in %s", dir)
	return logs.String()
}

// observe creates a pod of RuntimeClass runc and waits until the exporter
// counts want sandbox creations in that class, as many as the pods'
// conditions show: each pod once.
func observe(t *testing.T, s *suite, exporter exporterPod, name string, want uint64) {
	t.Helper()
	s.createPod(name, inClass("runc"))
	require.Eventually(t, func() bool {
		_, _, _, ready := s.tr.creations()
		return uint64(ready) == want
	}, time.Minute, 100*time.Millisecond, "the sandbox of pod %s never became ready", name)
	count, _, _, _ := s.tr.creations()
	require.Equal(t, want, count["runc"])
	// Every SLI of the pod, not only its sandbox: a snapshot of the state
	// taken before its readiness and start-up phases were observed would
	// differ from a later one without anything counted twice. Stable comes
	// last, in an update of its own: the chart's agent writes it once the
	// pod has been Ready for its minReadySeconds (0 for a bare pod), and
	// later still when an upgrade has just replaced the agent.
	for _, family := range []string{"podslo_sandbox_creation_duration_seconds", "podslo_readiness_duration_seconds", "podslo_stabilization_duration_seconds"} {
		assert.EventuallyWithT(t, func(ct *assert.CollectT) {
			got, _ := histogramByClass(familyNamed(scrape(ct, exporter.url), family))
			assert.Equal(ct, want, got["runc"])
		}, time.Minute, 100*time.Millisecond, "the %s of class runc the exporter %s counts", family, exporter.name)
	}
}

// familyNamed is the family of this release's name in a scrape of any
// release: 0.1.0's names of some differ (testenv.Renamed).
func familyNamed(fams map[string]*dto.MetricFamily, name string) *dto.MetricFamily {
	for n, f := range fams {
		if testenv.Renamed(n) == name {
			return f
		}
	}
	return nil
}

// runcSeries is every podslo series of RuntimeClass runc that is not a
// pod's own (per-pod series come from the watch, not the state), by its
// text, with each histogram's count, sum and buckets: what the state
// carries. Only the test's runc pods are in that class; the chart's own
// pods, which an upgrade replaces, are not.
func runcSeries(t require.TestingT, url string) map[string]float64 {
	return testenv.SeriesValues(scrape(t, url), func(_ string, m *dto.Metric) bool {
		return label(m, "runtime_class") == "runc" && label(m, "uid") == ""
	})
}

// assertCarried checks that the exporter at url shows every series of
// carried at the same value: nothing lost, nothing counted twice.
func assertCarried(t *testing.T, url string, carried map[string]float64, when string) {
	t.Helper()
	var got map[string]float64
	if !assertEventually(t, func() bool {
		got = runcSeries(t, url)
		for k, v := range carried {
			if got[testenv.Renamed(k)] != v {
				return false
			}
		}
		return true
	}, 30*time.Second) {
		for k, v := range carried {
			assert.Equal(t, v, got[testenv.Renamed(k)], "series %s %s", k, when)
		}
	}
}

// assertSameClaim checks that the state's claim is still the one with UID
// uid, bound.
func assertSameClaim(t *testing.T, node *realnode.Node, claim string, uid types.UID) {
	t.Helper()
	pvc, err := node.Client.CoreV1().PersistentVolumeClaims(chartNamespace).Get(context.Background(), claim, metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, uid, pvc.UID, "the claim %s is the one the install made", claim)
	assert.Equal(t, corev1.ClaimBound, pvc.Status.Phase)
	assert.Equal(t, "podslo-state", pvc.Spec.VolumeName)
}

// assertOperatorObjects checks the release's objects of the Prometheus
// Operator's API: with its CRDs, the monitors and the rules; without,
// none.
func assertOperatorObjects(t *testing.T, rel *installedRelease, operator bool, version string) {
	t.Helper()
	var got []string
	for _, o := range rel.objects {
		if o.GroupVersionKind().Group == "monitoring.coreos.com" {
			got = append(got, o.GetKind()+"/"+o.GetName())
		}
	}
	if !operator {
		assert.Empty(t, got, "chart %s on a cluster without the Prometheus Operator's CRDs", version)
		return
	}
	assert.ElementsMatch(t, []string{
		"ServiceMonitor/" + chartRelease + "-podslo-exporter", "PodMonitor/" + chartRelease + "-podslo-agent",
		"PrometheusRule/" + chartRelease + "-podslo-rules", "PrometheusRule/" + chartRelease + "-podslo-alerts",
	}, got, "chart %s with the Prometheus Operator's CRDs", version)
}

// previousRelease builds release 0.1.0's chart and image from its commit
// (git archive: the test needs a clone with history), as its own
// Makefile's `make image` did (but for -trimpath, below), for this
// machine's architecture, and caches
// both by commit next to the control-plane binaries.
func previousRelease(t *testing.T) (chart, layout string) {
	t.Helper()
	bin, err := testenv.BinDir()
	require.NoError(t, err)
	dir := filepath.Join(bin, "podslo-release-"+previousVersion+"-"+previousCommit[:12]+"-"+runtime.GOARCH)
	chart, layout = filepath.Join(dir, "chart", "podslo"), filepath.Join(dir, "image")
	if _, err := os.Stat(filepath.Join(layout, "index.json")); err == nil {
		return chart, layout
	}
	run := func(dir string, env []string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s %s: %s", name, strings.Join(args, " "), out)
		return strings.TrimSpace(string(out))
	}
	src := t.TempDir()
	run(charts.Root(), nil, "sh", "-c", `git archive --format=tar "$1" | tar -x -C "$2"`, "sh", previousCommit, src)
	created := run(charts.Root(), []string{"TZ=UTC"}, "git", "log", "-1", "--date=format-local:%Y-%m-%dT%H:%M:%SZ", "--format=%cd", previousCommit)
	const pkg = "github.com/prometheus/common/version"
	ldflags := "-s -w -X " + pkg + ".Version=" + previousVersion + " -X " + pkg + ".Revision=" + previousCommit +
		" -X " + pkg + ".Branch=main -X " + pkg + ".BuildDate=" + created
	binary := filepath.Join(src, "bin", "podslo")
	// Without -trimpath (0.1.0's make image had it): as testenv.ReleaseBinary
	// builds the same commit for the exporter package's upgrade test, so
	// that 0.1.0's dependencies compile once. -trimpath changes only the
	// file names the binary records.
	run(src, []string{"CGO_ENABLED=0", "GOOS=linux", "GOARCH=" + runtime.GOARCH}, "go", "build", "-ldflags", ldflags, "-o", binary, ".")

	tmp := dir + ".tmp"
	require.NoError(t, os.RemoveAll(tmp))
	require.NoError(t, os.MkdirAll(filepath.Join(tmp, "chart"), 0o755))
	run(filepath.Join(src, "hack", "image"), nil, "go", "run", ".", "--out", filepath.Join(tmp, "image"),
		"--name", "ghcr.io/podslo/podslo", "--version", previousVersion, "--revision", previousCommit, "--created", created,
		"--source", "https://github.com/podslo/podslo", "--licenses", "NOASSERTION", "--ca-certs", "/etc/ssl/certs/ca-certificates.crt",
		"--binary", "linux/"+runtime.GOARCH+"="+binary)
	run(src, nil, "cp", "-R", filepath.Join(src, "charts", "podslo"), filepath.Join(tmp, "chart", "podslo"))
	require.NoError(t, os.RemoveAll(dir))
	require.NoError(t, os.Rename(tmp, dir))
	return chart, layout
}
