package exporter

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/podslo/podslo/internal/testenv"
)

// TestTLSOnRealAPIServer scrapes the exporter as Prometheus does with a
// ServiceMonitor's tlsConfig and basicAuth: over TLS, with basic auth from
// --web.config.file. Anything less is refused.
func TestTLSOnRealAPIServer(t *testing.T) {
	env := testenv.Start(t)
	c := env.Client
	const ns = "secured"
	testenv.CreateNamespace(t, c, ns, nil)
	wc := testenv.WriteWebConfig(t, map[string]string{"prometheus": "s3cret"})
	addr := runExporter(t, Options{Kubeconfig: env.Kubeconfig, StateDir: t.TempDir(), WebConfigFile: wc.Path})
	metrics := "https://" + addr + "/metrics"

	p := testenv.CreatePod(t, c, ns, podSpec{name: "web", team: "a"}.pod())
	created := p.CreationTimestamp.Time
	kubelet(t, c, p, condAt(corev1.PodScheduled, corev1.ConditionTrue, created), condAt(corev1.PodReadyToStartContainers, corev1.ConditionTrue, created.Add(3*time.Second)))
	want := `podslo_pod_sandbox_creation_seconds{namespace="secured",node="node-a",pod="web",runtime_class="none",storage_class="none",uid="` + string(p.UID) + `"} 3`

	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		status, body, err := testenv.Get(wc.Client, metrics, "prometheus", "s3cret")
		if !assert.NoError(ct, err) {
			return
		}
		assert.Equal(ct, http.StatusOK, status)
		assert.Contains(ct, strings.Split(body, "\n"), want)
	}, 60*time.Second, 50*time.Millisecond, "the pod's series over TLS with basic auth")

	for _, tc := range []struct{ name, user, password string }{
		{name: "no credentials"},
		{name: "wrong password", user: "prometheus", password: "guess"},
		{name: "unknown user", user: "mallory", password: "s3cret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body, err := testenv.Get(wc.Client, metrics, tc.user, tc.password)
			require.NoError(t, err)
			assert.Equal(t, http.StatusUnauthorized, status)
			assert.Equal(t, "Unauthorized\n", body)
		})
	}
	t.Run("plain HTTP", func(t *testing.T) {
		status, body, err := testenv.Get(http.DefaultClient, "http://"+addr+"/metrics", "prometheus", "s3cret")
		require.NoError(t, err)
		assert.Equal(t, http.StatusBadRequest, status)
		assert.NotContains(t, body, "podslo_")
	})
}
