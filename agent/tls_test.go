package agent

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podslo/podslo/internal/testenv"
)

// TestTLSOnRealAPIServer scrapes the agent over TLS with basic auth from
// --web.config.file, as a PodMonitor with tlsConfig and basicAuth would;
// /readyz is behind the same config, and anything less is refused.
func TestTLSOnRealAPIServer(t *testing.T) {
	env := testenv.Start(t)
	wc := testenv.WriteWebConfig(t, map[string]string{"prometheus": "s3cret"})
	addr := runAgent(t, Options{NodeName: "node-a", WebConfigFile: wc.Path}, WithRestConfig(env.Config))
	base := "https://" + addr

	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		status, body, err := testenv.Get(wc.Client, base+"/readyz", "prometheus", "s3cret")
		if assert.NoError(c, err) {
			assert.Equal(c, http.StatusOK, status)
			assert.Equal(c, "ok\n", body)
		}
	}, 60*time.Second, 20*time.Millisecond, "agent never became ready over TLS")

	status, body, err := testenv.Get(wc.Client, base+"/metrics", "prometheus", "s3cret")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, status)
	assert.Contains(t, strings.Split(body, "\n"), writesName+`{condition_type="podslo.io/Stable",result="success"} 0`)

	for _, tc := range []struct{ name, path, user, password string }{
		{name: "metrics without credentials", path: "/metrics"},
		{name: "metrics with a wrong password", path: "/metrics", user: "prometheus", password: "guess"},
		{name: "readyz without credentials", path: "/readyz"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body, err := testenv.Get(wc.Client, base+tc.path, tc.user, tc.password)
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
