package exporter

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podslo/podslo/agent"
	"github.com/podslo/podslo/internal/testenv"
)

// TestAgentAndExporterTogether runs the real agent and the real exporter on
// one API server: the agent decides Stable from the pod the kubelet
// reports, and the exporter turns the agent's condition into the
// stabilization SLI.
func TestAgentAndExporterTogether(t *testing.T) {
	env := testenv.Start(t)
	c := env.Client
	ctx := context.Background()
	_, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	testenv.CreateNamespace(t, c, "stable", nil)

	ag, err := agent.New(agent.Options{NodeName: "node-a", Kubeconfig: env.Kubeconfig, ListenAddress: "127.0.0.1:0",
		Logger: slog.New(slog.NewTextHandler(testenv.TestWriter{T: t}, nil))})
	require.NoError(t, err)
	testenv.Run(t, "agent", ag.Start)
	url := startExporter(t, Options{Kubeconfig: env.Kubeconfig, StateDir: t.TempDir()})

	p := testenv.CreatePod(t, c, "stable", podSpec{name: "web", team: "a"}.pod())
	_, err = c.CoreV1().Pods("stable").Patch(ctx, "web", types.MergePatchType, []byte(`{"metadata":{"annotations":{"podslo.io/min-ready-seconds":"2"}}}`), metav1.PatchOptions{})
	require.NoError(t, err)
	// Ready now, after the pod appeared (the agent never moves Stable's
	// lastTransitionTime back before its earlier NotReady), so Stable comes
	// at Ready + 2s, on the agent's timer.
	ct := p.CreationTimestamp.Time
	kubelet(t, c, p, condAt(corev1.PodScheduled, corev1.ConditionTrue, ct), condAt(corev1.PodReadyToStartContainers, corev1.ConditionTrue, ct))
	readyAt := time.Now().Truncate(time.Second)
	started(t, c, p, ct, readyAt)

	const name = "podslo_stabilization_duration_seconds"
	eventuallyMetrics(t, url, "# HELP "+name+" Time from the first Ready to the first Stable=True written by podslo's agent (Ready for minReadySeconds without a restart). Observed once per pod UID.\n# TYPE "+name+" histogram\n"+
		histogramText(name, `runtime_class="none",storage_class="none"`, 2), name)
	eventuallyValue(t, url, "podslo_pod_stable", map[string]string{"pod": "web"}, 1)

	// Ready drops: the agent turns Stable False, the exporter counts a loss.
	kubelet(t, c, p, condAt(corev1.PodReady, corev1.ConditionFalse, readyAt.Add(3*time.Second)))
	eventuallyValue(t, url, "podslo_pod_stable", map[string]string{"pod": "web"}, 0)
	eventuallyValue(t, url, "podslo_stable_transitions_total", map[string]string{"to": "false"}, 1)
	got, err := c.CoreV1().Pods("stable").Get(ctx, "web", metav1.GetOptions{})
	require.NoError(t, err)
	var stable []string
	for _, cond := range got.Status.Conditions {
		if cond.Type == "podslo.io/Stable" {
			stable = append(stable, string(cond.Status)+"/"+cond.Reason)
		}
	}
	assert.Equal(t, []string{"False/NotReady"}, stable, "exactly one Stable condition, False with reason NotReady")
}
