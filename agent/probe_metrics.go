package agent

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/podslo/podslo/agent/probe"
)

// The probe workers' metrics, all ALPHA.
const (
	probeDurationName = "podslo_agent_probe_duration_seconds"
	probeDurationHelp = "Duration of readiness probes, by probe type (http, tcp, grpc) and result (success, failure, timeout)."
	probeTotalName    = "podslo_agent_probe_total"
	probeTotalHelp    = "Readiness probes run, by result: success, failure, timeout."
	// toConditionName measures what the gate costs on top of the probe: the
	// write and its retries, from the probe result that flipped the status
	// to the API server accepting the PATCH.
	toConditionName = "podslo_agent_probe_to_condition_seconds"
	toConditionHelp = "Time from a probe result that changes the readiness gate condition to the API server accepting its PATCH."
	workersName     = "podslo_agent_probe_workers"
	workersHelp     = "Probe workers running: one per probed pod, at most --max-probe-workers."
	invalidName     = "podslo_agent_invalid_probes_total"
	invalidHelp     = "Readiness probe annotations refused as invalid, each bad value once per pod; the pod gets an Event with the field errors."
)

// probeBuckets run from 1 ms, a loopback probe, to 10 s, the longest
// timeout a sensible probe has.
var probeBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}

var (
	probeTypes   = []string{"http", "tcp", "grpc"}
	probeResults = []probe.Result{probe.Success, probe.Failure, probe.Timeout}
)

type probeMetrics struct {
	duration    *prometheus.HistogramVec
	total       *prometheus.CounterVec
	toCondition prometheus.Histogram
	workers     prometheus.Gauge
	invalid     prometheus.Counter
	// writes are the condition writes, shared with the Stable condition.
	writes *metrics
}

// newProbeMetrics registers the probe workers' metrics on reg, every series
// present from the start so that rate() sees the first probe.
func newProbeMetrics(reg prometheus.Registerer, writes *metrics) *probeMetrics {
	m := &probeMetrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: probeDurationName, Help: probeDurationHelp, Buckets: probeBuckets},
			[]string{"probe_type", "result"}),
		total:       prometheus.NewCounterVec(prometheus.CounterOpts{Name: probeTotalName, Help: probeTotalHelp}, []string{"result"}),
		toCondition: prometheus.NewHistogram(prometheus.HistogramOpts{Name: toConditionName, Help: toConditionHelp, Buckets: probeBuckets}),
		workers:     prometheus.NewGauge(prometheus.GaugeOpts{Name: workersName, Help: workersHelp}),
		invalid:     prometheus.NewCounter(prometheus.CounterOpts{Name: invalidName, Help: invalidHelp}),
		writes:      writes,
	}
	for _, r := range probeResults {
		m.total.WithLabelValues(string(r))
		for _, t := range probeTypes {
			m.duration.WithLabelValues(t, string(r))
		}
	}
	reg.MustRegister(m.duration, m.total, m.toCondition, m.workers, m.invalid)
	return m
}

func (m *probeMetrics) observe(probeType string, out probe.Outcome) {
	m.duration.WithLabelValues(probeType, string(out.Result)).Observe(out.Duration.Seconds())
	m.total.WithLabelValues(string(out.Result)).Inc()
}
