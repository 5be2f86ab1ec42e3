package agent

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// The agent's self-metrics, all ALPHA.
const (
	// writesName counts pods/status writes, by owned condition type carried
	// and result. A write carrying several owned types counts once for each.
	writesName = "podslo_agent_condition_writes_total"
	writesHelp = "Condition writes (strategic-merge PATCH on pods/status), by condition type and result: " +
		"success, conflict, not_found, forbidden, refused, error."
	// durationName is the latency of each PATCH request, retries included
	// one by one; local refusals send none and are not observed.
	durationName = "podslo_agent_condition_write_duration_seconds"
	durationHelp = "Latency of each condition write request (PATCH on pods/status)."
)

// newBuildInfo is podslo_agent_build_info, client_golang's version collector:
// its own name, so that the exporter's podslo_build_info stays one series per
// exporter, and the prefix every agent family shares.
func newBuildInfo() prometheus.Collector {
	return versioncollector.NewCollector("podslo_agent")
}

// Results of a write: a fixed set, so that the series stay bounded.
const (
	// resultSuccess: the API server stored the write.
	resultSuccess = "success"
	// resultConflict: the pod changed after it was read (409); the agent
	// decides again on a fresh copy, up to 5 times.
	resultConflict = "conflict"
	// resultNotFound: the pod was deleted before the write landed.
	resultNotFound = "not_found"
	// resultForbidden: RBAC or the admission policy refused the write (403):
	// a misconfiguration, or an agent writing outside its node.
	resultForbidden = "forbidden"
	// resultRefused: the agent itself refused, because the pod is not on
	// its node; nothing was sent.
	resultRefused = "refused"
	// resultError: anything else (timeouts, invalid, server errors).
	resultError = "error"
)

var writeResults = []string{resultSuccess, resultConflict, resultNotFound, resultForbidden, resultRefused, resultError}

// writeBuckets span a local API server's few milliseconds to a throttled
// or overloaded one's seconds.
var writeBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

type metrics struct {
	writes   *prometheus.CounterVec
	duration prometheus.Histogram
}

// newMetrics registers the self-metrics on reg, with every series of the
// owned types present from the start so that rate() sees the first write.
func newMetrics(reg prometheus.Registerer, conditionTypes ...string) *metrics {
	m := &metrics{
		writes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: writesName, Help: writesHelp}, []string{"condition_type", "result"}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: durationName, Help: durationHelp, Buckets: writeBuckets,
		}),
	}
	for _, t := range conditionTypes {
		for _, r := range writeResults {
			m.writes.WithLabelValues(t, r)
		}
	}
	reg.MustRegister(m.writes, m.duration)
	return m
}

func (m *metrics) written(conditionTypes []string, result string) {
	for _, t := range conditionTypes {
		m.writes.WithLabelValues(t, result).Inc()
	}
}

func resultOf(err error) string {
	switch {
	case err == nil:
		return resultSuccess
	case errors.Is(err, ErrNotOnNode):
		return resultRefused
	case apierrors.IsConflict(err):
		return resultConflict
	case apierrors.IsNotFound(err):
		return resultNotFound
	case apierrors.IsForbidden(err):
		return resultForbidden
	}
	return resultError
}
