package agent

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podslo/podslo/internal/serve"
	"github.com/podslo/podslo/internal/testenv"
)

func TestDefaults(t *testing.T) {
	a, err := New(Options{NodeName: "node-a"})
	require.NoError(t, err)
	o := a.Options()
	assert.Equal(t, ":8081", o.ListenAddress)
	assert.Equal(t, "podslo.io/Stable", o.StableConditionType)
	assert.Equal(t, 5*time.Second, o.ShutdownTimeout)
	assert.Equal(t, "podslo.io/ProbeReady", o.ProbeConditionType)
	assert.Equal(t, 100*time.Millisecond, o.MinProbePeriod)
	assert.Equal(t, 110, o.MaxProbeWorkers)
	assert.NotNil(t, o.Logger)
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{
			name: "no node",
			opts: Options{},
			want: "--node-name is required: set it, or the NODE_NAME environment variable (a DaemonSet sets it from spec.nodeName)",
		},
		{
			name: "node name not a DNS subdomain",
			opts: Options{NodeName: "Node_A"},
			want: `--node-name "Node_A": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		},
		{
			name: "listen address without port",
			opts: Options{NodeName: "node-a", ListenAddress: "8081"},
			want: `--listen-address "8081": address 8081: missing port in address`,
		},
		{
			name: "condition type without domain",
			opts: Options{NodeName: "node-a", StableConditionType: "Stable"},
			want: `--stable-condition-type: new owner: invalid condition type "Stable": custom condition types need a domain prefix (example.com/Stable)`,
		},
		{
			name: "the kubelet's Ready",
			opts: Options{NodeName: "node-a", StableConditionType: "Ready"},
			want: `--stable-condition-type: new owner: invalid condition type "Ready": custom condition types need a domain prefix (example.com/Ready)`,
		},
		{
			name: "condition type not a qualified name",
			opts: Options{NodeName: "node-a", StableConditionType: "podslo.io/not stable"},
			want: `--stable-condition-type: new owner: invalid condition type "podslo.io/not stable": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`,
		},
		{
			name: "probe condition type without domain",
			opts: Options{NodeName: "node-a", ProbeConditionType: "ProbeReady"},
			want: `--probe-condition-type: new owner: invalid condition type "ProbeReady": custom condition types need a domain prefix (example.com/ProbeReady)`,
		},
		{
			name: "one type for both conditions",
			opts: Options{NodeName: "node-a", ProbeConditionType: "podslo.io/Stable"},
			want: `--probe-condition-type "podslo.io/Stable": must differ from --stable-condition-type`,
		},
		{
			name: "negative probe bounds",
			opts: Options{NodeName: "node-a", MinProbePeriod: -time.Millisecond, MaxProbeWorkers: -1},
			want: "--min-probe-period must not be negative, got -1ms\n--max-probe-workers must not be negative, got -1",
		},
		{
			name: "missing web config",
			opts: Options{NodeName: "node-a", WebConfigFile: "/nonexistent/web-config.yml"},
			want: `--web.config.file "/nonexistent/web-config.yml": open /nonexistent/web-config.yml: no such file or directory`,
		},
		{
			name: "everything wrong at once",
			opts: Options{ListenAddress: "nowhere", StableConditionType: "Stable", ShutdownTimeout: -time.Second},
			want: "--node-name is required: set it, or the NODE_NAME environment variable (a DaemonSet sets it from spec.nodeName)\n" +
				`--listen-address "nowhere": address nowhere: missing port in address` + "\n" +
				`--stable-condition-type: new owner: invalid condition type "Stable": custom condition types need a domain prefix (example.com/Stable)` + "\n" +
				"shutdown timeout must not be negative, got -1s",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.opts
			o.Logger = slog.New(slog.DiscardHandler)
			_, err := New(o)
			assert.EqualError(t, err, tc.want)
			assert.Equal(t, tc.opts.NodeName == "", errors.Is(err, ErrNoNodeName))
		})
	}
}

// TestNewResolvesOnce: New loads the web config and parses the condition
// types once, reporting every bad one at once with its flag, and the agent
// is built from what it parsed.
func TestNewResolvesOnce(t *testing.T) {
	typo := filepath.Join(t.TempDir(), "web-config.yml")
	require.NoError(t, os.WriteFile(typo, []byte("tls_config:\n  cert_file: tls.crt\n"), 0o600))
	_, err := New(Options{NodeName: "node-a", WebConfigFile: typo, StableConditionType: "Stable", ProbeConditionType: "ProbeReady"})
	require.Error(t, err)
	msg := err.Error()
	for _, want := range []string{
		`--web.config.file "` + typo + `": yaml: unmarshal errors:`,
		`--stable-condition-type: new owner: `,
		`--probe-condition-type: new owner: `,
	} {
		assert.Equal(t, 1, strings.Count(msg, want), "reported once: %s\nin:\n%s", want, msg)
	}

	wc := testenv.WriteWebConfig(t, map[string]string{"prometheus": "s3cret"})
	a, err := New(Options{NodeName: "node-a", WebConfigFile: wc.Path, StableConditionType: "example.com/Stable"})
	require.NoError(t, err)
	assert.Equal(t, serve.WebConfig{File: wc.Path, TLS: true, BasicAuth: true}, a.cfg.web)
	assert.True(t, a.cfg.stable.Owns("example.com/Stable"))
	assert.False(t, a.cfg.stable.Owns(DefaultStableConditionType))
	assert.True(t, a.cfg.probe.Owns(DefaultProbeConditionType))
}
