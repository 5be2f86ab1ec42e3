package store

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/podslo/podslo/lifecycle"
)

// The reader of format 1, the fixed layout that release 0.1.0 wrote. It is
// kept, like every reader of a format podslo ever wrote, so that a state
// from any release loads; nothing writes format 1 any more. Its records
// carry no checksum: one that does not decode is corrupt.

const (
	podRecordV1       = 1
	aggregateRecordV1 = 1
)

// v1Bounds are the classic bucket bounds that every format-1 histogram was
// written with: 0.1.0 had no way to set others.
var v1Bounds = []float64{0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}

// In format 1, skip bit k was SLI k/7 and Reason k%7, and phase bit p was
// Phase p, both numbered as in 0.1.0. These tables pin that numbering, so
// that the reader stays right whatever the constants become.
var (
	v1SLIs    = []lifecycle.SLI{lifecycle.SandboxCreation, lifecycle.Termination, lifecycle.Readiness, lifecycle.StartupPhase, lifecycle.Stabilization}
	v1Reasons = []lifecycle.Reason{lifecycle.TooOld, lifecycle.NegativeDuration, lifecycle.NoScheduledCondition, lifecycle.InvalidCondition,
		lifecycle.Vanished, lifecycle.TerminatedBeforeDelete, lifecycle.NoContainerStarted}
	v1Phases = []lifecycle.Phase{lifecycle.PhaseScheduling, lifecycle.PhaseSandbox, lifecycle.PhaseInit, lifecycle.PhaseContainers,
		lifecycle.PhaseReadiness, lifecycle.PhaseTotal}
)

// v1ReadTime reads format 1's times: 0 for "not seen", otherwise the delta
// from base plus one.
func v1ReadTime(r *reader, base int64) int64 {
	d := r.varint()
	switch {
	case d == 0:
		return 0
	case d > 0:
		return base + d - 1
	}
	return base + d
}

func decodeStateV1(b []byte) (lifecycle.State, error) {
	var s lifecycle.State
	r := reader{b: b}
	if v := r.byte(); v != podRecordV1 {
		return s, fmt.Errorf("pod record version %d: %w", v, errDecode)
	}
	setFlags(&s, r.uvarint())
	phases := r.byte()
	for i, p := range v1Phases {
		if phases&(1<<i) != 0 {
			s.Phases = s.Phases.With(p)
		}
	}
	s.Scheduled = r.varint()
	s.FirstSandboxReady = v1ReadTime(&r, s.Scheduled)
	s.LastSandboxReady = v1ReadTime(&r, s.Scheduled)
	s.DeletionRequested = v1ReadTime(&r, s.Scheduled)
	s.FirstReady = v1ReadTime(&r, s.Scheduled)
	s.FirstStable = v1ReadTime(&r, s.Scheduled)
	s.StabilityLost = v1ReadTime(&r, s.Scheduled)
	s.SandboxCreationMs = lifecycle.MillisOfSeconds(r.varint())
	s.TerminationMs = lifecycle.MillisOfSeconds(r.varint())
	s.ReadinessMs = lifecycle.MillisOfSeconds(r.varint())
	s.Stabilization = lifecycle.Seconds32(r.varint())
	s.Recreations = uint32(r.uvarint())
	s.StabilityLosses = uint32(r.uvarint())
	skipped := r.uvarint()
	if skipped>>(len(v1SLIs)*len(v1Reasons)) != 0 {
		return s, fmt.Errorf("skip bits %#x beyond format 1's: %w", skipped, errDecode)
	}
	for k := range len(v1SLIs) * len(v1Reasons) {
		if skipped&(1<<k) != 0 {
			s.Skipped = s.Skipped.With(lifecycle.Skip{SLI: v1SLIs[k/len(v1Reasons)], Reason: v1Reasons[k%len(v1Reasons)]})
		}
	}
	return s, r.done()
}

func decodeAggregateV1(b []byte) (*storedAggregate, error) {
	r := reader{b: b}
	if v := r.byte(); v != aggregateRecordV1 {
		return nil, fmt.Errorf("aggregate record version %d: %w", v, errDecode)
	}
	a := &storedAggregate{Aggregate: Aggregate{Created: r.varint()}}
	switch r.byte() {
	case kindCounter:
		a.Value = math.Float64frombits(r.uint64())
		return a, r.done()
	case kindHistogram:
	default:
		return nil, fmt.Errorf("aggregate kind: %w", errDecode)
	}
	h := &Histogram{Count: r.uvarint(), Sum: math.Float64frombits(r.uint64())}
	if n := r.uvarint(); r.err == nil && n != uint64(len(v1Bounds)+1) {
		return nil, fmt.Errorf("histogram has %d buckets, format 1 has %d: %w", n, len(v1Bounds)+1, errDecode)
	}
	h.Classic = make([]uint64, len(v1Bounds)+1)
	for i := range h.Classic {
		h.Classic[i] = r.uvarint()
	}
	h.Schema = int32(r.varint())
	h.ZeroCount = r.uvarint()
	nn := r.uvarint()
	if r.err == nil && nn > maxNativeBuckets {
		return nil, fmt.Errorf("histogram has %d native buckets: %w", nn, errDecode)
	}
	h.Native = make([]NativeBucket, 0, nn)
	for i := uint64(0); i < nn && r.err == nil; i++ {
		nb := NativeBucket{Index: int32(r.varint()), Count: r.uvarint()}
		if n := len(h.Native); n > 0 && nb.Index <= h.Native[n-1].Index {
			return nil, fmt.Errorf("native buckets out of order: %w", errDecode)
		}
		h.Native = append(h.Native, nb)
	}
	a.Histogram = h
	a.bounds = v1Bounds
	return a, r.done()
}

// reader decodes a format-1 record and remembers the first error, so that
// decoding code reads straight through and checks once at the end.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail() {
	if r.err == nil {
		r.err = errDecode
	}
	r.b = nil
}

func (r *reader) byte() byte {
	if len(r.b) < 1 {
		r.fail()
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) uint64() uint64 {
	if len(r.b) < 8 {
		r.fail()
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *reader) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) done() error {
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%d trailing bytes: %w", len(r.b), errDecode)
	}
	return r.err
}
