package testenv

import (
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// SeriesValues flattens metric families into one value per series, keyed by
// its text: name{label=value,...} for a counter or gauge, with _count, _sum
// and _bucket_le_<bound> for a histogram. keep picks the series. The
// upgrade tests compare two such maps: a series lost or counted twice
// across an upgrade shows as a key whose value differs.
func SeriesValues(fams map[string]*dto.MetricFamily, keep func(name string, m *dto.Metric) bool) map[string]float64 {
	out := map[string]float64{}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			if !keep(name, m) {
				continue
			}
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			key := name + "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.GetHistogram() != nil:
				h := m.GetHistogram()
				out[key+"_count"] = float64(h.GetSampleCount())
				out[key+"_sum"] = h.GetSampleSum()
				for _, b := range h.GetBucket() {
					out[key+"_bucket_le_"+strconv.FormatFloat(b.GetUpperBound(), 'g', -1, 64)] = float64(b.GetCumulativeCount())
				}
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}
