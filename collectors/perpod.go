package collectors

import (
	"bufio"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/sli"
	"github.com/podslo/podslo/store"
)

// PerPod writes the per-pod families straight into the exposition instead of
// going through a client_golang registry, as kube-state-metrics does: at
// 100k pods the registry's sorting, label-pair building and consistency
// checks cost seconds per scrape, and these series need none of them (their
// label names are fixed, and the store has one entry per UID).
type PerPod struct {
	store    *store.Store
	families []*sli.PodSeries
	// names are the label names in the sorted order client_golang writes
	// them in; order[i] is the index of names[i] in labelValues.
	names []string
	order []int
	now   func() time.Time
}

// NewPerPod returns the per-pod writer over s, of the families keep keeps.
func NewPerPod(s *store.Store, labels Labels, keep *FamilyFilter) *PerPod {
	names := append([]string(nil), sli.PodSeriesLabels...)
	for _, k := range labels.Pod {
		names = append(names, PodLabelName(k))
	}
	order := make([]int, len(names))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int { return strings.Compare(names[a], names[b]) })
	sorted := make([]string, len(names))
	for i, o := range order {
		sorted[i] = names[o]
	}
	var families []*sli.PodSeries
	for _, f := range sli.PerPod() {
		if keep.Keep(f.MetricFamily().Name) {
			families = append(families, f)
		}
	}
	return &PerPod{store: s, families: families, names: sorted, order: order, now: time.Now}
}

// labelValues are a pod's values of its series' labels, in the order of
// the families' LabelNames.
func labelValues(buf []string, uid types.UID, m *store.PodMeta) []string {
	return sli.AppendPodLabelValues(buf[:0], m.Namespace, m.Name, string(uid), m.Node, m.RuntimeClass, m.StorageClass, m.PodLabels)
}

// Write writes every per-pod family in format. For the text formats it
// writes lines directly; for protobuf it builds the families and encodes
// them, which is slower but still skips the registry.
func (p *PerPod) Write(w io.Writer, format expfmt.Format) error {
	switch format.FormatType() {
	case expfmt.TypeTextPlain, expfmt.TypeOpenMetrics:
		return p.writeText(w, format.FormatType() == expfmt.TypeOpenMetrics)
	}
	enc := expfmt.NewEncoder(w, format)
	for _, f := range p.families {
		if mf := p.family(f); len(mf.Metric) > 0 {
			if err := enc.Encode(mf); err != nil {
				return err
			}
		}
	}
	return nil
}

// podValue is one pod's sample of a family, copied out of the store.
type podValue struct {
	uid  types.UID
	meta *store.PodMeta // never changed in place: the store replaces it
	v    float64
}

// snapshot copies family f's samples out of the store. The store's lock is
// held only for the copy, never while writing to the scraper: a scraper
// that reads slowly, or stops reading, would otherwise hold the read lock
// while its TCP window is full, and every pod update would wait for it
// (store.Apply takes the write lock). Copying costs 32 B per sample.
func (p *PerPod) snapshot(buf []podValue, f *sli.PodSeries, now int64) []podValue {
	buf = buf[:0]
	p.store.Pods(func(uid types.UID, st *lifecycle.State, m *store.PodMeta) {
		if v, ok := f.Value(st, now); ok {
			buf = append(buf, podValue{uid, m, v})
		}
	})
	return buf
}

func (p *PerPod) writeText(w io.Writer, openMetrics bool) error {
	now := p.now().Unix()
	bw := bufio.NewWriterSize(w, 64<<10)
	line := make([]byte, 0, 512)
	var values []string
	var pods []podValue
	for _, f := range p.families {
		if pods = p.snapshot(pods, f, now); len(pods) == 0 {
			continue
		}
		name := f.Name
		if openMetrics && f.Type == sli.Counter {
			// OpenMetrics names a counter family without its _total suffix.
			name = strings.TrimSuffix(name, "_total")
		}
		line = append(line[:0], "# HELP "...)
		line = append(line, name...)
		line = append(line, ' ')
		line = appendHelp(line, f.Help)
		line = append(line, "\n# TYPE "...)
		line = append(line, name...)
		line = append(line, ' ')
		line = append(line, f.Type.String()...)
		line = append(line, '\n')
		if _, err := bw.Write(line); err != nil {
			return err
		}
		for _, pv := range pods {
			line = append(line[:0], f.Name...)
			values = labelValues(values, pv.uid, pv.meta)
			line = p.appendLabels(line, values)
			line = append(line, ' ')
			line = appendValue(line, pv.v, openMetrics)
			line = append(line, '\n')
			if _, err := bw.Write(line); err != nil {
				// The scraper went away: stop rendering for nobody.
				return err
			}
		}
	}
	return bw.Flush()
}

func (p *PerPod) appendLabels(b []byte, values []string) []byte {
	b = append(b, '{')
	for i, name := range p.names {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendPair(b, name, values[p.order[i]])
	}
	return append(b, '}')
}

func appendPair(b []byte, name, value string) []byte {
	b = append(b, name...)
	b = append(b, '=', '"')
	b = appendEscaped(b, value, true)
	return append(b, '"')
}

// appendEscaped escapes as the text formats require: backslash and newline,
// and double quotes inside label values.
func appendEscaped(b []byte, s string, quote bool) []byte {
	// A plain loop: strings.ContainsAny builds its byte set on every call,
	// and was 18% of a 100k-pod scrape, for values that almost never need
	// escaping.
	clean := true
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '\\' || c == '\n' || c == '"' {
			clean = false
			break
		}
	}
	if clean {
		return append(b, s...)
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			b = append(b, '\\', '\\')
		case c == '\n':
			b = append(b, '\\', 'n')
		case c == '"' && quote:
			b = append(b, '\\', '"')
		default:
			b = append(b, c)
		}
	}
	return b
}

func appendHelp(b []byte, help string) []byte { return appendEscaped(b, help, false) }

// appendValue formats as expfmt does: Go's shortest float, and in
// OpenMetrics a ".0" on integral values.
func appendValue(b []byte, v float64, openMetrics bool) []byte {
	switch {
	case math.IsInf(v, 1):
		return append(b, "+Inf"...)
	case math.IsInf(v, -1):
		return append(b, "-Inf"...)
	case math.IsNaN(v):
		return append(b, "NaN"...)
	}
	n := len(b)
	b = strconv.AppendFloat(b, v, 'g', -1, 64)
	if openMetrics && !strings.ContainsAny(string(b[n:]), ".eE") {
		b = append(b, ".0"...)
	}
	return b
}

// family builds one per-pod family as a protobuf message.
func (p *PerPod) family(f *sli.PodSeries) *dto.MetricFamily {
	mf := &dto.MetricFamily{Name: proto.String(f.Name), Help: proto.String(f.Help)}
	switch f.Type {
	case sli.Counter:
		mf.Type = dto.MetricType_COUNTER.Enum()
	default:
		mf.Type = dto.MetricType_GAUGE.Enum()
	}
	var values []string
	for _, pv := range p.snapshot(nil, f, p.now().Unix()) {
		values = labelValues(values, pv.uid, pv.meta)
		metric := &dto.Metric{Label: make([]*dto.LabelPair, len(p.names))}
		for i, name := range p.names {
			metric.Label[i] = &dto.LabelPair{Name: proto.String(name), Value: proto.String(values[p.order[i]])}
		}
		if f.Type == sli.Counter {
			metric.Counter = &dto.Counter{Value: proto.Float64(pv.v)}
		} else {
			metric.Gauge = &dto.Gauge{Value: proto.Float64(pv.v)}
		}
		mf.Metric = append(mf.Metric, metric)
	}
	return mf
}
