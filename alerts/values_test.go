package alerts

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWithValuesRefusesWhatTheChartRefuses(t *testing.T) {
	spec, err := Default()
	require.NoError(t, err)
	for _, tc := range []struct{ values, want string }{
		{"monitoring: {slos: {no_such_slo: {objective: 99}}}", "monitoring.slos.no_such_slo: slos.yaml has no SLO of that name"},
		{"monitoring: {slos: {termination_latency: {objectve: 99}}}", `unknown field "objectve"`},
		{"monitoring: {slos: {sandbox_creation_success: {threshold: 5s}}}", "sandbox_creation_success counts successes and failures: it has no threshold"},
		{"monitoring: {slos: {termination_latency: {threshold: 7s}}}", "7s is not a bucket bound"},
		{"monitoring: {slos: {termination_latency: {objective: 100}}}", "strictly between 0 and 100"},
		{"monitoring: {extraSLOs: {x: {from: nope, alert: PodsloX, title: X, matchers: ['a=\"b\"']}}}", `monitoring.extraSLOs.x.from: "nope" is not an SLO of slos.yaml`},
		{"monitoring: {extraSLOs: {x: {from: termination_latency, alert: PodsloTerminationLatencyBudgetBurn, title: X, matchers: ['a=\"b\"']}}}", "is used twice"},
		{"monitoring: [1]", "monitoring"},
	} {
		_, err := spec.WithValues([]byte(tc.values))
		require.Error(t, err, tc.values)
		assert.Contains(t, err.Error(), tc.want, tc.values)
	}
	same, err := spec.WithValues([]byte("exporter: {port: 9000}\nmonitoring: {clusterLabel: k8s}\n"))
	require.NoError(t, err)
	assert.Equal(t, spec.SLOs, same.SLOs, "values that do not concern the SLOs change nothing")
}
