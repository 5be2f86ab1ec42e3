package store

import (
	"math"
	"slices"
	"sort"
	"time"
)

// Buckets are the classic bucket bounds of every podslo histogram: the
// kubelet's pod start-up latency buckets
// (kubelet_pod_start_sli_duration_seconds), so that podslo's histograms line
// up with the kubelet's own, with 0.05, 0.1 and 0.25 below them for the
// SLIs measured in milliseconds (a runc sandbox takes 0.15-0.4 s). Every
// bound of release 0.1.0 is kept, so recorded series and rules keep
// working; a state written under 0.1.0's bounds is rebucketed at load.
var Buckets = []float64{0.05, 0.1, 0.25, 0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}

// Native histogram layout: a growth factor of at most 1.1 is schema 3
// (2^(1/8) ≈ 1.0905), and at most 160 buckets are kept by lowering the schema,
// as client_golang does for live histograms.
const (
	nativeInitialSchema = 3
	nativeMinSchema     = -4
	maxNativeBuckets    = 160
)

// Aggregate is the persisted value of one series: a counter when Histogram is
// nil, otherwise a histogram.
type Aggregate struct {
	// Created is when the series got its first value, in Unix seconds; it is
	// exposed as the series' created timestamp.
	Created   int64
	Value     float64
	Histogram *Histogram
	// Exemplars holds, per classic bucket, the latest observation that fell
	// into it. It lives in memory only: an exemplar is a pointer to look at,
	// not a count that must survive a restart.
	Exemplars []Exemplar
}

// Histogram holds both a classic and a native (sparse, exponential) layout of
// the same observations.
type Histogram struct {
	Count uint64
	Sum   float64
	// Precise is how many of the Count observations were measured in
	// milliseconds (lifecycle.Observation.Precise), the others in whole
	// seconds: podslo_observations_total{precision} reads it. Kept in the
	// histogram's own record, so that counting it costs no write of its
	// own.
	Precise uint64
	// Classic holds non-cumulative counts per bucket of the store's bounds;
	// the last one is +Inf.
	Classic   []uint64
	Schema    int32
	ZeroCount uint64
	// Native holds the non-empty native buckets, sorted by index: copied
	// on every update and encoded in order, a slice is cheaper than a map.
	Native []NativeBucket
}

// NativeBucket is the count of native bucket Index, which holds values in
// (base^(Index-1), base^Index].
type NativeBucket struct {
	Index int32
	Count uint64
}

// Exemplar names the pod behind an observation.
type Exemplar struct {
	Namespace string
	Pod       string
	Value     float64
	Time      time.Time
}

func newHistogram(bounds []float64) *Histogram {
	return &Histogram{
		Classic: make([]uint64, len(bounds)+1),
		Schema:  nativeInitialSchema,
	}
}

func (a *Aggregate) clone() *Aggregate {
	c := *a
	if a.Histogram != nil {
		h := *a.Histogram
		h.Classic = slices.Clone(a.Histogram.Classic)
		// One spare slot: the update this clone is made for may add a bucket.
		h.Native = append(make([]NativeBucket, 0, len(a.Histogram.Native)+1), a.Histogram.Native...)
		c.Histogram = &h
	}
	// Exemplars are shared, not copied: they are memory-only pointers that
	// need no rollback, and are written in place only after a commit
	// succeeds, under the store's lock; readers copy them under the read
	// lock.
	return &c
}

// observe adds v to both layouts and returns the classic bucket it fell in.
func (h *Histogram) observe(bounds []float64, v float64) int {
	h.Count++
	h.Sum += v
	i := sort.SearchFloat64s(bounds, v)
	h.Classic[i]++
	if v == 0 {
		h.ZeroCount++
		return i
	}
	h.add(nativeKey(v, h.Schema), 1)
	for len(h.Native) > maxNativeBuckets && h.Schema > nativeMinSchema {
		h.halveResolution()
	}
	return i
}

// nativeKey is the index of the native bucket (base^(k-1), base^k] holding v,
// with base = 2^(2^-schema). It uses Frexp, as client_golang does, so that
// exact powers of two land in the same bucket as there.
func nativeKey(v float64, schema int32) int32 {
	frac, exp := math.Frexp(math.Abs(v))
	if schema > 0 {
		bounds := nativeBounds(schema)
		return int32(sort.SearchFloat64s(bounds, frac) + (exp-1)*len(bounds))
	}
	key := exp
	if frac == 0.5 {
		key--
	}
	offset := (1 << -schema) - 1
	return int32((key + offset) >> -schema)
}

var nativeBoundsCache = func() [][]float64 {
	out := make([][]float64, 9)
	for s := 1; s <= 8; s++ {
		n := 1 << s
		b := make([]float64, n)
		for i := range b {
			b[i] = math.Exp2(float64(i)/float64(n) - 1)
		}
		out[s] = b
	}
	return out
}()

func nativeBounds(schema int32) []float64 { return nativeBoundsCache[schema] }

// add adds n to bucket idx, keeping the buckets sorted.
func (h *Histogram) add(idx int32, n uint64) {
	i, found := slices.BinarySearchFunc(h.Native, idx, func(b NativeBucket, idx int32) int { return int(b.Index) - int(idx) })
	if found {
		h.Native[i].Count += n
		return
	}
	h.Native = slices.Insert(h.Native, i, NativeBucket{Index: idx, Count: n})
}

// halveResolution merges pairs of buckets: bucket k at schema s lies within
// bucket ceil(k/2) at schema s-1. Merging keeps the order.
func (h *Histogram) halveResolution() {
	merged := h.Native[:0:0]
	for _, b := range h.Native {
		nk := b.Index / 2 // Go truncates towards zero: this is ceil for k <= 0.
		if b.Index > 0 {
			nk = (b.Index + 1) / 2
		}
		if n := len(merged); n > 0 && merged[n-1].Index == nk {
			merged[n-1].Count += b.Count
			continue
		}
		merged = append(merged, NativeBucket{Index: nk, Count: b.Count})
	}
	h.Native = merged
	h.Schema--
}
