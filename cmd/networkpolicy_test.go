package cmd

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNetworkPolicyFlags(t *testing.T) {
	o, err := parse(t, "exporter")
	require.NoError(t, err)
	assert.True(t, *o.NetworkPolicies, "on by default")
	assert.Empty(t, o.NetworkPluginProfile)
	assert.False(t, o.NetworkPolicyTargetPods, "opt-in: it keeps every pod's labels")
	assert.False(t, o.NetworkPolicyEvents, "opt-in: it needs permission to write events")

	profile := filepath.Join("..", "netpolicy", "testdata", "example-cni.yaml")
	o, err = parse(t, "exporter", "--network-plugin-profile", profile, "--networkpolicy-target-pods", "--networkpolicy-events")
	require.NoError(t, err)
	assert.Equal(t, profile, o.NetworkPluginProfile)
	assert.True(t, o.NetworkPolicyTargetPods)
	assert.True(t, o.NetworkPolicyEvents)

	t.Setenv("PODSLO_NETWORKPOLICIES", "false")
	o, err = parse(t, "exporter")
	require.NoError(t, err)
	assert.False(t, *o.NetworkPolicies)

	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"--network-plugin-profile", profile}, "--network-plugin-profile needs --networkpolicies"},
		{[]string{"--networkpolicy-target-pods"}, "--networkpolicy-target-pods needs --networkpolicies"},
		{[]string{"--networkpolicy-events"}, "--networkpolicy-events needs --networkpolicies"},
		{[]string{"--networkpolicies=true", "--network-plugin-profile", "nope.yaml"}, "--network-plugin-profile: read network plugin profile: open nope.yaml: no such file or directory"},
		{[]string{"--networkpolicies=true", "--network-plugin-profile", filepath.Join("..", "netpolicy", "testdata", "profiles", "unknown-key.yaml")},
			"--network-plugin-profile: ../netpolicy/testdata/profiles/unknown-key.yaml: invalid network plugin profile: unimplmented: unknown key; the keys are name, maxVersion, unimplemented, enforcing"},
	} {
		_, err := parse(t, append([]string{"exporter"}, tc.args...)...)
		assert.EqualError(t, err, tc.err, "%v", tc.args)
	}
}
