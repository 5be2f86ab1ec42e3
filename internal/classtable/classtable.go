package classtable

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/sli"
	"github.com/podslo/podslo/store"
)

// Values of Row.Label: the class dimension a row is a value of.
const (
	RuntimeClassLabel = "runtime_class"
	StorageClassLabel = "storage_class"
)

// Table is the per-class summary of sandbox creation that the exporter's
// landing page and /api/v1/classes serve and `podslo demo` prints: one row
// per runtime_class, then one per storage_class, each sorted by class. It
// covers everything observed since the state began, as the cumulative
// series on /metrics do, not a recent window.
type Table struct {
	Rows []Row `json:"rows"`
}

// Row sums the series of one class value over the other class
// dimension and over the --histogram-label dimensions.
type Row struct {
	// Label is RuntimeClassLabel or StorageClassLabel.
	Label string
	// Class is the label value, as on /metrics: a pod whose PVCs have
	// several StorageClasses is in the row of their comma-joined names.
	Class string
	// Count is the number of sandbox creations observed.
	Count uint64
	// P50, P90 and P99 are sandbox creation latency quantiles in seconds,
	// estimated from the classic buckets as histogram_quantile does (see
	// bucketQuantile). NaN without observations; JSON has null then.
	P50, P90, P99 float64
	// Recreations counts sandboxes that became ready again after the first
	// one was lost.
	Recreations uint64
	// Pending is the number of scheduled pods still waiting for their first
	// sandbox now, user errors included, as the pending gauge counts them.
	Pending uint64
}

// rowJSON is Row on the wire: JSON has no NaN, so a missing
// quantile is null.
type rowJSON struct {
	Label       string   `json:"label"`
	Class       string   `json:"class"`
	Count       uint64   `json:"count"`
	P50         *float64 `json:"p50_seconds"`
	P90         *float64 `json:"p90_seconds"`
	P99         *float64 `json:"p99_seconds"`
	Recreations uint64   `json:"recreations"`
	Pending     uint64   `json:"pending"`
}

// MarshalJSON writes a missing (non-finite) quantile as null.
func (r Row) MarshalJSON() ([]byte, error) {
	seconds := func(v float64) *float64 {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
		return &v
	}
	return json.Marshal(rowJSON{
		Label: r.Label, Class: r.Class, Count: r.Count,
		P50: seconds(r.P50), P90: seconds(r.P90), P99: seconds(r.P99),
		Recreations: r.Recreations, Pending: r.Pending,
	})
}

// UnmarshalJSON reads a null quantile back as NaN, so that a client of
// /api/v1/classes gets the Table the exporter computed.
func (r *Row) UnmarshalJSON(b []byte) error {
	var w rowJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	seconds := func(p *float64) float64 {
		if p == nil {
			return math.NaN()
		}
		return *p
	}
	*r = Row{
		Label: w.Label, Class: w.Class, Count: w.Count,
		P50: seconds(w.P50), P90: seconds(w.P90), P99: seconds(w.P99),
		Recreations: w.Recreations, Pending: w.Pending,
	}
	return nil
}

// classSums accumulates one row before its quantiles are estimated.
type classSums struct {
	count       uint64
	buckets     []uint64 // non-cumulative, the last one +Inf, as in the store
	recreations float64
	pending     uint64
}

// The families the class table reads.
var (
	creationFamily    = sli.MustByStore("sandbox_creation")
	recreationsFamily = sli.MustByStore("sandbox_recreations")
)

// FromStore computes the Table from the store's aggregates and live pods.
// histogramLabels must be the exporter's --histogram-label names: series
// persisted under another set are left out, as /metrics leaves them out.
// Like the collectors, it never calls the API server.
func FromStore(st *store.Store, histogramLabels []string) Table {
	creation := creationFamily.ID(histogramLabels)
	recreations := recreationsFamily.ID(histogramLabels)
	bounds := st.Buckets()

	type key struct{ label, class string }
	sums := map[key]*classSums{}
	// rows are the runtime_class row and the storage_class row a series or
	// pod counts in.
	rows := func(runtimeClass, storageClass string) [2]*classSums {
		var out [2]*classSums
		for i, k := range [2]key{{RuntimeClassLabel, runtimeClass}, {StorageClassLabel, storageClass}} {
			s, ok := sums[k]
			if !ok {
				s = &classSums{buckets: make([]uint64, len(bounds)+1)}
				sums[k] = s
			}
			out[i] = s
		}
		return out
	}

	st.Aggregates(func(family string, values []string, agg *store.Aggregate) {
		switch family {
		case creation:
			runtimeClass, storageClass, _, ok := creationFamily.ParseLabelValues(values, len(histogramLabels))
			h := agg.Histogram
			if !ok || h == nil || len(h.Classic) != len(bounds)+1 {
				return
			}
			for _, s := range rows(runtimeClass, storageClass) {
				s.count += h.Count
				for i, n := range h.Classic {
					s.buckets[i] += n
				}
			}
		case recreations:
			runtimeClass, storageClass, _, ok := recreationsFamily.ParseLabelValues(values, len(histogramLabels))
			if !ok {
				return
			}
			for _, s := range rows(runtimeClass, storageClass) {
				s.recreations += agg.Value
			}
		}
	})
	st.Pods(func(_ types.UID, state *lifecycle.State, meta *store.PodMeta) {
		if state.Pending() {
			for _, s := range rows(meta.RuntimeClass, meta.StorageClass) {
				s.pending++
			}
		}
	})

	t := Table{Rows: make([]Row, 0, len(sums))}
	for k, s := range sums {
		t.Rows = append(t.Rows, Row{
			Label: k.label, Class: k.class, Count: s.count,
			P50:         bucketQuantile(0.5, bounds, s.buckets),
			P90:         bucketQuantile(0.9, bounds, s.buckets),
			P99:         bucketQuantile(0.99, bounds, s.buckets),
			Recreations: uint64(s.recreations),
			Pending:     s.pending,
		})
	}
	slices.SortFunc(t.Rows, func(a, b Row) int {
		return cmp.Or(cmp.Compare(a.Label, b.Label), cmp.Compare(a.Class, b.Class))
	})
	return t
}

// bucketQuantile estimates the q-quantile of a classic histogram exactly as
// PromQL's histogram_quantile does (promql.BucketQuantile), so that the
// table agrees with a dashboard's
// histogram_quantile(q, sum by (le, runtime_class) (..._bucket)):
//
//   - the rank is q times the number of observations;
//   - the quantile lies in the first bucket whose cumulative count reaches
//     the rank, and is interpolated linearly between that bucket's lower
//     bound (0 for the first bucket) and its upper bound, as if its
//     observations were spread evenly;
//   - a rank only the +Inf bucket reaches gives the highest finite bound;
//   - a first bucket with an upper bound ≤ 0 gives that bound;
//   - no observations, or no finite bound, give NaN; q < 0 gives -Inf and
//     q > 1 +Inf.
//
// counts are per bucket, not cumulative, and end with the +Inf bucket, as
// store.Histogram.Classic holds them.
func bucketQuantile(q float64, bounds []float64, counts []uint64) float64 {
	switch {
	case math.IsNaN(q):
		return math.NaN()
	case q < 0:
		return math.Inf(-1)
	case q > 1:
		return math.Inf(+1)
	}
	if len(bounds) == 0 || len(counts) != len(bounds)+1 {
		return math.NaN()
	}
	var observations uint64
	for _, n := range counts {
		observations += n
	}
	if observations == 0 {
		return math.NaN()
	}
	rank := q * float64(observations)
	var below uint64 // observations in the buckets before b
	for b, upper := range bounds {
		if float64(below+counts[b]) < rank {
			below += counts[b]
			continue
		}
		if b == 0 && upper <= 0 {
			return upper
		}
		lower := 0.0
		if b > 0 {
			lower = bounds[b-1]
		}
		// The same operations in the same order as Prometheus, so that the
		// result is the same float.
		return lower + (upper-lower)*((rank-float64(below))/float64(counts[b]))
	}
	return bounds[len(bounds)-1]
}

// WriteText writes the table with aligned columns for a terminal, latencies
// as Go durations ("1.2s", "250ms") and "-" for a quantile without data.
func (t Table) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "LABEL\tCLASS\tCOUNT\tP50\tP90\tP99\tRE-CREATIONS\tPENDING")
	for _, r := range t.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%d\t%d\n",
			r.Label, r.Class, r.Count, FormatSeconds(r.P50), FormatSeconds(r.P90), FormatSeconds(r.P99), r.Recreations, r.Pending)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write the class table: %w", err)
	}
	return nil
}

// FormatSeconds formats a latency in seconds as a Go duration rounded to
// what a reader compares at a glance: milliseconds under a second, tenths
// of a second under a minute, whole seconds above, without the zero units
// Go adds ("1h", not "1h0m0s"). A quantile without data (NaN or infinite)
// is "-".
func FormatSeconds(s float64) string {
	if math.IsNaN(s) || math.IsInf(s, 0) {
		return "-"
	}
	d := time.Duration(s * float64(time.Second))
	switch {
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return d.Round(100 * time.Millisecond).String()
	default:
		s := d.Round(time.Second).String()
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
		return s
	}
}
