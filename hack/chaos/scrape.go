package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

var httpClient = &http.Client{
	// A kept-alive connection to a process that was SIGKILLed since would
	// fail the next request; each request dials afresh.
	Transport: &http.Transport{DisableKeepAlives: true},
	Timeout:   time.Minute,
}

// exposition is one scrape of the exporter, keyed as the oracle keys its
// series.
type exposition struct {
	// Raw is the text scraped.
	Raw []byte
	// Series holds every sample of the aggregated families (histograms as
	// _count, _sum and _bucket series) and of the pending gauge.
	Series map[string]float64
	// PerPod holds, per pod UID, the value of each per-pod family.
	PerPod map[string]map[string]float64
	// Buckets are the classic bucket bounds of the sandbox creation
	// histogram (every podslo histogram shares them).
	Buckets []float64
	// PodEvents sums podslo_informer_events_total{resource="pods"}: it
	// grows whenever the exporter handles a pod event.
	PodEvents float64
}

// scrapeMetrics reads and parses the exporter's /metrics.
func scrapeMetrics(ctx context.Context, url string) (*exposition, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s/metrics: %s", url, resp.Status)
	}
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("read %s/metrics: %w", url, err)
	}
	e, err := parseExposition(raw)
	if err != nil {
		return nil, fmt.Errorf("parse %s/metrics: %w", url, err)
	}
	return e, nil
}

// parseExposition reads the text format.
func parseExposition(raw []byte) (*exposition, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	e := &exposition{Raw: raw, Series: map[string]float64{}, PerPod: map[string]map[string]float64{}}
	for name, mf := range families {
		switch {
		case slices.Contains(histograms, name):
			for _, m := range mf.GetMetric() {
				h := m.GetHistogram()
				labels := labelMap(m)
				e.Series[seriesKey(name+"_count", labels)] = float64(h.GetSampleCount())
				e.Series[seriesKey(name+"_sum", labels)] = h.GetSampleSum()
				for _, b := range h.GetBucket() {
					bl := labelMap(m)
					bl["le"] = formatLE(b.GetUpperBound())
					e.Series[seriesKey(name+"_bucket", bl)] = float64(b.GetCumulativeCount())
				}
				// The text format always carries +Inf.
				bl := labelMap(m)
				bl["le"] = "+Inf"
				e.Series[seriesKey(name+"_bucket", bl)] = float64(h.GetSampleCount())
				if name == mCreation && e.Buckets == nil {
					for _, b := range h.GetBucket() {
						if !math.IsInf(b.GetUpperBound(), 1) {
							e.Buckets = append(e.Buckets, b.GetUpperBound())
						}
					}
				}
			}
		case slices.Contains(counters, name):
			for _, m := range mf.GetMetric() {
				e.Series[seriesKey(name, labelMap(m))] = sampleValue(m)
			}
		case name == mPending:
			// Summed over timed_out: the timeouts are judged in their
			// counter, pod by pod; this checks who is still pending.
			for _, m := range mf.GetMetric() {
				l := labelMap(m)
				delete(l, "timed_out")
				e.Series[seriesKey(name, l)] += sampleValue(m)
			}
		case name == "podslo_informer_events_total":
			for _, m := range mf.GetMetric() {
				if labelMap(m)["resource"] == "pods" {
					e.PodEvents += sampleValue(m)
				}
			}
		case slices.Contains(perPod, name):
			for _, m := range mf.GetMetric() {
				uid := labelMap(m)["uid"]
				if e.PerPod[uid] == nil {
					e.PerPod[uid] = map[string]float64{}
				}
				e.PerPod[uid][name] = sampleValue(m)
			}
		}
	}
	return e, nil
}

func labelMap(m *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

func sampleValue(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	case m.Untyped != nil:
		return m.GetUntyped().GetValue()
	}
	return math.NaN()
}

func formatLE(le float64) string {
	if math.IsInf(le, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(le, 'g', -1, 64)
}

// aggregatesEqual reports whether two scrapes agree on every aggregated
// series: the exporter has settled.
func aggregatesEqual(a, b *exposition) bool {
	if len(a.Series) != len(b.Series) {
		return false
	}
	for k, v := range a.Series {
		if w, ok := b.Series[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// get fetches path and returns the status code (0 when the request failed).
func get(ctx context.Context, url string) int {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
