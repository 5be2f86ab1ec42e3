package exporter

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"

	podslocollectors "github.com/podslo/podslo/collectors"
	"github.com/podslo/podslo/informers"
	"github.com/podslo/podslo/internal/kube/kubetest"
	"github.com/podslo/podslo/internal/serve"
	"github.com/podslo/podslo/internal/testenv"
	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/scope"
	"github.com/podslo/podslo/sli"
	"github.com/podslo/podslo/store"
)

// TestNewResolvesOneConfig: New resolves, once, the configuration that the
// pipeline and the informers are both built from, with lifecycle's
// defaults for what the options leave unset, and Options reports them.
func TestNewResolvesOneConfig(t *testing.T) {
	e, err := New(Options{
		StateDir:            store.InMemory,
		PodLabels:           []string{"app"},
		HistogramLabels:     []string{"team=label:team", "tier=annotation:example.com/tier"},
		StableConditionType: "example.com/Stable",
		MaxObservationAge:   2 * time.Hour,
		WatchTolerance:      100 * time.Millisecond,
	})
	require.NoError(t, err)
	assert.Equal(t, lifecycle.Config{
		SandboxConditionTypes:  lifecycle.DefaultSandboxConditionTypes,
		MaxObservationAge:      2 * time.Hour,
		WatchTolerance:         100 * time.Millisecond,
		SandboxCreationTimeout: lifecycle.DefaultSandboxCreationTimeout,
		StableConditionType:    "example.com/Stable",
	}, e.cfg.lifecycle)
	assert.Equal(t, sli.HistogramLabels{{Name: "team", Source: sli.FromLabel, Key: "team"}, {Name: "tier", Source: sli.FromAnnotation, Key: "example.com/tier"}}, e.cfg.histogramLabels)
	assert.Equal(t, podslocollectors.Labels{Pod: []string{"app"}, Histogram: []string{"team", "tier"}}, e.cfg.labels)
	assert.Equal(t, []string{"app", "team"}, e.cfg.keepLabels, "the trim keeps the pod labels and the histogram labels' sources")
	assert.Equal(t, []string{"example.com/tier"}, e.cfg.keepAnnotations)

	o := e.Options()
	assert.Equal(t, 2*time.Hour, o.MaxObservationAge)
	assert.Equal(t, lifecycle.DefaultSandboxCreationTimeout, o.SandboxCreationTimeout)
	assert.Equal(t, []string{string(corev1.PodReadyToStartContainers), "PodHasNetwork"}, o.SandboxConditionTypes)
	assert.Equal(t, "example.com/Stable", o.StableConditionType)
}

func TestNewRejectsHistogramLabels(t *testing.T) {
	for spec, want := range map[string]string{
		"team":              `--histogram-label "team": want NAME=label:KEY, NAME=annotation:KEY, NAME=node-label:KEY or NAME=owner-kind`,
		"phase=label:phase": `--histogram-label: histogram label name "phase" is used twice or clashes with a built-in label`,
	} {
		_, err := New(Options{StateDir: store.InMemory, HistogramLabels: []string{spec}})
		assert.ErrorContains(t, err, want, spec)
	}
}

// TestNewResolvesDimensionWatches: the Node watch keeps exactly the node
// label keys, the ReplicaSet and Job watches run only for owner-kind, and
// neither key reaches the pod trim.
func TestNewResolvesDimensionWatches(t *testing.T) {
	e, err := New(Options{StateDir: store.InMemory, HistogramLabels: []string{"zone=node-label:topology.kubernetes.io/zone", "kind=owner-kind", "team=label:team"}})
	require.NoError(t, err)
	assert.Equal(t, []string{"topology.kubernetes.io/zone"}, e.cfg.nodeLabels)
	assert.True(t, e.cfg.ownerKind)
	assert.Equal(t, []string{"team"}, e.cfg.keepLabels)
	assert.Empty(t, e.cfg.keepAnnotations)
	assert.Equal(t, []string{"zone", "kind", "team"}, e.cfg.labels.Histogram)

	e, err = New(Options{StateDir: store.InMemory, HistogramLabels: []string{"team=label:team"}})
	require.NoError(t, err)
	assert.Empty(t, e.cfg.nodeLabels, "no Node watch")
	assert.False(t, e.cfg.ownerKind, "no ReplicaSet or Job watch")
}

// TestNewReportsEachBadSettingOnce: New parses every setting once, so a bad
// one is reported once, with the flag that sets it (and, for a file, the
// file), all in one error.
func TestNewReportsEachBadSettingOnce(t *testing.T) {
	dir := t.TempDir()
	webConfig := filepath.Join(dir, "web-config.yml")
	require.NoError(t, os.WriteFile(webConfig, []byte("tls_config:\n  cert_file: tls.crt\n"), 0o600))
	_, err := New(Options{
		StateDir:             store.InMemory,
		WebConfigFile:        webConfig,
		HistogramLabels:      []string{"team"},
		UserErrorEventRegex:  "(",
		NetworkPluginProfile: filepath.Join("..", "netpolicy", "testdata", "profiles", "unknown-key.yaml"),
		Scope:                scope.Scope{Shard: 2, TotalShards: 2},
	})
	require.Error(t, err)
	msg := err.Error()
	for _, want := range []string{
		`--web.config.file "` + webConfig + `": yaml: unmarshal errors:`,
		`--histogram-label "team": want NAME=label:KEY`,
		"--user-error-event-regex: error parsing regexp: missing closing ): `(`",
		"--network-plugin-profile: ../netpolicy/testdata/profiles/unknown-key.yaml: invalid network plugin profile",
		"--shard must be in [0, --total-shards) = [0, 2), got 2",
	} {
		assert.Equal(t, 1, strings.Count(msg, want), "reported once: %s\nin:\n%s", want, msg)
	}
	assert.Len(t, strings.Split(msg, "\n"), 6, "one line per bad setting, the web config's two:\n%s", msg)
}

// TestNewResolvesEachSettingOnce: the components get what New parsed: the
// compiled regular expression, the loaded profile, the validated web config
// and the defaulted scope. The profile is not read again when the
// components are built: it may be gone by then.
func TestNewResolvesEachSettingOnce(t *testing.T) {
	wc := testenv.WriteWebConfig(t, map[string]string{"prometheus": "s3cret"})
	raw, err := os.ReadFile(filepath.Join("..", "netpolicy", "testdata", "example-cni.yaml"))
	require.NoError(t, err)
	profile := filepath.Join(t.TempDir(), "profile.yaml")
	require.NoError(t, os.WriteFile(profile, raw, 0o600))

	e, err := New(Options{
		StateDir:             store.InMemory,
		WebConfigFile:        wc.Path,
		UserErrorEventRegex:  `secret "[^"]*" not found`,
		NetworkPluginProfile: profile,
	})
	require.NoError(t, err)
	assert.Equal(t, serve.WebConfig{File: wc.Path, TLS: true, BasicAuth: true}, e.cfg.web)
	assert.Equal(t, `secret "[^"]*" not found`, e.cfg.userErrors.String())
	require.NotNil(t, e.cfg.profile)
	assert.Equal(t, scope.Unscoped, e.Options().Scope, "the zero scope is the whole cluster")

	require.NoError(t, os.Remove(profile))
	o := e.Options()
	n := o.networkPolicies(kubetest.Wrap(fake.NewClientset()), e.cfg.profile, func(string, string) {}, o.Logger)
	require.NotNil(t, n)
	assert.Same(t, e.cfg.profile, n.profile, "the components judge against the profile New loaded")

	e, err = New(Options{StateDir: store.InMemory})
	require.NoError(t, err)
	assert.Equal(t, serve.WebConfig{}, e.cfg.web, "plain HTTP")
	assert.Equal(t, informers.DefaultUserErrorEventRegex, e.cfg.userErrors.String())
	assert.Nil(t, e.cfg.profile, "support is not judged")
}

func TestNewResolvesTheFamilyFilter(t *testing.T) {
	e, err := New(Options{StateDir: store.InMemory, MetricDenylist: []string{"podslo_pod_.*"}})
	require.NoError(t, err)
	assert.False(t, e.cfg.families.Keep("podslo_pod_readiness_seconds"))
	assert.True(t, e.cfg.families.Keep("podslo_readiness_duration_seconds"))

	_, err = New(Options{StateDir: store.InMemory, MetricAllowlist: []string{"podslo_.*"}, MetricDenylist: []string{"go_.*"}})
	require.ErrorContains(t, err, "--metric-allowlist and --metric-denylist are exclusive")
}

// On a real API server, a denied family is gone from /metrics, per-pod ones
// included, and nothing else is.
func TestMetricDenylistOnRealAPIServer(t *testing.T) {
	env := testenv.Start(t)
	url := startExporter(t, Options{Kubeconfig: env.Kubeconfig, StateDir: t.TempDir(), MetricDenylist: []string{"podslo_pod_.*", "go_.*"}})
	testenv.CreateNamespace(t, env.Client, "deny", nil)
	pod := testenv.CreatePod(t, env.Client, "deny", testenv.PodSpec{Name: "web"})
	// Scheduled, waiting for its sandbox: a per-pod pending series, were
	// it not denied.
	kubelet(t, env.Client, pod, condAt(corev1.PodScheduled, corev1.ConditionTrue, time.Now().Truncate(time.Second)))
	eventuallyValue(t, url, "podslo_sandbox_creation_pending_pods", nil, 1)
	fams := scrapeFamilies(t, url)
	for name := range fams {
		assert.False(t, strings.HasPrefix(name, "podslo_pod_") || strings.HasPrefix(name, "go_"), "%s is denied", name)
	}
	assert.Contains(t, fams, "podslo_informer_pods_watch_current")
	assert.Contains(t, fams, "process_cpu_seconds_total")
}
