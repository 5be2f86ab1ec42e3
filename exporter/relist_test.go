package exporter

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/podslo/podslo/internal/testenv"
)

// tcpProxy forwards TCP connections to an address, TLS and all, so that a
// test can cut a client off its API server and let it back.
type tcpProxy struct {
	lis    net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	// rejected counts the connections turned away while cut.
	rejected int
	wg       sync.WaitGroup
}

// startProxy listens on 127.0.0.1 and forwards to target until the test
// ends.
func startProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p := &tcpProxy{lis: lis, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		_ = lis.Close()
		p.closeAll()
		p.wg.Wait()
	})
	return p
}

func (p *tcpProxy) addr() string { return p.lis.Addr().String() }

func (p *tcpProxy) accept() {
	for {
		client, err := p.lis.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			// Not TLS: the client's handshake fails with "first record
			// does not look like a TLS handshake". client-go resumes a
			// watch where it left off after a refused connection (a
			// closed listener) and retries a request that met an EOF or a
			// reset; after this error its reflector lists again.
			p.rejected++
			p.mu.Unlock()
			_, _ = client.Write([]byte("HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n\r\n"))
			_ = client.Close()
			continue
		}
		p.conns[client] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() { p.forward(client) })
	}
}

func (p *tcpProxy) forward(client net.Conn) {
	defer p.drop(client)
	server, err := net.DialTimeout("tcp", p.target, 10*time.Second)
	if err != nil {
		return
	}
	p.mu.Lock()
	if p.cut {
		p.mu.Unlock()
		_ = server.Close()
		return
	}
	p.conns[server] = struct{}{}
	p.mu.Unlock()
	defer p.drop(server)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		done <- struct{}{}
	}
	go pipe(server, client)
	go pipe(client, server)
	// Either side ending ends both.
	<-done
	_ = client.Close()
	_ = server.Close()
	<-done
}

func (p *tcpProxy) drop(c net.Conn) {
	_ = c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *tcpProxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
	}
}

// cutOff closes every open connection and fails every new one until
// restore.
func (p *tcpProxy) cutOff() {
	p.mu.Lock()
	p.cut = true
	p.mu.Unlock()
	p.closeAll()
}

// turnedAway is how many connections were rejected while cut.
func (p *tcpProxy) turnedAway() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rejected
}

func (p *tcpProxy) restore() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// proxiedKubeconfig writes a copy of kubeconfig whose server is addr, on
// 127.0.0.1 like the API server's own address, so that its certificate
// still matches.
func proxiedKubeconfig(t *testing.T, kubeconfig, addr string) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	require.NoError(t, err)
	for _, cluster := range cfg.Clusters {
		u, err := url.Parse(cluster.Server)
		require.NoError(t, err)
		host, _, err := net.SplitHostPort(u.Host)
		require.NoError(t, err)
		require.Equal(t, "127.0.0.1", host, "the proxy listens on 127.0.0.1, the server's certificate must name it")
		u.Host = addr
		cluster.Server = u.String()
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}

// perPodUIDs reads every per-pod series of /metrics: family to pod name to
// the UIDs it has series for.
func perPodUIDs(t require.TestingT, url string) map[string]map[string][]string {
	fams := scrapeFamilies(t, url)
	out := map[string]map[string][]string{}
	for name, f := range fams {
		if !strings.HasPrefix(name, "podslo_pod_") {
			continue
		}
		for _, m := range f.GetMetric() {
			var pod, uid string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "pod":
					pod = l.GetValue()
				case "uid":
					uid = l.GetValue()
				}
			}
			if pod == "" {
				continue
			}
			if out[name] == nil {
				out[name] = map[string][]string{}
			}
			out[name][pod] = append(out[name][pod], uid)
			sort.Strings(out[name][pod])
		}
	}
	return out
}

// counterValue reads one series of a counter or gauge family, 0 when it is
// absent.
func counterValue(t require.TestingT, url, family string, labels map[string]string) float64 {
	fams := scrapeFamilies(t, url)
	for _, m := range fams[family].GetMetric() {
		if hasLabels(m, labels) {
			return m.GetCounter().GetValue() + m.GetGauge().GetValue()
		}
	}
	return 0
}

// TestDeletedWhileTheWatchWasDown cuts the exporter off the API server
// with a TCP proxy, deletes pods and re-creates one under the same name
// (a new UID) meanwhile, and lets it back: client-go lists again, and the
// pods missing from the list reach the exporter as deletions whose final
// state is unknown, through the relist path a unit test can only imitate.
// /metrics must then hold exactly the live pods, each with its own UID.
func TestDeletedWhileTheWatchWasDown(t *testing.T) {
	env := testenv.Start(t)
	c := env.Client
	ctx := context.Background()
	const ns = "gap"
	testenv.CreateNamespace(t, c, ns, nil)
	_, err := c.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "slow"}, Handler: "slow"}, metav1.CreateOptions{})
	require.NoError(t, err)

	apiserver, err := url.Parse(env.Config.Host)
	require.NoError(t, err)
	proxy := startProxy(t, apiserver.Host)
	const timeout = 20 * time.Second
	metrics := startExporter(t, Options{Kubeconfig: proxiedKubeconfig(t, env.Kubeconfig, proxy.addr()), StateDir: t.TempDir(),
		SandboxCreationTimeout: timeout}, WithTimeoutCheckInterval(100*time.Millisecond))

	// ready creates a pod whose sandbox became ready d after it was
	// scheduled, in the past.
	ready := func(name string, d time.Duration) *corev1.Pod {
		p := testenv.CreatePod(t, c, ns, podSpec{name: name, team: "a"}.pod())
		ct := p.CreationTimestamp.Time
		kubelet(t, c, p, condAt(corev1.PodScheduled, corev1.ConditionTrue, ct.Add(-10*time.Second)), condAt(corev1.PodReadyToStartContainers, corev1.ConditionTrue, ct.Add(-10*time.Second+d)))
		return p
	}
	// Pods that nothing changes while the watch is down: a relist sends
	// them again, a resumed watch does not.
	const unchanged = 8
	want := map[string][]string{}
	for i := range unchanged {
		p := ready(fmt.Sprintf("keep-%d", i), 2*time.Second)
		want[p.Name] = []string{string(p.UID)}
	}
	ready("gone-a", 3*time.Second)
	ready("gone-b", 4*time.Second)
	// "again" waits for its sandbox; scheduled 5s ago, it would time out
	// 15s from now if its UID were never forgotten.
	old := testenv.CreatePod(t, c, ns, podSpec{name: "again", team: "a"}.pod())
	oldScheduled := old.CreationTimestamp.Time.Add(-5 * time.Second)
	kubelet(t, c, old, condAt(corev1.PodScheduled, corev1.ConditionTrue, oldScheduled), condAt(corev1.PodReadyToStartContainers, corev1.ConditionFalse, oldScheduled))

	const creation = "podslo_sandbox_creation_duration_seconds"
	creationHeader := "# HELP " + creation + " Time from PodScheduled to the first PodReadyToStartContainers=True of each pod (KEP-3085), observed once per pod UID.\n# TYPE " + creation + " histogram\n"
	classes := `runtime_class="none",storage_class="none"`
	eventuallyMetrics(t, metrics, creationHeader+histogramText(creation, classes, 2, 2, 2, 2, 2, 2, 2, 2, 3, 4), creation)
	eventuallyValue(t, metrics, "podslo_sandbox_creation_pending_pods", map[string]string{"runtime_class": "none"}, 1)
	updates := func(t require.TestingT) float64 {
		return counterValue(t, metrics, "podslo_informer_events_total", map[string]string{"resource": "pods", "event": "update"})
	}
	updatesBefore := updates(t)

	proxy.cutOff()
	// Hold the cut until the exporter's clients have met it more than
	// once: the pod reflector tries to watch again at once when its
	// watch breaks, and fails; the others back off for a second or so.
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.GreaterOrEqual(c, proxy.turnedAway(), 4) }, 60*time.Second, 10*time.Millisecond)
	zero := int64(0)
	for _, name := range []string{"gone-a", "gone-b", "again"} {
		require.NoError(t, c.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero}))
	}
	// As a StatefulSet does: the same name, a new UID, and this time a
	// sandbox 5s after scheduling.
	again := ready("again", 5*time.Second)
	require.NotEqual(t, old.UID, again.UID)
	proxy.restore()

	// The relist: the pods unchanged while the watch was down come again,
	// as Replaced deltas, each counted as an update. A resumed watch sends
	// nothing for them; its updates are the three deletions' (a deletion
	// sets deletionTimestamp first, even with no grace period) and the
	// new "again"'s status: 4, fewer than the unchanged pods.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.GreaterOrEqual(c, updates(c), updatesBefore+unchanged, "no relist: a resumed watch does not send unchanged pods again")
	}, 60*time.Second, 50*time.Millisecond)

	// Exactly the live pods, each under its own UID.
	want["again"] = []string{string(again.UID)}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got := perPodUIDs(c, metrics)
		assert.Equal(c, want, got["podslo_pod_sandbox_creation_seconds"], "per-pod creation series")
		for family, pods := range got {
			for pod, uids := range pods {
				assert.Equal(c, want[pod], uids, "%s{pod=%q}", family, pod)
			}
		}
	}, 60*time.Second, 50*time.Millisecond)
	eventuallyValue(t, metrics, "podslo_pod_sandbox_creation_seconds", map[string]string{"pod": "again"}, 5)
	// Each observation once; the deleted pods' stay in the aggregate.
	eventuallyMetrics(t, metrics, creationHeader+histogramText(creation, classes, 2, 2, 2, 2, 2, 2, 2, 2, 3, 4, 5), creation)
	// Nothing waits for a sandbox: the old "again" is gone.
	eventuallyMetrics(t, metrics, "", "podslo_sandbox_creation_pending_pods", "podslo_pod_sandbox_pending_seconds")
	// Their terminations were never seen: three vanished.
	eventuallyValue(t, metrics, "podslo_observations_skipped_total", map[string]string{"sli": "termination", "reason": "vanished"}, 3)

	// No timeout for the old UID. A pod scheduled now, in a class of its
	// own, times out at least 5s after the old "again" would have: once
	// its timeout is counted, the old one's would have been.
	sentinel := testenv.CreatePod(t, c, ns, podSpec{name: "sentinel", team: "a", runtimeClass: "slow"}.pod())
	scheduled := time.Now().Truncate(time.Second)
	require.False(t, scheduled.Before(oldScheduled.Add(5*time.Second)))
	kubelet(t, c, sentinel, condAt(corev1.PodScheduled, corev1.ConditionTrue, scheduled), condAt(corev1.PodReadyToStartContainers, corev1.ConditionFalse, scheduled))
	eventuallyMetricsWithin(t, 2*timeout, metrics, `
# HELP podslo_sandbox_creation_timeouts_total Scheduled pods whose first sandbox was not ready within --sandbox-creation-timeout, counted once per pod.
# TYPE podslo_sandbox_creation_timeouts_total counter
podslo_sandbox_creation_timeouts_total{runtime_class="slow",storage_class="none"} 1
`, "podslo_sandbox_creation_timeouts_total")
	assert.Equal(t, map[string][]string{"sentinel": {string(sentinel.UID)}}, perPodUIDs(t, metrics)["podslo_pod_sandbox_pending_seconds"])
}

// TestNoTimeoutWhileTheWatchIsDown: a pod's sandbox becomes ready within
// the creation timeout while the exporter cannot reach the API server, and
// the timeout passes before it can again. The exporter must not conclude a
// timeout from an update it could not receive: once back, it records the
// creation, and no timeout.
func TestNoTimeoutWhileTheWatchIsDown(t *testing.T) {
	env := testenv.Start(t)
	c := env.Client
	const ns = "stale"
	testenv.CreateNamespace(t, c, ns, nil)
	apiserver, err := url.Parse(env.Config.Host)
	require.NoError(t, err)
	proxy := startProxy(t, apiserver.Host)
	logs := newLogLines(t)
	const timeout = 4 * time.Second
	metrics := startExporter(t, Options{Kubeconfig: proxiedKubeconfig(t, env.Kubeconfig, proxy.addr()), StateDir: t.TempDir(),
		SandboxCreationTimeout: timeout, Logger: logs.logger()}, WithTimeoutCheckInterval(100*time.Millisecond))

	pod := testenv.CreatePod(t, c, ns, podSpec{name: "web", team: "a"}.pod())
	scheduled := time.Now().Truncate(time.Second)
	kubelet(t, c, pod, condAt(corev1.PodScheduled, corev1.ConditionTrue, scheduled), condAt(corev1.PodReadyToStartContainers, corev1.ConditionFalse, scheduled))
	eventuallyValue(t, metrics, "podslo_sandbox_creation_pending_pods", map[string]string{"runtime_class": "none"}, 1)

	proxy.cutOff()
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.GreaterOrEqual(c, proxy.turnedAway(), 2) }, 60*time.Second, 10*time.Millisecond)
	// The sandbox is ready 2s after scheduling, within the timeout; the
	// exporter cannot see it.
	kubelet(t, c, pod, condAt(corev1.PodReadyToStartContainers, corev1.ConditionTrue, scheduled.Add(2*time.Second)))
	// The timeout passes while the watch is down, and the checks, every
	// 100ms, say they hold it.
	again := logs.waitHolding(t)
	time.Sleep(time.Until(scheduled.Add(timeout + 2*time.Second)))
	assert.Len(t, logs.matching(currentAgain), again, "the watch counted as current while cut off")
	proxy.restore()

	logs.waitCurrentAgain(t, again)
	const creation = "podslo_sandbox_creation_duration_seconds"
	eventuallyMetrics(t, metrics, "# HELP "+creation+" Time from PodScheduled to the first PodReadyToStartContainers=True of each pod (KEP-3085), observed once per pod UID.\n# TYPE "+creation+" histogram\n"+
		histogramText(creation, `runtime_class="none",storage_class="none"`, 2), creation)
	// Past the deadline and current again: a timeout would be counted by
	// now; the check runs every 100ms and has said it runs again.
	eventuallyMetrics(t, metrics, "", "podslo_sandbox_creation_timeouts_total", "podslo_sandbox_creation_pending_pods")
}

// TestTimeoutsWaitForTheEventWatch: a user-error pod's FailedMount event
// comes while the exporter is cut off, and the pod's creation timeout
// passes. When the exporter is back its pod watch resumes, but its event
// watch cannot (its read of events was revoked meanwhile): the timeout
// check must hold, since the event that makes the wait the author's
// mistake is not handled yet. Once the event watch is back, the pod counts
// as excluded, never as the platform's timeout.
func TestTimeoutsWaitForTheEventWatch(t *testing.T) {
	env := testenv.Start(t)
	c := env.Client
	ctx := context.Background()
	const ns = "blocked"
	testenv.CreateNamespace(t, c, ns, nil)
	// The exporter's identity: every read it needs, events through a
	// binding of their own that the test takes away and gives back.
	_, err := c.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "exporter"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	read := []string{"get", "list", "watch"}
	subject := []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "exporter"}}
	for name, rules := range map[string][]rbacv1.PolicyRule{
		"exporter-reads": {{APIGroups: []string{""}, Resources: []string{"pods", "persistentvolumeclaims"}, Verbs: read},
			{APIGroups: []string{"storage.k8s.io"}, Resources: []string{"storageclasses"}, Verbs: read},
			{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: read}},
		"exporter-events": {{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: read}},
	} {
		_, err := c.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	bind := func(role string) {
		t.Helper()
		_, err := c.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role},
			RoleRef: rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role}, Subjects: subject}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	bind("exporter-reads")
	bind("exporter-events")
	sa := env.ServiceAccountConfig(t, ns, "exporter", nil)
	kubeconfig := tokenKubeconfig(t, sa)

	apiserver, err := url.Parse(env.Config.Host)
	require.NoError(t, err)
	proxy := startProxy(t, apiserver.Host)
	logs := newLogLines(t)
	const timeout = 4 * time.Second
	metrics := startExporter(t, Options{Kubeconfig: proxiedKubeconfig(t, kubeconfig, proxy.addr()), StateDir: t.TempDir(),
		SandboxCreationTimeout: timeout, Logger: logs.logger()}, WithTimeoutCheckInterval(100*time.Millisecond))

	pod := testenv.CreatePod(t, c, ns, podSpec{name: "web", team: "a"}.pod())
	scheduled := time.Now().Truncate(time.Second)
	kubelet(t, c, pod, condAt(corev1.PodScheduled, corev1.ConditionTrue, scheduled), condAt(corev1.PodReadyToStartContainers, corev1.ConditionFalse, scheduled))
	eventuallyValue(t, metrics, "podslo_sandbox_creation_pending_pods", map[string]string{"runtime_class": "none", "user_error": "false"}, 1)

	require.NoError(t, c.RbacV1().ClusterRoleBindings().Delete(ctx, "exporter-events", metav1.DeleteOptions{}))
	proxy.cutOff()
	require.EventuallyWithT(t, func(c *assert.CollectT) { assert.GreaterOrEqual(c, proxy.turnedAway(), 2) }, 60*time.Second, 10*time.Millisecond)
	failedMount(t, c, pod, `MountVolume.SetUp failed for volume "creds" : secret "db" not found`)
	proxy.restore()

	// The pod watch resumes (a pod created now is seen) and the timeout
	// passes; the event watch is refused, and the checks, every 100ms,
	// hold.
	other := testenv.CreatePod(t, c, ns, podSpec{name: "other", team: "a"}.pod())
	now := time.Now().Truncate(time.Second)
	kubelet(t, c, other, condAt(corev1.PodScheduled, corev1.ConditionTrue, now), condAt(corev1.PodReadyToStartContainers, corev1.ConditionTrue, now.Add(time.Second)))
	eventuallyValue(t, metrics, "podslo_pod_sandbox_creation_seconds", map[string]string{"pod": "other"}, 1)
	again := logs.waitHolding(t)
	time.Sleep(time.Until(scheduled.Add(timeout + 2*time.Second)))
	assert.Len(t, logs.matching(currentAgain), again, "current while the event watch was refused")
	const pending = `# HELP podslo_sandbox_creation_pending_pods Scheduled pods still waiting for their first sandbox, by whether a user error was reported for them and whether their creation timed out.
# TYPE podslo_sandbox_creation_pending_pods gauge
`
	// timed_out="false": the check held.
	eventuallyMetrics(t, metrics, pending+`podslo_sandbox_creation_pending_pods{runtime_class="none",storage_class="none",timed_out="false",user_error="false"} 1
`, "podslo_sandbox_creation_timeouts_total", "podslo_sandbox_creations_excluded_total", "podslo_sandbox_creation_pending_pods")

	bind("exporter-events")
	// client-go backs off a refused list for up to a minute.
	eventuallyMetricsWithin(t, 3*time.Minute, metrics, pending+`podslo_sandbox_creation_pending_pods{runtime_class="none",storage_class="none",timed_out="true",user_error="true"} 1
# HELP podslo_sandbox_creations_excluded_total Sandbox creations and timeouts left out of the SLI, by reason (user_error: a FailedMount event for a missing Secret or ConfigMap).
# TYPE podslo_sandbox_creations_excluded_total counter
podslo_sandbox_creations_excluded_total{reason="user_error",runtime_class="none",storage_class="none"} 1
`, "podslo_sandbox_creation_timeouts_total", "podslo_sandbox_creations_excluded_total", "podslo_sandbox_creation_pending_pods")
	logs.waitCurrentAgain(t, again)
}

// The pipeline logs each change of its timeout check: holding, and
// current again. A start-up hold may come first, on a slow machine, so the
// tests compare counts rather than look for the first line.
const (
	holdingChecks = "Holding sandbox creation timeouts"
	currentAgain  = "Pod and event watches current again"
)

// waitHolding waits until the check's last word is that it holds, and
// returns how many times it had said it was current again by then.
func (l *logLines) waitHolding(t *testing.T) int {
	t.Helper()
	var again int
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		again = len(l.matching(currentAgain))
		assert.Greater(c, len(l.matching(holdingChecks)), again)
	}, 60*time.Second, 10*time.Millisecond, "the timeout check never held")
	return again
}

// waitCurrentAgain waits until the check says it is current again, more
// than the again times it had.
func (l *logLines) waitCurrentAgain(t *testing.T, again int) {
	t.Helper()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Greater(c, len(l.matching(currentAgain)), again)
	}, 3*time.Minute, 10*time.Millisecond, "the timeout check never said it was current again")
}
