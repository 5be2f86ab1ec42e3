package exporter

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podslo/podslo/internal/testenv"
)

// startProcess runs `podslo exporter` as a separate process
// (testenv.StartExporterProcess).
func startProcess(t *testing.T, bin string, args ...string) *testenv.Process {
	t.Helper()
	return testenv.StartExporterProcess(t, bin, args...)
}

// TestRestartAfterSIGKILL kills the exporter without warning and starts it
// again on the same state: what was observed is not observed again, and
// what happened meanwhile is observed once.
func TestRestartAfterSIGKILL(t *testing.T) {
	env := testenv.Start(t)
	bin := testenv.PodsloBinary(t)
	state := t.TempDir()
	c := env.Client
	ctx := context.Background()
	const ns = "restart"
	testenv.CreateNamespace(t, c, ns, nil)

	base := time.Now().Add(-5 * time.Minute).Truncate(time.Second)
	startPod := func(name string, readyAfter time.Duration) *corev1.Pod {
		p := testenv.CreatePod(t, c, ns, podSpec{name: name, team: "a"}.pod())
		kubelet(t, c, p, condAt(corev1.PodScheduled, corev1.ConditionTrue, base), condAt(corev1.PodReadyToStartContainers, corev1.ConditionTrue, base.Add(readyAfter)))
		return p
	}

	first := startProcess(t, bin, "--kubeconfig", env.Kubeconfig, "--state-dir", state)
	a := startPod("a", 1*time.Second)
	startPod("b", 2*time.Second)
	startPod("d", 3*time.Second)
	const name = "podslo_sandbox_creation_duration_seconds"
	header := "# HELP " + name + " Time from PodScheduled to the first PodReadyToStartContainers=True of each pod (KEP-3085), observed once per pod UID.\n# TYPE " + name + " histogram\n"
	eventuallyMetrics(t, first.URL, header+histogramText(name, `runtime_class="none",storage_class="none"`, 1, 2, 3), name)
	first.Kill(t)

	// While podslo is down: a new pod starts, a's sandbox is lost and
	// re-created (podslo never sees the False), and d is deleted.
	c2 := startPod("c", 7*time.Second)
	kubelet(t, c, a, condAt(corev1.PodReadyToStartContainers, corev1.ConditionTrue, base.Add(4*time.Minute)))
	zero := int64(0)
	require.NoError(t, c.CoreV1().Pods(ns).Delete(ctx, "d", metav1.DeleteOptions{GracePeriodSeconds: &zero}))

	want := header + histogramText(name, `runtime_class="none",storage_class="none"`, 1, 2, 3, 7) + `
# HELP podslo_sandbox_recreations_total Sandboxes that became ready again after the first one was lost, e.g. after a node or VM crash.
# TYPE podslo_sandbox_recreations_total counter
podslo_sandbox_recreations_total{runtime_class="none",storage_class="none"} 1
# HELP podslo_store_tracked_pods Pods whose lifecycle state the store holds.
# TYPE podslo_store_tracked_pods gauge
podslo_store_tracked_pods 3
`
	names := []string{name, "podslo_sandbox_recreations_total", "podslo_store_tracked_pods"}
	for run := 2; run <= 3; run++ {
		t.Run(fmt.Sprintf("run %d", run), func(t *testing.T) {
			p := startProcess(t, bin, "--kubeconfig", env.Kubeconfig, "--state-dir", state)
			// Ready means every live pod was handled and state of deleted
			// ones dropped: the result must be exact now, not eventually.
			require.NoError(t, scrapeAndCompare(t, p.URL, want, names...))
			perPod := scrapeText(t, p.URL, "text/plain")
			require.Contains(t, perPod, fmt.Sprintf(`uid=%q`, c2.UID))
			require.NotContains(t, perPod, `pod="d"`, "a pod deleted while podslo was down has no series")
			// The next run starts from this one's state, killed again.
			p.Kill(t)
		})
	}
}

// TestRestartDuringTermination kills the exporter between a pod's deletion
// request and its sandbox going away, then again after the termination was
// observed: it is counted once, from the first request.
func TestRestartDuringTermination(t *testing.T) {
	env := testenv.Start(t)
	bin := testenv.PodsloBinary(t)
	state := t.TempDir()
	c := env.Client
	ctx := context.Background()
	const ns = "terminating"
	testenv.CreateNamespace(t, c, ns, nil)

	first := startProcess(t, bin, "--kubeconfig", env.Kubeconfig, "--state-dir", state)
	p := testenv.CreatePod(t, c, ns, podSpec{name: "leaving", team: "a"}.pod())
	ct := p.CreationTimestamp.Time
	kubelet(t, c, p, condAt(corev1.PodScheduled, corev1.ConditionTrue, ct.Add(-10*time.Second)), condAt(corev1.PodReadyToStartContainers, corev1.ConditionTrue, ct.Add(-8*time.Second)))
	eventuallyValue(t, first.URL, "podslo_pod_sandbox_creation_seconds", map[string]string{"pod": "leaving"}, 2)
	requested := deleteWithGrace(t, c, p, 30)
	first.Kill(t)

	// The kubelet tears the sandbox down while podslo is down.
	kubelet(t, c, p, condAt(corev1.PodReadyToStartContainers, corev1.ConditionFalse, requested.Add(3*time.Second)))

	const name = "podslo_termination_duration_seconds"
	want := "# HELP " + name + " Time from the deletion request (deletionTimestamp minus the grace period) to the sandbox condition turning False (KEP-3085 Story 5), observed once per pod UID.\n# TYPE " + name + " histogram\n" +
		histogramText(name, `runtime_class="none",storage_class="none"`, 3)
	second := startProcess(t, bin, "--kubeconfig", env.Kubeconfig, "--state-dir", state)
	require.NoError(t, scrapeAndCompare(t, second.URL, want, name), "observed once after the restart")
	second.Kill(t)

	third := startProcess(t, bin, "--kubeconfig", env.Kubeconfig, "--state-dir", state)
	require.NoError(t, scrapeAndCompare(t, third.URL, want, name), "not again after another")
	// The kubelet removes the pod: the termination was measured, so it did
	// not vanish.
	zero := int64(0)
	require.NoError(t, c.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}))
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.NotContains(c, scrapeText(c, third.URL, "text/plain"), `pod="leaving"`)
	}, 30*time.Second, 50*time.Millisecond)
	// The vanished skip's series is there at 0 (docs/metrics.md): it must
	// stay there.
	require.Regexp(t, `\npodslo_observations_skipped_total\{reason="vanished",sli="termination"\} 0\n`, scrapeText(t, third.URL, "text/plain"))
}

// TestSIGTERMStopsCleanly: the exporter process exits 0 on SIGTERM,
// having stopped its server and informers and closed its state, which the
// next process can then open.
func TestSIGTERMStopsCleanly(t *testing.T) {
	env := testenv.Start(t)
	bin := testenv.PodsloBinary(t)
	state := t.TempDir()
	p := startProcess(t, bin, "--kubeconfig", env.Kubeconfig, "--state-dir", state)
	require.NoError(t, p.Cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.Done:
	case <-time.After(30 * time.Second):
		t.Fatal("exporter did not stop within 30s of SIGTERM")
	}
	require.Equal(t, 0, p.Cmd.ProcessState.ExitCode(), "exit code after SIGTERM")
	// The state was closed, not left locked: a new process opens it.
	startProcess(t, bin, "--kubeconfig", env.Kubeconfig, "--state-dir", state)
}
