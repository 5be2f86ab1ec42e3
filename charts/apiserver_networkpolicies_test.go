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
		for _, kind := range []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding"} {
			require.NoError(t, a.apply(objs.get(t, kind, name), false))
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
		cm := objs.get(t, "ConfigMap", "np-profile-podslo-exporter-network-plugin-profile")
		require.NoError(t, a.apply(cm, false))
		// The file the kubelet would mount from the ConfigMap; the local
		// path wins over the chart's, as the later flag.
		stored, err := admin.CoreV1().ConfigMaps(r.namespace).Get(ctx, cm.GetName(), metav1.GetOptions{})
		require.NoError(t, err)
		file := filepath.Join(t.TempDir(), "profile.yaml")
		require.NoError(t, os.WriteFile(file, []byte(stored.Data["profile.yaml"]), 0o600))
		require.Contains(t, args, "--network-plugin-profile=/etc/podslo/network-plugin-profile/profile.yaml")
		cfg := env.ServiceAccountConfig(t, r.namespace, "np-profile-podslo-exporter", nil)
		addr := runExporter(t, env, cfg, append(args, "--network-plugin-profile="+file))
		assert.EventuallyWithT(t, func(c *assert.CollectT) {
			body := scrape(c, addr)
			assert.Contains(c, body, `podslo_networkpolicy_condition{namespace="np-apps",networkpolicy="egress-only",reason="Unimplemented",status="False",type="Supported"} 1`)
			assert.Contains(c, body, `podslo_networkpolicy_target_pods{namespace="np-apps",networkpolicy="egress-only"} 0`)
		}, 30*time.Second, 100*time.Millisecond)
	})
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
