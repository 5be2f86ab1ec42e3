//go:build unix

package agent

import (
	"context"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podslo/podslo/agent/probe"
	"github.com/podslo/podslo/internal/testenv"
)

// TestHelperHealthServers is not a test: BenchmarkAgentProbeLoad runs the
// test binary again for it, so that the probed servers' CPU is not counted.
func TestHelperHealthServers(t *testing.T) { testenv.HealthServersChild(t) }

// BenchmarkAgentProbeLoad is the load bound through the whole
// agent on a real API server: 110 pods on the agent's node (the kubelet's
// default maxPods), each with a 100 ms HTTP probe against its own server
// in a child process, so 1,100 probes/s. One server in ten flaps every 2 s,
// so the gate flips and the agent PATCHes: 11 pods × one transition per 2 s
// is 5.5 PATCH/s; every other probe must write nothing. One op is one
// second. It reports probes/s, PATCH/s, and the agent's CPU (this process:
// the agent, its informers and the benchmark's polling; not the API
// server, not the servers) in cores and per probe.
func BenchmarkAgentProbeLoad(b *testing.B) {
	const pods = 110
	env := testenv.Start(b)
	c := env.Client
	ctx := context.Background()
	if _, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "load"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	addrs := testenv.StartHealthServers(b, pods, 2*time.Second)
	url := startAgent(b, Options{NodeName: "node-a", Logger: slog.New(slog.DiscardHandler)}, WithRestConfig(env.Config))
	annotation := `{"httpGet":{"path":"/ready","port":"health"},"periodSeconds":1,"periodMilliseconds":-900,"timeoutSeconds":1,"timeoutMilliseconds":-900}`
	for i, addr := range addrs {
		_, port, _ := net.SplitHostPort(addr)
		n, _ := strconv.Atoi(port)
		name := "pod-" + strconv.Itoa(i)
		_, err := c.CoreV1().Pods("load").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{probe.Annotation: annotation}},
			Spec: corev1.PodSpec{
				NodeName:       "node-a",
				ReadinessGates: []corev1.PodReadinessGate{{ConditionType: DefaultProbeConditionType}},
				Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
					Ports: []corev1.ContainerPort{{Name: "health", ContainerPort: int32(n)}}}},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		status := `{"status":{"podIP":"127.0.0.1","podIPs":[{"ip":"127.0.0.1"}],"containerStatuses":[{"name":"app","image":"registry.k8s.io/pause:3.10","imageID":"registry.k8s.io/pause@sha256:0","ready":false,"restartCount":0,"containerID":"containerd://` +
			name + `","state":{"running":{"startedAt":"` + time.Now().UTC().Format(time.RFC3339) + `"}}}]}}`
		if _, err := c.CoreV1().Pods("load").Patch(ctx, name, types.StrategicMergePatchType, []byte(status), metav1.PatchOptions{}, "status"); err != nil {
			b.Fatal(err)
		}
	}
	type sample struct {
		probes, patches float64
		cpu             time.Duration
		at              time.Time
	}
	read := func() sample {
		m := scrapeProbes(b, url)
		var probes float64
		for _, v := range m.total {
			probes += v
		}
		return sample{probes: probes, patches: m.writes[resultSuccess] + m.writes[resultError] + m.writes[resultForbidden], cpu: testenv.CPUTime(b), at: time.Now()}
	}
	// Every pod probed, and the first True of each written.
	require.EventuallyWithT(b, func(c *assert.CollectT) {
		m := scrapeProbes(c, url)
		assert.Equal(c, float64(pods), m.workers)
		assert.GreaterOrEqual(c, m.writes[resultSuccess], float64(pods))
	}, time.Minute, 100*time.Millisecond, "not every pod probed and written")
	b.ResetTimer()
	from := read()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for range b.N {
		<-tick.C
	}
	to := read()
	b.StopTimer()
	wall := to.at.Sub(from.at).Seconds()
	probes := to.probes - from.probes
	b.ReportMetric(probes/wall, "probes/s")
	b.ReportMetric((to.patches-from.patches)/wall, "patches/s")
	b.ReportMetric((to.cpu-from.cpu).Seconds()/wall, "cpu-cores")
	b.ReportMetric(float64((to.cpu-from.cpu).Microseconds())/probes, "cpu-us/probe")
}
