package collectors

import (
	"math"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/podslo/podslo/store"
)

// nativeZeroThreshold is client_golang's default: only an exact zero latency
// falls in the zero bucket.
const nativeZeroThreshold = prometheus.DefNativeHistogramZeroThreshold

// histogramMetric is a const histogram with both layouts, classic buckets for
// the text formats and a native one for protobuf scrapes, plus exemplars
// naming the pods. client_golang has const constructors for each layout alone;
// this writes both into one sample, as a live client_golang histogram does.
type histogramMetric struct {
	classic, native prometheus.Metric
	exemplars       []store.Exemplar
}

func newHistogramMetric(desc *prometheus.Desc, bounds []float64, agg *store.Aggregate, labelValues []string) (prometheus.Metric, error) {
	h := agg.Histogram
	created := time.Unix(agg.Created, 0)
	cumulative := make(map[float64]uint64, len(bounds))
	var acc uint64
	for i, b := range bounds {
		acc += h.Classic[i]
		cumulative[b] = acc
	}
	classic, err := prometheus.NewConstHistogramWithCreatedTimestamp(desc, h.Count, h.Sum, cumulative, created, labelValues...)
	if err != nil {
		return nil, err
	}
	positive := make(map[int]int64, len(h.Native))
	for _, nb := range h.Native {
		positive[int(nb.Index)] = int64(nb.Count)
	}
	native, err := prometheus.NewConstNativeHistogram(desc, h.Count, h.Sum, positive, nil, h.ZeroCount, h.Schema, nativeZeroThreshold, created, labelValues...)
	if err != nil {
		return nil, err
	}
	// Copied here, under the store's read lock: the store updates exemplars
	// in place, and Write runs after Collect has returned.
	var exemplars []store.Exemplar
	if len(agg.Exemplars) > 0 {
		exemplars = make([]store.Exemplar, len(agg.Exemplars))
		copy(exemplars, agg.Exemplars)
	}
	return &histogramMetric{classic: classic, native: native, exemplars: exemplars}, nil
}

func (m *histogramMetric) Desc() *prometheus.Desc { return m.classic.Desc() }

func (m *histogramMetric) Write(out *dto.Metric) error {
	if err := m.classic.Write(out); err != nil {
		return err
	}
	var n dto.Metric
	if err := m.native.Write(&n); err != nil {
		return err
	}
	h, nh := out.Histogram, n.Histogram
	h.Schema, h.ZeroThreshold, h.ZeroCount = nh.Schema, nh.ZeroThreshold, nh.ZeroCount
	h.PositiveSpan, h.PositiveDelta = nh.PositiveSpan, nh.PositiveDelta

	for i, e := range m.exemplars {
		if e.Time.IsZero() {
			continue
		}
		ex := exemplarProto(e)
		if i < len(h.Bucket) {
			h.Bucket[i].Exemplar = ex
		} else {
			// Beyond the last bound: client_golang adds an explicit +Inf
			// bucket to carry such an exemplar.
			h.Bucket = append(h.Bucket, &dto.Bucket{CumulativeCount: proto.Uint64(h.GetSampleCount()), UpperBound: proto.Float64(math.Inf(1)), Exemplar: ex})
		}
		h.Exemplars = append(h.Exemplars, ex)
	}
	return nil
}

// exemplarProto labels an exemplar with the pod. OpenMetrics allows 128 runes
// of exemplar labels; a pod name can be 253, so an over-long name is cut.
func exemplarProto(e store.Exemplar) *dto.Exemplar {
	const maxRunes = 128 - len("namespace") - len("pod")
	ns, pod := []rune(e.Namespace), []rune(e.Pod)
	if len(ns)+len(pod) > maxRunes {
		pod = pod[:max(0, maxRunes-len(ns))]
	}
	return &dto.Exemplar{
		Label: []*dto.LabelPair{
			{Name: proto.String("namespace"), Value: proto.String(string(ns))},
			{Name: proto.String("pod"), Value: proto.String(string(pod))},
		},
		Value:     proto.Float64(e.Value),
		Timestamp: timestamppb.New(e.Time),
	}
}
