package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/podslo/podslo/conditions"
)

// TestWriteRefusesOtherNodes: the field selector should never hand the
// agent another node's pod; if it does, nothing is sent.
func TestWriteRefusesOtherNodes(t *testing.T) {
	client := fake.NewClientset()
	owner, err := conditions.NewOwner(DefaultStableConditionType)
	require.NoError(t, err)
	reg := prometheus.NewRegistry()
	c := &controller{node: "node-a", client: client, owner: owner, log: slog.New(slog.DiscardHandler), m: newMetrics(reg, DefaultStableConditionType)}

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps", ResourceVersion: "7"},
		Spec:       corev1.PodSpec{NodeName: "node-b"},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: "True"},
			{Type: DefaultStableConditionType, Status: "True", Reason: ReasonMinReadySecondsElapsed},
		}},
	}
	err = c.write(context.Background(), pod)
	assert.ErrorIs(t, err, ErrNotOnNode)
	assert.EqualError(t, err, `write pod apps/web bound to node "node-b" from node "node-a": pod is not on the agent's node`)
	assert.Empty(t, client.Actions(), "nothing may reach the API server")
	assert.NoError(t, testutil.CollectAndCompare(reg, strings.NewReader(writesText(map[string]int{resultRefused: 1})), writesName))
	// A refusal sends no request, so there is no latency to observe.
	assert.NoError(t, testutil.CollectAndCompare(reg, strings.NewReader(`
# HELP podslo_agent_condition_write_duration_seconds Latency of each condition write request (PATCH on pods/status).
# TYPE podslo_agent_condition_write_duration_seconds histogram
podslo_agent_condition_write_duration_seconds_bucket{le="0.001"} 0
podslo_agent_condition_write_duration_seconds_bucket{le="0.0025"} 0
podslo_agent_condition_write_duration_seconds_bucket{le="0.005"} 0
podslo_agent_condition_write_duration_seconds_bucket{le="0.01"} 0
podslo_agent_condition_write_duration_seconds_bucket{le="0.025"} 0
podslo_agent_condition_write_duration_seconds_bucket{le="0.05"} 0
podslo_agent_condition_write_duration_seconds_bucket{le="0.1"} 0
podslo_agent_condition_write_duration_seconds_bucket{le="0.25"} 0
podslo_agent_condition_write_duration_seconds_bucket{le="0.5"} 0
podslo_agent_condition_write_duration_seconds_bucket{le="1"} 0
podslo_agent_condition_write_duration_seconds_bucket{le="2.5"} 0
podslo_agent_condition_write_duration_seconds_bucket{le="5"} 0
podslo_agent_condition_write_duration_seconds_bucket{le="10"} 0
podslo_agent_condition_write_duration_seconds_bucket{le="+Inf"} 0
podslo_agent_condition_write_duration_seconds_sum 0
podslo_agent_condition_write_duration_seconds_count 0
`), durationName))
}

// writesText is the exposition of podslo_agent_condition_writes_total for
// the default Stable type, with every result present.
func writesText(counts map[string]int) string {
	var b strings.Builder
	b.WriteString("# HELP " + writesName + " " + writesHelp + "\n# TYPE " + writesName + " counter\n")
	for _, r := range []string{resultConflict, resultError, resultForbidden, resultNotFound, resultRefused, resultSuccess} {
		fmt.Fprintf(&b, "%s{condition_type=%q,result=%q} %d\n", writesName, DefaultStableConditionType, r, counts[r])
	}
	return b.String()
}

func TestResultOf(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{nil, resultSuccess},
		{fmt.Errorf("write: %w", ErrNotOnNode), resultRefused},
		{fmt.Errorf("patch: %w", apierrors.NewConflict(gr, "web", errors.New("modified"))), resultConflict},
		{apierrors.NewNotFound(gr, "web"), resultNotFound},
		{apierrors.NewForbidden(gr, "web", errors.New("denied")), resultForbidden},
		{apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "web", nil), resultError},
		{context.DeadlineExceeded, resultError},
	} {
		assert.Equal(t, tc.want, resultOf(tc.err), "%v", tc.err)
	}
}

func TestWithResourceVersion(t *testing.T) {
	got, err := withResourceVersion([]byte(`{"status":{"conditions":[]}}`), "42")
	require.NoError(t, err)
	assert.JSONEq(t, `{"metadata":{"resourceVersion":"42"},"status":{"conditions":[]}}`, string(got))
}
