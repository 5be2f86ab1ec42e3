package agent

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
