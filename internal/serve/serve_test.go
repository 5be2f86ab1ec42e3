package serve

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/crypto/bcrypt"

	"github.com/podslo/podslo/internal/testenv"
)

// serveMux runs Serve with the shared mux until the test ends and returns
// the listener's address.
func serveMux(t *testing.T, webConfigFile string) string {
	t.Helper()
	wc, err := LoadWebConfig(webConfigFile)
	require.NoError(t, err)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("up 1\n")) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, lis, Mux(metrics, func() bool { return true }), wc, 5*time.Second, slog.New(slog.DiscardHandler))
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err, "Serve stopped with an error")
		case <-time.After(30 * time.Second):
			t.Error("Serve did not stop within 30s of cancel")
		}
	})
	return lis.Addr().String()
}

func TestServeWithoutWebConfig(t *testing.T) {
	addr := serveMux(t, "")
	status, body, err := testenv.Get(http.DefaultClient, "http://"+addr+"/metrics", "", "")
	require.NoError(t, err)
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, "up 1\n", body)
}

func TestServeWithWebConfig(t *testing.T) {
	wc := testenv.WriteWebConfig(t, map[string]string{"prometheus": "s3cret"})
	addr := serveMux(t, wc.Path)
	base := "https://" + addr

	for _, tc := range []struct {
		name, path, user, password string
		wantStatus                 int
		wantBody                   string
	}{
		{name: "metrics with the right credentials", path: "/metrics", user: "prometheus", password: "s3cret", wantStatus: http.StatusOK, wantBody: "up 1\n"},
		{name: "metrics without credentials", path: "/metrics", wantStatus: http.StatusUnauthorized, wantBody: "Unauthorized\n"},
		{name: "metrics with a wrong password", path: "/metrics", user: "prometheus", password: "guess", wantStatus: http.StatusUnauthorized, wantBody: "Unauthorized\n"},
		{name: "metrics for an unknown user", path: "/metrics", user: "mallory", password: "s3cret", wantStatus: http.StatusUnauthorized, wantBody: "Unauthorized\n"},
		// Probes sit behind the same config: a kubelet httpGet probe
		// cannot pass basic auth without the password in the pod spec.
		{name: "healthz without credentials", path: "/healthz", wantStatus: http.StatusUnauthorized, wantBody: "Unauthorized\n"},
		{name: "readyz without credentials", path: "/readyz", wantStatus: http.StatusUnauthorized, wantBody: "Unauthorized\n"},
		{name: "readyz with the right credentials", path: "/readyz", user: "prometheus", password: "s3cret", wantStatus: http.StatusOK, wantBody: "ok\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body, err := testenv.Get(wc.Client, base+tc.path, tc.user, tc.password)
			require.NoError(t, err)
			assert.Equal(t, tc.wantStatus, status)
			assert.Equal(t, tc.wantBody, body)
		})
	}

	t.Run("plain HTTP", func(t *testing.T) {
		status, body, err := testenv.Get(http.DefaultClient, "http://"+addr+"/metrics", "prometheus", "s3cret")
		require.NoError(t, err)
		assert.Equal(t, http.StatusBadRequest, status)
		assert.NotContains(t, body, "up 1")
	})

	t.Run("a client that does not trust the CA", func(t *testing.T) {
		_, _, err := testenv.Get(http.DefaultClient, base+"/metrics", "prometheus", "s3cret")
		assert.ErrorContains(t, err, "certificate signed by unknown authority")
	})

	// The config is read again on each request: a rotated password applies
	// without a restart.
	t.Run("rotated password", func(t *testing.T) {
		hash, err := bcrypt.GenerateFromPassword([]byte("n3w"), bcrypt.MinCost)
		require.NoError(t, err)
		raw, err := os.ReadFile(wc.Path)
		require.NoError(t, err)
		head, _, ok := strings.Cut(string(raw), "basic_auth_users:")
		require.True(t, ok, "web config without users:\n%s", raw)
		rotated := head + "basic_auth_users:\n  prometheus: " + string(hash) + "\n"
		require.NoError(t, os.WriteFile(wc.Path, []byte(rotated), 0o600))

		status, _, err := testenv.Get(wc.Client, base+"/metrics", "prometheus", "s3cret")
		require.NoError(t, err)
		assert.Equal(t, http.StatusUnauthorized, status, "old password")
		status, body, err := testenv.Get(wc.Client, base+"/metrics", "prometheus", "n3w")
		require.NoError(t, err)
		assert.Equal(t, http.StatusOK, status, "new password")
		assert.Equal(t, "up 1\n", body)
	})
}

func TestLoadWebConfig(t *testing.T) {
	wc := testenv.WriteWebConfig(t, map[string]string{"prometheus": "s3cret"})
	dir := filepath.Dir(wc.Path)
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		return path
	}
	tlsOnly := write("tls-only.yml", "tls_server_config:\n  cert_file: tls.crt\n  key_file: tls.key\n")
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	require.NoError(t, err)
	authOnly := write("auth-only.yml", "basic_auth_users:\n  prometheus: "+string(hash)+"\n")
	typo := write("typo.yml", "tls_config:\n  cert_file: tls.crt\n")
	noCert := write("no-cert.yml", "tls_server_config:\n  cert_file: missing.crt\n  key_file: tls.key\n")
	noKey := write("no-key.yml", "tls_server_config:\n  cert_file: tls.crt\n")
	badHash := write("bad-hash.yml", "basic_auth_users:\n  prometheus: s3cret\n")
	missing := filepath.Join(dir, "missing.yml")

	for _, tc := range []struct {
		name          string
		path          string
		wantTLS       bool
		wantBasicAuth bool
		wantErr       string
	}{
		{name: "none", path: ""},
		{name: "TLS and basic auth", path: wc.Path, wantTLS: true, wantBasicAuth: true},
		{name: "TLS only", path: tlsOnly, wantTLS: true},
		{name: "basic auth only", path: authOnly, wantBasicAuth: true},
		{name: "unknown key", path: typo, wantErr: "yaml: unmarshal errors:\n  line 1: field tls_config not found in type web.Config"},
		{name: "missing certificate", path: noCert, wantErr: "failed to read cert_file (" + filepath.Join(dir, "missing.crt") + "): open " + filepath.Join(dir, "missing.crt") + ": no such file or directory"},
		{name: "no key", path: noKey, wantErr: "missing one of key or key_file"},
		{name: "password not hashed", path: badHash, wantErr: "crypto/bcrypt: hashedSecret too short to be a bcrypted password"},
		{name: "missing file", path: missing, wantErr: "open " + missing + ": no such file or directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := LoadWebConfig(tc.path)
			if tc.wantErr != "" {
				assert.EqualError(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, WebConfig{File: tc.path, TLS: tc.wantTLS, BasicAuth: tc.wantBasicAuth}, got)
		})
	}
}

func TestProfiling(t *testing.T) {
	mux := Mux(http.NotFoundHandler(), func() bool { return true })
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	status, _ := get("/debug/pprof/goroutine?debug=1")
	assert.Equal(t, http.StatusNotFound, status, "profiles are served only when asked for")

	Profiling(mux)
	status, body := get("/debug/pprof/goroutine?debug=1")
	assert.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, "goroutine profile: total", "the goroutine profile, in text")
	assert.Contains(t, body, "TestProfiling", "this goroutine is in it")
	status, body = get("/debug/pprof/cmdline")
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, strings.Join(os.Args, "\x00"), body)
}
