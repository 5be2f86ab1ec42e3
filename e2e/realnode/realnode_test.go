package realnode_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podslo/podslo/internal/realnode"
	"github.com/podslo/podslo/internal/testenv"
)

func TestSandboxCreationOnARealNode(t *testing.T) {
	began := time.Now()
	s := startSuite(t)
	node, tr := s.node, s.tr
	ctx := context.Background()
	c := node.Client

	// make nodebin stamps the version: unstamped, the node says v0.0.0-master.
	want, err := testenv.KubernetesVersion()
	require.NoError(t, err)
	n, err := c.CoreV1().Nodes().Get(ctx, realnode.NodeName, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, want, n.Status.NodeInfo.KubeletVersion, "the kubelet's version")

	_, err = c.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "runc"}, Handler: "runc"}, metav1.CreateOptions{})
	require.NoError(t, err)

	url := s.startExporter(t.TempDir())

	classes := map[string]string{"plain-0": "", "plain-1": "", "plain-2": "", "runc-0": "runc", "runc-1": "runc"}
	uids := map[string]types.UID{}
	for name, class := range classes {
		var opts []podOption
		if class != "" {
			opts = append(opts, inClass(class))
		}
		uids[name] = s.createPod(name, opts...).UID
	}
	var count map[string]uint64
	var sum map[string]float64
	require.Eventually(t, func() bool {
		var ready int
		count, sum, _, ready = tr.creations()
		return ready == len(classes)
	}, 3*time.Minute, 100*time.Millisecond, "pods' sandboxes never all ready")
	require.Equal(t, map[string]uint64{"none": 3, "runc": 2}, count)
	t.Logf("sandbox creation per class from the pods' conditions: count %v, sum %v s", count, sum)

	// podslo's histogram, class by class, counts the pods' own conditions,
	// in milliseconds: it watched every end while current.
	ms := tr.creationsInMs()
	t.Logf("sandbox creation per class from the test's own watch: sum %v s", ms)
	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		fams := scrape(ct, url)
		gotCount, gotSum := histogramByClass(fams["podslo_sandbox_creation_duration_seconds"])
		assert.Equal(ct, count, gotCount)
		assertSumsInMs(ct, count, ms, gotSum, "sandbox creation")
		precision := counterBy(fams["podslo_observations_total"], "sli", "precision")
		assert.Equal(ct, float64(len(classes)), precision["sandbox_creation,millisecond"])
		assert.Zero(ct, precision["sandbox_creation,second"])
	}, 30*time.Second, 100*time.Millisecond, "podslo's sandbox creations differ from the pods' conditions")

	// The kubelet ran exactly one sandbox per pod.
	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		assert.Equal(ct, uint64(len(classes)), kubeletSandboxRuns(ct, node))
	}, 30*time.Second, 100*time.Millisecond, "the kubelet's run_podsandbox count differs from podslo's creations")

	// A sandbox killed through containerd: the kubelet re-creates it, and
	// podslo counts exactly one re-creation and no second creation.
	victim := uids["plain-0"]
	first := tr.get(victim).sandboxReady
	// Conditions have one-second precision: a sandbox re-created within the
	// second its first one became ready would show the same
	// lastTransitionTime, and neither the test nor podslo could tell.
	require.Eventually(t, func() bool { return time.Now().After(first[0].Add(time.Second)) }, 2*time.Second,
		10*time.Millisecond)
	tr.act("plain-0", "kill the sandbox through containerd")
	require.NoError(t, node.KillSandbox(string(victim)))
	if !assert.Eventually(t, func() bool { return len(tr.get(victim).sandboxReady) == len(first)+1 }, 2*time.Minute,
		100*time.Millisecond) {
		t.Fatalf("the killed sandbox never became ready again; ready at %v; the pod: %+v", tr.get(victim).sandboxReady, podStatus(t, node, "plain-0"))
	}
	_, _, recreations, _ := tr.creations()
	require.Equal(t, map[string]int{"none": 1, "runc": 0}, recreations)
	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		fams := scrape(ct, url)
		assert.Equal(ct, map[string]float64{"none": 1}, counterByClass(fams["podslo_sandbox_recreations_total"]))
		gotCount, gotSum := histogramByClass(fams["podslo_sandbox_creation_duration_seconds"])
		assert.Equal(ct, count, gotCount)
		assertSumsInMs(ct, count, ms, gotSum, "sandbox creation")
		// Every sandbox the kubelet ran is one podslo counted: first
		// creations plus re-creations.
		assert.Equal(ct, uint64(len(classes)+1), kubeletSandboxRuns(ct, node))
	}, 30*time.Second, 100*time.Millisecond, "podslo's re-creations differ from the pods' conditions or the kubelet's")

	// A pod reaches the API server through the kubernetes Service
	// (kube-proxy's rules), as the agent's pods must.
	client := s.createPod("apiserver-client", runOnce("apiserver"))
	var phase corev1.PodPhase
	require.Eventually(t, func() bool {
		p, err := c.CoreV1().Pods(ns).Get(ctx, client.Name, metav1.GetOptions{})
		require.NoError(t, err)
		phase = p.Status.Phase
		return phase == corev1.PodSucceeded || phase == corev1.PodFailed
	}, 2*time.Minute, 100*time.Millisecond, "the API server client never finished")
	logs, err := c.CoreV1().Pods(ns).GetLogs(client.Name, &corev1.PodLogOptions{}).DoRaw(ctx)
	require.NoError(t, err, "the pod's log through the API server and the kubelet")
	require.Equal(t, corev1.PodSucceeded, phase, "the pod did not reach the API server through the kubernetes Service:\n%s", logs)
	t.Logf("a pod asked the API server through the kubernetes Service: %s", logs)
	t.Logf("test body done after %v", time.Since(began).Round(time.Millisecond))
}
