package exporter

import (
	"context"
	"net"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/podslo/podslo/internal/testenv"
)

// runStoppableExporter runs the exporter in this process until stop or
// the end of the test, and returns its URL once ready.
func runStoppableExporter(t *testing.T, opts Options, log *logLines) (url string, stop func()) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	opts.Logger = log.logger()
	e, err := New(opts, WithListener(lis))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Start(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				assert.NoError(t, err, "exporter stopped with an error")
			case <-time.After(30 * time.Second):
				t.Error("exporter did not stop within 30s of cancel")
			}
		})
	}
	t.Cleanup(stop)
	url = "http://" + lis.Addr().String()
	waitReady(t, url)
	return url, stop
}

// policyEventsIn returns the exporter's Events in ns, as
// "policy reason: note", sorted.
func policyEventsIn(c kubernetes.Interface, ns string) ([]string, error) {
	list, err := c.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reportingComponent=" + eventsController})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ev := range list.Items {
		if ev.Type != corev1.EventTypeWarning || ev.InvolvedObject.Kind != "NetworkPolicy" || ev.InvolvedObject.APIVersion != "networking.k8s.io/v1" {
			out = append(out, "unexpected event: "+ev.Name)
			continue
		}
		out = append(out, ev.InvolvedObject.Name+" "+ev.Reason+": "+ev.Message)
	}
	sort.Strings(out)
	return out, nil
}

func eventuallyPolicyEvents(t *testing.T, c kubernetes.Interface, ns string, want []string) {
	t.Helper()
	sort.Strings(want)
	assert.EventuallyWithT(t, func(c2 *assert.CollectT) {
		got, err := policyEventsIn(c, ns)
		if assert.NoError(c2, err) {
			assert.Equal(c2, want, got)
		}
	}, 30*time.Second, 50*time.Millisecond)
}

// TestNetworkPolicyEvents runs exporters with and without
// --networkpolicy-events on a server that, like those before 1.33, stores
// CIDRs with host bits set: a Warning Event on each policy whose Supported
// condition turns False or Problem condition turns True, once per
// transition, also across a restart; none from the exporter without the
// flag.
func TestNetworkPolicyEvents(t *testing.T) {
	env := testenv.Start(t, testenv.APIServerFlag("feature-gates", "StrictIPCIDRValidation=false"))
	c := env.Client
	ctx := context.Background()
	const ns = "npev"
	testenv.CreateNamespace(t, c, ns, nil)
	create := func(name string, spec networkingv1.NetworkPolicySpec) {
		t.Helper()
		_, err := c.NetworkingV1().NetworkPolicies(ns).Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec}, metav1.CreateOptions{})
		require.NoError(t, err, name)
	}
	sctp := networkingv1.NetworkPolicySpec{PolicyTypes: npIngress, Ingress: npFrom([]networkingv1.NetworkPolicyPort{npPort(&npSCTP, intstr.FromInt32(9), nil)})}
	create("sctp", sctp)
	create("egress", networkingv1.NetworkPolicySpec{PolicyTypes: npEgress})
	create("fine", networkingv1.NetworkPolicySpec{PolicyTypes: npIngress})
	create("host-bits", networkingv1.NetworkPolicySpec{PolicyTypes: npIngress, Ingress: npFrom(nil, npBlock("192.168.1.5/24"))})

	profile := filepath.Join("..", "netpolicy", "testdata", "example-cni.yaml")
	const (
		sctpEvent     = "sctp NetworkPolicyUnsupported: Supported=False (Version): Needs NetworkPolicy 1.12 (sctp), newer than example-cni's maxVersion 1.8: the plugin may misread the policy"
		egressEvent   = "egress NetworkPolicyUnsupported: Supported=False (Unimplemented): Uses egress, which example-cni does not implement"
		hostBitsEvent = "host-bits NetworkPolicyProblem: Problem=True (AmbiguousCIDR): Interpreting 192.168.1.5/24 as 192.168.1.0/24 rather than 192.168.1.5/32"
	)

	// Without the flag, judged but never reported: it keeps running, so
	// an Event it wrote would show as a second one below.
	offLog := newLogLines(t)
	off, _ := runStoppableExporter(t, Options{Kubeconfig: env.Kubeconfig, StateDir: t.TempDir(), NetworkPluginProfile: profile}, offLog)
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Contains(c, scrapeText(c, off, "text/plain"), `podslo_networkpolicy_condition{namespace="npev",networkpolicy="host-bits",reason="AmbiguousCIDR",status="True",type="Problem"} 1`)
	}, 30*time.Second, 50*time.Millisecond)
	got, err := policyEventsIn(c, ns)
	require.NoError(t, err, "the API server takes reportingComponent as a field selector")
	assert.Empty(t, got, "no Event without --networkpolicy-events")

	on := Options{Kubeconfig: env.Kubeconfig, StateDir: t.TempDir(), NetworkPluginProfile: profile, NetworkPolicyEvents: true}
	firstLog := newLogLines(t)
	_, stop := runStoppableExporter(t, on, firstLog)
	want := []string{sctpEvent, egressEvent, hostBitsEvent}
	eventuallyPolicyEvents(t, c, ns, want)
	// The worker logs each Event as it hands it to the recorder, in the
	// order of its queue, which the writes, each in a goroutine of the
	// broadcaster, need not keep: the log says what was sent.
	eventLines := func(l *logLines, policy string) int {
		return len(l.matching(`msg="NetworkPolicy event"`, "networkpolicy="+policy+" "))
	}

	t.Run("a policy that turns unsupported gets one; an update that changes nothing, none", func(t *testing.T) {
		np, err := c.NetworkingV1().NetworkPolicies(ns).Get(ctx, "sctp", metav1.GetOptions{})
		require.NoError(t, err)
		np.Labels = map[string]string{"touched": "yes"}
		_, err = c.NetworkingV1().NetworkPolicies(ns).Update(ctx, np, metav1.UpdateOptions{})
		require.NoError(t, err)
		np, err = c.NetworkingV1().NetworkPolicies(ns).Get(ctx, "fine", metav1.GetOptions{})
		require.NoError(t, err)
		np.Spec = sctp
		_, err = c.NetworkingV1().NetworkPolicies(ns).Update(ctx, np, metav1.UpdateOptions{})
		require.NoError(t, err)
		want = append(want, "fine NetworkPolicyUnsupported: Supported=False (Version): Needs NetworkPolicy 1.12 (sctp), newer than example-cni's maxVersion 1.8: the plugin may misread the policy")
		firstLog.wait(t, `msg="NetworkPolicy event"`, "networkpolicy=fine ")
		// sctp's update was queued, and so judged, before fine's.
		assert.Equal(t, 1, eventLines(firstLog, "sctp"), "one Event for sctp, at the start")
		eventuallyPolicyEvents(t, c, ns, want)
	})

	t.Run("a restart reports nothing already reported", func(t *testing.T) {
		stop()
		restartLog := newLogLines(t)
		url, _ := runStoppableExporter(t, on, restartLog)
		assert.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.Contains(c, scrapeText(c, url, "text/plain"), `podslo_networkpolicy_min_version_info{min_version="1.12",namespace="npev",networkpolicy="fine"} 1`)
		}, 30*time.Second, 50*time.Millisecond)
		// Every policy the restarted exporter listed is queued before this
		// one, and one worker handles the queue in order: once this
		// policy's Event is there, any repeated one would be too.
		create("new-egress", networkingv1.NetworkPolicySpec{PolicyTypes: npEgress})
		want = append(want, "new-egress NetworkPolicyUnsupported: Supported=False (Unimplemented): Uses egress, which example-cni does not implement")
		restartLog.wait(t, `msg="NetworkPolicy event"`, "networkpolicy=new-egress ")
		assert.Len(t, restartLog.matching(`msg="NetworkPolicy event"`), 1, "only the new policy")
		restartLog.wait(t, `msg="Writing NetworkPolicy events"`, "earlier=4")
		eventuallyPolicyEvents(t, c, ns, want)
	})

	assert.Empty(t, offLog.matching(`msg="NetworkPolicy event"`), "nothing sent without --networkpolicy-events")
}
