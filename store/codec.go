package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podslo/podslo/lifecycle"
)

// Key prefixes, one per record type. Keys are short on purpose: at 100k pods
// every byte of key is 100 kB of LSM.
const (
	prefixPodUUID   = 'p' // 'p' + 16-byte binary UUID
	prefixPodString = 'P' // 'P' + UID string, for UIDs that are not UUIDs
	prefixAggregate = 'a' // 'a' + family + 0x00 + label values joined by 0xff
	prefixSetting   = 'm' // 'm' + setting name: what the state was written under
)

// Record format versions. A record with an unknown version is dropped and
// counted, never misread.
const (
	podRecordV1       = 1
	aggregateRecordV1 = 1
)

var errDecode = errors.New("malformed record")

func podKey(uid types.UID) []byte {
	if u, err := uuid.Parse(string(uid)); err == nil {
		k := make([]byte, 17)
		k[0] = prefixPodUUID
		copy(k[1:], u[:])
		return k
	}
	return append([]byte{prefixPodString}, uid...)
}

func uidFromKey(k []byte) (types.UID, error) {
	switch {
	case len(k) == 17 && k[0] == prefixPodUUID:
		u, err := uuid.FromBytes(k[1:])
		if err != nil {
			return "", err
		}
		return types.UID(u.String()), nil
	case len(k) > 1 && k[0] == prefixPodString:
		return types.UID(k[1:]), nil
	}
	return "", fmt.Errorf("pod key %q: %w", k, errDecode)
}

// State flag bits in the encoded pod record.
const (
	flagHasSandboxCreation = 1 << iota
	flagTimedOut
	flagUserError
	flagExcluded
	flagHasTermination
	flagTerminationDone
	flagHasReadiness
	flagHasStabilization
	flagStable
	flagStableSeen
	// flagSeenLate came after V1 records were first written; older records
	// simply lack it, which is what they meant.
	flagSeenLate
)

// encodeState writes times as varints, most of them as deltas from the
// time the pod was scheduled, which keeps a record around 20 bytes.
func encodeState(s lifecycle.State) []byte {
	b := make([]byte, 0, 40)
	b = append(b, podRecordV1)
	flags := flag(s.HasSandboxCreation, flagHasSandboxCreation) | flag(s.TimedOut, flagTimedOut) |
		flag(s.UserError, flagUserError) | flag(s.Excluded, flagExcluded) | flag(s.HasTermination, flagHasTermination) |
		flag(s.TerminationDone, flagTerminationDone) | flag(s.HasReadiness, flagHasReadiness) |
		flag(s.HasStabilization, flagHasStabilization) | flag(s.Stable, flagStable) | flag(s.StableSeen, flagStableSeen) |
		flag(s.SeenLate, flagSeenLate)
	b = binary.AppendUvarint(b, flags)
	b = append(b, byte(s.Phases))
	base := s.Scheduled
	b = binary.AppendVarint(b, base)
	for _, t := range []int64{s.FirstSandboxReady, s.LastSandboxReady, s.DeletionRequested, s.FirstReady, s.FirstStable, s.StabilityLost} {
		b = appendTime(b, t, base)
	}
	b = binary.AppendVarint(b, s.SandboxCreation)
	b = binary.AppendVarint(b, s.Termination)
	b = binary.AppendVarint(b, s.Readiness)
	b = binary.AppendVarint(b, s.Stabilization)
	b = binary.AppendUvarint(b, uint64(s.Recreations))
	b = binary.AppendUvarint(b, uint64(s.StabilityLosses))
	b = binary.AppendUvarint(b, uint64(s.Skipped))
	return b
}

func flag(set bool, bit uint64) uint64 {
	if set {
		return bit
	}
	return 0
}

// appendTime writes 0 for "not seen" and otherwise the delta from base plus
// one, so that a time equal to base is not mistaken for "not seen".
func appendTime(b []byte, t, base int64) []byte {
	if t == 0 {
		return binary.AppendVarint(b, 0)
	}
	d := t - base
	if d >= 0 {
		d++
	}
	return binary.AppendVarint(b, d)
}

func readTime(r *reader, base int64) int64 {
	d := r.varint()
	switch {
	case d == 0:
		return 0
	case d > 0:
		return base + d - 1
	}
	return base + d
}

func decodeState(b []byte) (lifecycle.State, error) {
	var s lifecycle.State
	r := reader{b: b}
	if v := r.byte(); v != podRecordV1 {
		return s, fmt.Errorf("pod record version %d: %w", v, errDecode)
	}
	flags := r.uvarint()
	s.HasSandboxCreation = flags&flagHasSandboxCreation != 0
	s.TimedOut = flags&flagTimedOut != 0
	s.UserError = flags&flagUserError != 0
	s.Excluded = flags&flagExcluded != 0
	s.HasTermination = flags&flagHasTermination != 0
	s.TerminationDone = flags&flagTerminationDone != 0
	s.HasReadiness = flags&flagHasReadiness != 0
	s.HasStabilization = flags&flagHasStabilization != 0
	s.Stable = flags&flagStable != 0
	s.StableSeen = flags&flagStableSeen != 0
	s.SeenLate = flags&flagSeenLate != 0
	s.Phases = lifecycle.PhaseSet(r.byte())
	s.Scheduled = r.varint()
	s.FirstSandboxReady = readTime(&r, s.Scheduled)
	s.LastSandboxReady = readTime(&r, s.Scheduled)
	s.DeletionRequested = readTime(&r, s.Scheduled)
	s.FirstReady = readTime(&r, s.Scheduled)
	s.FirstStable = readTime(&r, s.Scheduled)
	s.StabilityLost = readTime(&r, s.Scheduled)
	s.SandboxCreation = r.varint()
	s.Termination = r.varint()
	s.Readiness = r.varint()
	s.Stabilization = r.varint()
	s.Recreations = uint32(r.uvarint())
	s.StabilityLosses = uint32(r.uvarint())
	s.Skipped = lifecycle.SkipSet(r.uvarint())
	return s, r.done()
}

func aggregateKey(family string, labels string) []byte {
	k := make([]byte, 0, 2+len(family)+len(labels))
	k = append(k, prefixAggregate)
	k = append(k, family...)
	k = append(k, 0)
	return append(k, labels...)
}

func splitAggregateKey(k []byte) (family, labels string, err error) {
	for i := 1; i < len(k); i++ {
		if k[i] == 0 {
			return string(k[1:i]), string(k[i+1:]), nil
		}
	}
	return "", "", fmt.Errorf("aggregate key %q: %w", k, errDecode)
}

// Aggregate kinds in the encoded record.
const (
	kindCounter   = 1
	kindHistogram = 2
)

func encodeAggregate(a *Aggregate) []byte {
	b := make([]byte, 0, 64)
	b = append(b, aggregateRecordV1)
	b = binary.AppendVarint(b, a.Created)
	if a.Histogram == nil {
		b = append(b, kindCounter)
		return binary.LittleEndian.AppendUint64(b, math.Float64bits(a.Value))
	}
	h := a.Histogram
	b = append(b, kindHistogram)
	b = binary.AppendUvarint(b, h.Count)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(h.Sum))
	b = binary.AppendUvarint(b, uint64(len(h.Classic)))
	for _, c := range h.Classic {
		b = binary.AppendUvarint(b, c)
	}
	b = binary.AppendVarint(b, int64(h.Schema))
	b = binary.AppendUvarint(b, h.ZeroCount)
	b = binary.AppendUvarint(b, uint64(len(h.Native)))
	for _, nb := range h.Native {
		b = binary.AppendVarint(b, int64(nb.Index))
		b = binary.AppendUvarint(b, nb.Count)
	}
	return b
}

func decodeAggregate(b []byte, bounds []float64) (*Aggregate, error) {
	r := reader{b: b}
	if v := r.byte(); v != aggregateRecordV1 {
		return nil, fmt.Errorf("aggregate record version %d: %w", v, errDecode)
	}
	a := &Aggregate{Created: r.varint()}
	switch r.byte() {
	case kindCounter:
		a.Value = math.Float64frombits(r.uint64())
		return a, r.done()
	case kindHistogram:
	default:
		return nil, fmt.Errorf("aggregate kind: %w", errDecode)
	}
	h := &Histogram{Count: r.uvarint(), Sum: math.Float64frombits(r.uint64())}
	n := r.uvarint()
	if r.err == nil && n != uint64(len(bounds)+1) {
		// Bucket layout changed between versions: the old counts cannot be
		// re-bucketed, so the series starts again (a counter reset).
		return nil, fmt.Errorf("histogram has %d buckets, want %d: %w", n, len(bounds)+1, errDecode)
	}
	h.Classic = make([]uint64, len(bounds)+1)
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
	return a, r.done()
}

// reader decodes a record and remembers the first error, so that decoding
// code reads straight through and checks once at the end.
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
