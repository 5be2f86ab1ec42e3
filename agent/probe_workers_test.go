package agent

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/podslo/podslo/agent/probe"
)

// TestDecide runs sequences of probe results through the thresholds, as a
// worker does, and lists the statuses the worker would want written.
func TestDecide(t *testing.T) {
	pr, err := probe.Parse(`{"tcpSocket":{"port":80},"successThreshold":2,"failureThreshold":3}`, 0)
	require.NoError(t, err)
	for _, tc := range []struct {
		name    string
		results string // s success, f failure, t timeout
		want    []string
	}{
		{"first success below successThreshold", "s", []string{"-"}},
		{"successThreshold reached", "ss", []string{"-", "True/ProbeSucceeded"}},
		{"failures below failureThreshold decide nothing", "ff", []string{"-", "-"}},
		{"failureThreshold reached", "fff", []string{"-", "-", "False/ProbeFailed"}},
		{"timeouts count as failures, the last one names the reason", "fft", []string{"-", "-", "False/ProbeTimeout"}},
		{"a success breaks a run of failures", "ffsff", []string{"-", "-", "-", "-", "-"}},
		{"a failure breaks a run of successes", "sfs", []string{"-", "-", "-"}},
		{"runs go on past the threshold", "ssss", []string{"-", "True/ProbeSucceeded", "True/ProbeSucceeded", "True/ProbeSucceeded"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			var run probeRun
			for _, r := range tc.results {
				out := probe.Outcome{Result: map[rune]probe.Result{'s': probe.Success, 'f': probe.Failure, 't': probe.Timeout}[r], Message: "boom"}
				cond, ok := decide(pr, out, run.add(out.Result))
				if !ok {
					got = append(got, "-")
					continue
				}
				if cond.Status == corev1.ConditionFalse {
					assert.Equal(t, "boom", cond.Message)
				}
				got = append(got, string(cond.Status)+"/"+cond.Reason)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestTruncate(t *testing.T) {
	assert.Equal(t, "short", truncate("short"))
	long := truncate(strings.Repeat("x", 5000))
	assert.Len(t, long, maxMessage)
	assert.True(t, strings.HasSuffix(long, "…"))
}
