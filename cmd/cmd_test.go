package cmd

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podslo/podslo/agent"
	"github.com/podslo/podslo/exporter"
	"github.com/podslo/podslo/scope"
)

var errNotRun = errors.New("captured, not run")

// parse runs `podslo args...` and returns the exporter options it would
// start with.
func parse(t *testing.T, args ...string) (*exporter.Options, error) {
	t.Helper()
	var got *exporter.Options
	root := newRoot(&bytes.Buffer{}, func(_ context.Context, e *exporter.Exporter) error {
		o := e.Options()
		got = &o
		return errNotRun
	})
	root.SetArgs(args)
	root.SetOut(&bytes.Buffer{})
	err := root.ExecuteContext(context.Background())
	if errors.Is(err, errNotRun) {
		err = nil
	}
	return got, err
}

func TestDefaults(t *testing.T) {
	o, err := parse(t, "exporter")
	require.NoError(t, err)
	assert.Equal(t, ":8080", o.ListenAddress)
	assert.Equal(t, "https://github.com/podslo/podslo/tree/main/dashboards", o.DashboardsURL)
	assert.Equal(t, "/var/lib/podslo", o.StateDir)
	assert.True(t, *o.PerPodMetrics)
	assert.Empty(t, o.PodLabels)
	assert.Empty(t, o.HistogramLabels)
	assert.Equal(t, time.Hour, o.MaxObservationAge)
	assert.Equal(t, []string{"PodReadyToStartContainers", "PodHasNetwork"}, o.SandboxConditionTypes)
	assert.Empty(t, o.Kubeconfig)
	assert.Empty(t, o.WebConfigFile, "plain HTTP unless a web config is given")
}

func TestConfigFile(t *testing.T) {
	o, err := parse(t, "exporter", "--config", "testdata/valid.yaml")
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:9100", o.ListenAddress)
	assert.Equal(t, "/tmp/podslo-state", o.StateDir)
	assert.False(t, *o.PerPodMetrics)
	assert.Equal(t, []string{"app", "team"}, o.PodLabels)
	assert.Equal(t, []string{"tier=annotation:example.com/tier"}, o.HistogramLabels)
	assert.Equal(t, 30*time.Minute, o.MaxObservationAge)
	assert.Equal(t, []string{"PodHasNetwork"}, o.SandboxConditionTypes)
}

// TestPrecedence: a flag beats the environment, which beats the file.
func TestPrecedence(t *testing.T) {
	t.Setenv("PODSLO_LISTEN_ADDRESS", "127.0.0.1:9200")
	t.Setenv("PODSLO_STATE_DIR", ":memory:")
	t.Setenv("PODSLO_POD_LABEL", "app,tier")
	t.Setenv("PODSLO_PER_POD_METRICS", "true")
	o, err := parse(t, "exporter", "--config", "testdata/valid.yaml", "--listen-address", "127.0.0.1:9300")
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:9300", o.ListenAddress, "flag")
	assert.Equal(t, ":memory:", o.StateDir, "env beats file")
	assert.Equal(t, []string{"app", "tier"}, o.PodLabels, "env lists are comma-separated")
	assert.True(t, *o.PerPodMetrics, "env beats file")
	assert.Equal(t, 30*time.Minute, o.MaxObservationAge, "file")
}

// parseAgent runs `podslo agent args...` and returns the agent options it
// would start with.
func parseAgent(t *testing.T, args ...string) (*agent.Options, error) {
	t.Helper()
	var got *agent.Options
	cmd := newAgentCommand(&bytes.Buffer{}, func(_ context.Context, a *agent.Agent) error {
		o := a.Options()
		got = &o
		return errNotRun
	})
	cmd.SetArgs(args)
	cmd.SetOut(&bytes.Buffer{})
	err := cmd.ExecuteContext(context.Background())
	if errors.Is(err, errNotRun) {
		err = nil
	}
	return got, err
}

// TestWebConfigFile: --web.config.file, PODSLO_WEB_CONFIG_FILE and the key
// web.config.file of --config all reach both components.
func TestWebConfigFile(t *testing.T) {
	const path = "testdata/web-config.yml"
	cfg := filepath.Join(t.TempDir(), "podslo.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("web.config.file: "+path+"\n"), 0o600))
	for _, tc := range []struct {
		name string
		args []string
		env  string
	}{
		{name: "flag", args: []string{"--web.config.file", path}},
		{name: "environment", env: path},
		{name: "config file", args: []string{"--config", cfg}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("PODSLO_WEB_CONFIG_FILE", tc.env)
			}
			o, err := parse(t, append([]string{"exporter"}, tc.args...)...)
			require.NoError(t, err)
			assert.Equal(t, path, o.WebConfigFile, "exporter")
			a, err := parseAgent(t, append([]string{"--node-name", "node-a"}, tc.args...)...)
			require.NoError(t, err)
			assert.Equal(t, path, a.WebConfigFile, "agent")
		})
	}
	t.Run("agent refuses a malformed web config", func(t *testing.T) {
		_, err := parseAgent(t, "--node-name", "node-a", "--web.config.file", "testdata/web-config-typo.yml")
		assert.EqualError(t, err, "--web.config.file \"testdata/web-config-typo.yml\": yaml: unmarshal errors:\n  line 1: field tls_config not found in type web.Config")
	})
}

func TestDashboardsURL(t *testing.T) {
	o, err := parse(t, "exporter", "--dashboards-url", "https://grafana.example.com/dashboards/f/podslo/")
	require.NoError(t, err)
	assert.Equal(t, "https://grafana.example.com/dashboards/f/podslo/", o.DashboardsURL)
}

func TestRepeatableFlags(t *testing.T) {
	o, err := parse(t, "exporter", "--pod-label", "app", "--pod-label", "team", "--histogram-label", "a=label:x", "--histogram-label", "b=annotation:y")
	require.NoError(t, err)
	assert.Equal(t, []string{"app", "team"}, o.PodLabels)
	assert.Equal(t, []string{"a=label:x", "b=annotation:y"}, o.HistogramLabels)
}

// TestInvalidConfigs: each testdata/invalid-*.yaml sits next to the exact
// error it must produce, in invalid-*.err.
func TestInvalidConfigs(t *testing.T) {
	files, err := filepath.Glob("testdata/invalid-*.yaml")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			want, err := os.ReadFile(strings.TrimSuffix(f, ".yaml") + ".err")
			require.NoError(t, err, "every invalid fixture needs its .err")
			_, err = parse(t, "exporter", "--config", f)
			require.Error(t, err)
			assert.Equal(t, strings.TrimSpace(string(want)), err.Error())
		})
	}
}

func TestBadLogFlags(t *testing.T) {
	_, err := parse(t, "exporter", "--log-format", "xml")
	assert.EqualError(t, err, `--log-format "xml": want text or json`)
	_, err = parse(t, "exporter", "--log-level", "loud")
	assert.ErrorContains(t, err, "--log-level")
}

// TestStrictValuesFromEverySource: a value that does not parse is an error
// naming its key and source, whether it comes from a flag, the environment
// or the file; nothing is read as a default or in another unit.
func TestStrictValuesFromEverySource(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		args []string
		want string
	}{
		{"env duration without unit", map[string]string{"PODSLO_MAX_OBSERVATION_AGE": "3600"}, nil,
			`PODSLO_MAX_OBSERVATION_AGE: "3600" is not a duration with a unit, such as "90s" or "1h"`},
		{"env duration banana", map[string]string{"PODSLO_SANDBOX_CREATION_TIMEOUT": "banana"}, nil,
			`PODSLO_SANDBOX_CREATION_TIMEOUT: "banana" is not a duration with a unit, such as "90s" or "1h"`},
		{"env bool yes", map[string]string{"PODSLO_PER_POD_METRICS": "yes"}, nil,
			`PODSLO_PER_POD_METRICS: "yes" is not true or false`},
		{"env bool banana", map[string]string{"PODSLO_PER_POD_METRICS": "banana"}, nil,
			`PODSLO_PER_POD_METRICS: "banana" is not true or false`},
		{"flag sub-second", nil, []string{"--max-observation-age=500ms"},
			`--max-observation-age must be a whole number of seconds (condition times have one-second precision), got 500ms`},
		{"flag fractional seconds", nil, []string{"--sandbox-creation-timeout=1500ms"},
			`--sandbox-creation-timeout must be a whole number of seconds (condition times have one-second precision), got 1.5s`},
		{"flag state-min-free", nil, []string{"--state-min-free=-1Mi"},
			`--state-min-free must not be negative, got -1048576`},
		{"flag state-min-free not a quantity", nil, []string{"--state-min-free=lots"},
			`invalid argument "lots" for "--state-min-free" flag: want a quantity of bytes, such as "64Mi"`},
		{"env state-min-free not a quantity", map[string]string{"PODSLO_STATE_MIN_FREE": "lots"}, nil,
			`PODSLO_STATE_MIN_FREE: "lots" is not a quantity of bytes, such as "64Mi"`},
		{"two bad values at once", map[string]string{"PODSLO_PER_POD_METRICS": "1", "PODSLO_MAX_OBSERVATION_AGE": "60"}, nil,
			"PODSLO_PER_POD_METRICS: \"1\" is not true or false\nPODSLO_MAX_OBSERVATION_AGE: \"60\" is not a duration with a unit, such as \"90s\" or \"1h\""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			_, err := parse(t, append([]string{"exporter"}, tt.args...)...)
			require.Error(t, err)
			assert.Equal(t, tt.want, err.Error())
		})
	}
}

func TestStrictValuesThatParse(t *testing.T) {
	t.Setenv("PODSLO_MAX_OBSERVATION_AGE", "90m")
	t.Setenv("PODSLO_PER_POD_METRICS", "FALSE")
	t.Setenv("PODSLO_STATE_MIN_FREE", "128Mi")
	t.Setenv("PODSLO_SANDBOX_CREATION_TIMEOUT", "") // empty is unset
	o, err := parse(t, "exporter")
	require.NoError(t, err)
	assert.Equal(t, 90*time.Minute, o.MaxObservationAge)
	assert.False(t, *o.PerPodMetrics)
	assert.Equal(t, int64(128<<20), o.StateMinFree)
	assert.Equal(t, 5*time.Minute, o.SandboxCreationTimeout)

	o, err = parse(t, "exporter", "--state-min-free", "1G", "--per-pod-metrics=true")
	require.NoError(t, err)
	assert.Equal(t, int64(1e9), o.StateMinFree)
	assert.True(t, *o.PerPodMetrics)
}

// TestRepeatableFlagsTakeCommas: a repeatable flag splits at commas in
// every source, as the environment and the file do.
func TestRepeatableFlagsTakeCommas(t *testing.T) {
	o, err := parse(t, "exporter", "--pod-label", "app, team", "--pod-label", "tier,", "--sandbox-condition-types", " PodHasNetwork ,")
	require.NoError(t, err)
	assert.Equal(t, []string{"app", "team", "tier"}, o.PodLabels)
	assert.Equal(t, []string{"PodHasNetwork"}, o.SandboxConditionTypes)
}

// TestAgentSources: the agent's flags take the environment and the file as
// the exporter's do; NODE_NAME comes after all of them.
func TestAgentSources(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "agent.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("max-probe-workers: 7\nmin-probe-period: 250ms\n"), 0o600))
	t.Setenv("NODE_NAME", "node-from-downward-api")
	t.Setenv("PODSLO_MAX_PROBE_WORKERS", "9")
	a, err := parseAgent(t, "--config", cfg)
	require.NoError(t, err)
	assert.Equal(t, "node-from-downward-api", a.NodeName)
	assert.Equal(t, 9, a.MaxProbeWorkers, "env beats file")
	assert.Equal(t, 250*time.Millisecond, a.MinProbePeriod, "file")
	assert.Equal(t, ":8081", a.ListenAddress, "default")

	t.Setenv("PODSLO_NODE_NAME", "node-b")
	a, err = parseAgent(t)
	require.NoError(t, err)
	assert.Equal(t, "node-b", a.NodeName, "PODSLO_NODE_NAME beats NODE_NAME")

	t.Setenv("PODSLO_MAX_PROBE_WORKERS", "010")
	a, err = parseAgent(t)
	require.NoError(t, err)
	assert.Equal(t, 10, a.MaxProbeWorkers, "decimal, not octal")

	t.Setenv("PODSLO_MAX_PROBE_WORKERS", "many")
	_, err = parseAgent(t)
	assert.EqualError(t, err, `PODSLO_MAX_PROBE_WORKERS: "many" is not a whole number`)
}

func TestScopeFlags(t *testing.T) {
	o, err := parse(t, "exporter", "--namespaces", "a,b", "--namespaces-denylist", "b", "--node-name", "node-1", "--shard", "1", "--total-shards", "3")
	require.NoError(t, err)
	assert.Equal(t, scope.Scope{Namespaces: []string{"a", "b"}, NamespacesDenylist: []string{"b"}, Node: "node-1", Shard: 1, TotalShards: 3}, o.Scope)
	o, err = parse(t, "exporter")
	require.NoError(t, err)
	assert.Equal(t, scope.Unscoped, o.Scope)
	o, err = parse(t, "exporter", "--pod", "podslo-exporter-1", "--pod-namespace", "monitoring")
	require.NoError(t, err)
	assert.Equal(t, scope.Autoshard{Pod: "podslo-exporter-1", Namespace: "monitoring"}, o.Autoshard)
}
