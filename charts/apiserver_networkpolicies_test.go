package charts

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podslo/podslo/internal/testenv"
)

// testExporterNetworkPolicies runs the exporter with the chart's
// NetworkPolicy values, as the chart's service account: turned off, it
// needs and gets no permission on NetworkPolicies; with a profile, the
// ConfigMap's file is one the exporter accepts and judges by.
func testExporterNetworkPolicies(t *testing.T, env *testenv.Env, a *applier) {
	ctx := context.Background()
	admin := env.Client
	ensureNamespace(t, admin, "np-apps", nil)
	_, err := admin.NetworkingV1().NetworkPolicies("np-apps").Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "egress-only"},
		Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	// install applies the release's account and role, and returns what
	// the release renders and the exporter's arguments.
	install := func(t *testing.T, r rendering) (objects, []string) {
		objs := r.render(t)
		ensureNamespace(t, admin, r.namespace, nil)
		name := r.release + "-podslo-exporter"
		for _, o := range objs {
			switch o.GetKind() {
			case "ServiceAccount", "ClusterRole", "ClusterRoleBinding":
				if strings.HasPrefix(o.GetName(), name) {
					require.NoError(t, a.apply(o, false))
				}
			}
		}
		sts := into[appsv1.StatefulSet](t, objs.get(t, "StatefulSet", name))
		return objs, sts.Spec.Template.Spec.Containers[0].Args
	}

	t.Run("off", func(t *testing.T) {
		r := rendering{release: "np-off", namespace: "np-off", args: []string{"--set", "exporter.networkPolicies.enabled=false"}}
		_, args := install(t, r)
		cfg := env.ServiceAccountConfig(t, r.namespace, "np-off-podslo-exporter", nil)
		addr := runExporter(t, env, cfg, args)
		assert.NotContains(t, scrape(t, addr), "podslo_networkpolicy", "no NetworkPolicy series")
		_, err := testenv.ClientFor(t, cfg).NetworkingV1().NetworkPolicies("").List(ctx, metav1.ListOptions{})
		assert.True(t, apierrors.IsForbidden(err), "no permission left over: %v", err)
	})

	t.Run("a profile", func(t *testing.T) {
		r := rendering{release: "np-profile", namespace: "np-profile", args: []string{"--set-json",
			`exporter.networkPolicies.profile={"name":"example-cni","maxVersion":"1.8","unimplemented":["egress"]}`,
			"--set", "exporter.networkPolicies.targetPods=true"}}
		objs, args := install(t, r)
		addr := runWithProfile(t, env, a, r, objs, args)
		assert.EventuallyWithT(t, func(c *assert.CollectT) {
			body := scrape(c, addr)
			assert.Contains(c, body, `podslo_networkpolicy_condition{namespace="np-apps",networkpolicy="egress-only",reason="Unimplemented",status="False",type="Supported"} 1`)
			assert.Contains(c, body, `podslo_networkpolicy_target_pods{namespace="np-apps",networkpolicy="egress-only"} 0`)
		}, 30*time.Second, 100*time.Millisecond)
		sa := testenv.ClientFor(t, env.ServiceAccountConfig(t, r.namespace, "np-profile-podslo-exporter", nil))
		_, err := sa.EventsV1().Events("np-apps").Create(ctx, &eventsv1.Event{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
		assert.True(t, apierrors.IsForbidden(err), "no Events without exporter.networkPolicies.events: %v", err)
	})

	t.Run("events", func(t *testing.T) {
		r := rendering{release: "np-events", namespace: "np-events", args: []string{"--set-json",
			`exporter.networkPolicies.profile={"name":"example-cni","maxVersion":"1.8","unimplemented":["egress"]}`,
			"--set", "exporter.networkPolicies.events=true"}}
		objs, args := install(t, r)
		require.Contains(t, args, "--networkpolicy-events")
		runWithProfile(t, env, a, r, objs, args)
		// Written with the chart's role alone: the Event shows that it
		// suffices.
		assert.EventuallyWithT(t, func(c *assert.CollectT) {
			list, err := admin.CoreV1().Events("np-apps").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=egress-only,reason=NetworkPolicyUnsupported"})
			if !assert.NoError(c, err) || !assert.Len(c, list.Items, 1) {
				return
			}
			ev := list.Items[0]
			assert.Equal(c, corev1.EventTypeWarning, ev.Type)
			assert.Equal(c, "podslo-exporter", ev.ReportingController)
			assert.Equal(c, "Supported=False (Unimplemented): Uses egress, which example-cni does not implement", ev.Message)
		}, 30*time.Second, 100*time.Millisecond)
	})
}

// runWithProfile applies the release's profile ConfigMap and runs the
// exporter with the chart's arguments, on the file the kubelet would mount
// from it: the local path wins over the chart's, as the later flag.
func runWithProfile(t *testing.T, env *testenv.Env, a *applier, r rendering, objs objects, args []string) string {
	t.Helper()
	cm := objs.get(t, "ConfigMap", r.release+"-podslo-exporter-network-plugin-profile")
	require.NoError(t, a.apply(cm, false))
	stored, err := env.Client.CoreV1().ConfigMaps(r.namespace).Get(context.Background(), cm.GetName(), metav1.GetOptions{})
	require.NoError(t, err)
	file := filepath.Join(t.TempDir(), "profile.yaml")
	require.NoError(t, os.WriteFile(file, []byte(stored.Data["profile.yaml"]), 0o600))
	require.Contains(t, args, "--network-plugin-profile=/etc/podslo/network-plugin-profile/profile.yaml")
	cfg := env.ServiceAccountConfig(t, r.namespace, r.release+"-podslo-exporter", nil)
	return runExporter(t, env, cfg, append(args, "--network-plugin-profile="+file))
}

// scrape returns the exporter's /metrics as text.
func scrape(t assert.TestingT, addr string) string {
	resp, err := http.Get("http://" + addr + "/metrics")
	if !assert.NoError(t, err) {
		return ""
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	assert.NoError(t, err)
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	return strings.TrimSpace(string(body))
}
