package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"sort"

	"github.com/google/uuid"
	"google.golang.org/protobuf/encoding/protowire"
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
	// 'B' + 4-byte layout ID (big-endian): the classic bucket bounds of the
	// histograms written under that ID. 'B' sorts before 'a', so a load
	// knows every layout before the first histogram that names one.
	prefixLayout = 'B'
)

// A record is its format's number in one byte, the format's body, and, from
// format 2 on, a CRC-32C of both in four bytes (little-endian).
//
// Format 2's body is a sequence of protobuf-style tagged fields
// (protowire): a field that is zero is left out, and a reader skips every
// field number it does not know. So a release adds a field under a new
// number and keeps format 2; an older release reads that record with the
// field absent, and a newer release reads an older record the same way. A
// field number is never reused nor given another meaning. Only a change
// that an older reader would misread takes the next format number, and a
// release refuses to start on a format it does not know (ErrNewerFormat)
// rather than guess. The rules are in docs/architecture.md; codec_test.go
// holds the golden records that keep them.
const (
	podRecordV2       = 2
	aggregateRecordV2 = 2
	layoutRecordV2    = 2
	// maxFormat is the newest record format this release reads.
	maxFormat = 2
)

// The state's record formats, as `podslo version` reports them, so that an
// operator can tell before an upgrade or a rollback whether a release can
// read a state: this release reads every format from OldestFormat to
// NewestFormat (each one a podslo release ever wrote, 0.1.0's format 1
// among them) and writes WriteFormat.
const (
	OldestFormat = podRecordV1
	NewestFormat = maxFormat
	WriteFormat  = podRecordV2
)

var (
	// errDecode is a record that does not parse though its checksum, if it
	// has one, holds: a bug, or a writer that broke the rules.
	errDecode = errors.New("malformed record")
	// errChecksum is a record whose bytes changed after they were written:
	// the only kind of damage the store calls a corrupt record.
	errChecksum = errors.New("record checksum mismatch")
	// ErrNewerFormat means the state holds a record in a format newer than
	// this release reads: it was written by a later podslo. The store will
	// not start on it, since guessing could count pods twice, and it
	// changes nothing in it.
	ErrNewerFormat = errors.New("state record is in a newer format than this release reads")
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

func sealRecord(b []byte) []byte {
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, crcTable))
}

// openRecord checks a format-2 record's checksum and returns its body.
func openRecord(b []byte) ([]byte, error) {
	if len(b) < 5 {
		return nil, fmt.Errorf("%d bytes: %w", len(b), errChecksum)
	}
	body, sum := b[:len(b)-4], binary.LittleEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, crcTable) != sum {
		return nil, errChecksum
	}
	return body[1:], nil
}

// recordFormat tells the format of a record from its first byte: a format
// newer than this release reads is ErrNewerFormat, a zero one or an empty
// record is corrupt.
func recordFormat(b []byte) (byte, error) {
	switch {
	case len(b) == 0 || b[0] == 0:
		return 0, fmt.Errorf("no format byte: %w", errChecksum)
	case b[0] > maxFormat:
		return 0, fmt.Errorf("format %d, and this release reads up to %d: %w", b[0], maxFormat, ErrNewerFormat)
	}
	return b[0], nil
}

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

// State flag bits, in format 1's flags and format 2's podFlags field alike.
// They are persisted: a new flag takes the next bit, and a reader ignores
// the bits it does not know.
const (
	flagHasSandboxCreation = 1 << 0
	flagTimedOut           = 1 << 1
	flagUserError          = 1 << 2
	flagExcluded           = 1 << 3
	flagHasTermination     = 1 << 4
	flagTerminationDone    = 1 << 5
	flagHasReadiness       = 1 << 6
	flagHasStabilization   = 1 << 7
	flagStable             = 1 << 8
	flagStableSeen         = 1 << 9
	flagSeenLate           = 1 << 10
	flagSeenRecreated      = 1 << 11
)

func stateFlags(s *lifecycle.State) uint64 {
	return flag(s.HasSandboxCreation, flagHasSandboxCreation) | flag(s.TimedOut, flagTimedOut) |
		flag(s.UserError, flagUserError) | flag(s.Excluded, flagExcluded) | flag(s.HasTermination, flagHasTermination) |
		flag(s.TerminationDone, flagTerminationDone) | flag(s.HasReadiness, flagHasReadiness) |
		flag(s.HasStabilization, flagHasStabilization) | flag(s.Stable, flagStable) | flag(s.StableSeen, flagStableSeen) |
		flag(s.SeenLate, flagSeenLate) | flag(s.SeenRecreated, flagSeenRecreated)
}

func setFlags(s *lifecycle.State, flags uint64) {
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
	s.SeenRecreated = flags&flagSeenRecreated != 0
}

func flag(set bool, bit uint64) uint64 {
	if set {
		return bit
	}
	return 0
}

// The fields of a format-2 pod record. Times other than Scheduled are
// deltas from Scheduled (a record stays around 40 bytes); every signed
// number is zigzag-encoded. A field is written only when it is not zero,
// and an absent field reads as zero: "not seen".
const (
	podFlags             protowire.Number = 1  // varint: the flag* bits
	podPhases            protowire.Number = 2  // varint: bit p is lifecycle.Phase p
	podScheduled         protowire.Number = 3  // Unix seconds
	podFirstSandboxReady protowire.Number = 4  // delta
	podLastSandboxReady  protowire.Number = 5  // delta
	podDeletionRequested protowire.Number = 6  // delta
	podFirstReady        protowire.Number = 7  // delta
	podFirstStable       protowire.Number = 8  // delta
	podStabilityLost     protowire.Number = 9  // delta
	podSandboxCreation   protowire.Number = 10 // seconds
	podTermination       protowire.Number = 11 // seconds
	podReadiness         protowire.Number = 12 // seconds
	podStabilization     protowire.Number = 13 // seconds
	podRecreations       protowire.Number = 14 // varint
	podStabilityLosses   protowire.Number = 15 // varint
	podSkipped           protowire.Number = 16 // packed varints: SLI<<8 | Reason
	// The watch receive times of issue 27 (lifecycle.Precise: offsets in
	// milliseconds, biased positive) and the readiness SLI's start.
	podScheduledPrecise      protowire.Number = 17 // varint
	podDeletionPrecise       protowire.Number = 18 // varint
	podContainerStart        protowire.Number = 19 // delta
	podContainerStartPrecise protowire.Number = 20 // varint
	// The image pulls and the start-up SLI of issue 28 (lifecycle/pulls.go,
	// lifecycle/startup.go): the pulls' sum and State.Startup in
	// milliseconds, and their lifecycle.PullFlags, a field of their own so
	// that podFlags' bits stay free for others.
	podImagePull protowire.Number = 21 // varint
	podStartup   protowire.Number = 22 // zigzag
	podPullFlags protowire.Number = 23 // varint: lifecycle.PullFlags
	// The pulled images' size in KiB (State.ImagePullKiB).
	podImagePullKiB protowire.Number = 24 // varint
)

// podFieldNames names every pod field number ever used, for the golden test
// that keeps them from being renumbered or reused.
var podFieldNames = map[protowire.Number]string{
	podFlags: "flags", podPhases: "phases", podScheduled: "scheduled",
	podFirstSandboxReady: "first_sandbox_ready", podLastSandboxReady: "last_sandbox_ready",
	podDeletionRequested: "deletion_requested", podFirstReady: "first_ready", podFirstStable: "first_stable",
	podStabilityLost: "stability_lost", podSandboxCreation: "sandbox_creation", podTermination: "termination",
	podReadiness: "readiness", podStabilization: "stabilization", podRecreations: "recreations",
	podStabilityLosses: "stability_losses", podSkipped: "skipped",
	podScheduledPrecise: "scheduled_precise", podDeletionPrecise: "deletion_precise",
	podContainerStart: "container_start", podContainerStartPrecise: "container_start_precise",
	podImagePull: "image_pull", podStartup: "startup", podPullFlags: "pull_flags",
	podImagePullKiB: "image_pull_kib",
}

func appendUint(b []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, v)
}

func appendInt(b []byte, num protowire.Number, v int64) []byte {
	return appendUint(b, num, protowire.EncodeZigZag(v))
}

// appendTime writes a time as its delta from base; a time equal to base is
// written (as 0) so that it is not taken for "not seen".
func appendTime(b []byte, num protowire.Number, t, base int64) []byte {
	if t == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.VarintType)
	return protowire.AppendVarint(b, protowire.EncodeZigZag(t-base))
}

func encodeState(s lifecycle.State) []byte {
	b := make([]byte, 0, 64)
	b = append(b, podRecordV2)
	b = appendUint(b, podFlags, stateFlags(&s))
	b = appendUint(b, podPhases, uint64(s.Phases))
	b = appendInt(b, podScheduled, s.Scheduled)
	b = appendTime(b, podFirstSandboxReady, s.FirstSandboxReady, s.Scheduled)
	b = appendTime(b, podLastSandboxReady, s.LastSandboxReady, s.Scheduled)
	b = appendTime(b, podDeletionRequested, s.DeletionRequested, s.Scheduled)
	b = appendTime(b, podFirstReady, s.FirstReady, s.Scheduled)
	b = appendTime(b, podFirstStable, s.FirstStable, s.Scheduled)
	b = appendTime(b, podStabilityLost, s.StabilityLost, s.Scheduled)
	b = appendInt(b, podSandboxCreation, s.SandboxCreation)
	b = appendInt(b, podTermination, s.Termination)
	b = appendInt(b, podReadiness, s.Readiness)
	b = appendInt(b, podStabilization, s.Stabilization)
	b = appendUint(b, podRecreations, uint64(s.Recreations))
	b = appendUint(b, podStabilityLosses, uint64(s.StabilityLosses))
	if s.Skipped != 0 {
		var packed []byte
		for _, sk := range s.Skipped.All() {
			packed = protowire.AppendVarint(packed, uint64(sk.SLI)<<8|uint64(sk.Reason))
		}
		b = protowire.AppendTag(b, podSkipped, protowire.BytesType)
		b = protowire.AppendBytes(b, packed)
	}
	b = appendUint(b, podScheduledPrecise, uint64(s.ScheduledPrecise))
	b = appendUint(b, podDeletionPrecise, uint64(s.DeletionPrecise))
	b = appendTime(b, podContainerStart, s.ContainerStart, s.Scheduled)
	b = appendUint(b, podContainerStartPrecise, uint64(s.ContainerStartPrecise))
	b = appendUint(b, podImagePull, uint64(s.ImagePull))
	b = appendInt(b, podStartup, int64(s.Startup))
	b = appendUint(b, podPullFlags, uint64(s.Pulls))
	b = appendUint(b, podImagePullKiB, uint64(s.ImagePullKiB))
	return sealRecord(b)
}

// decodeState reads a pod record of any format this release knows.
func decodeState(b []byte) (lifecycle.State, error) {
	format, err := recordFormat(b)
	if err != nil {
		return lifecycle.State{}, err
	}
	if format == podRecordV1 {
		s, err := decodeStateV1(b)
		if err != nil {
			// Format 1 has no checksum: a record 0.1.0 wrote always
			// decodes, so one that does not was damaged.
			return s, fmt.Errorf("format 1: %w (%w)", errChecksum, err)
		}
		return s, nil
	}
	body, err := openRecord(b)
	if err != nil {
		return lifecycle.State{}, err
	}
	var s lifecycle.State
	// Times are deltas from Scheduled, which may come after them in a
	// record from another release: they are resolved at the end.
	var times [6]struct {
		v   int64
		set bool
	}
	var containerStart struct {
		v   int64
		set bool
	}
	err = fields(body, func(num protowire.Number, v uint64, bytes []byte) error {
		switch num {
		case podFlags:
			setFlags(&s, v)
		case podPhases:
			for p := lifecycle.Phase(0); v>>p != 0; p++ {
				if v&(1<<p) != 0 && p.Known() {
					s.Phases = s.Phases.With(p)
				}
			}
		case podScheduled:
			s.Scheduled = protowire.DecodeZigZag(v)
		case podFirstSandboxReady, podLastSandboxReady, podDeletionRequested, podFirstReady, podFirstStable, podStabilityLost:
			times[num-podFirstSandboxReady].v, times[num-podFirstSandboxReady].set = protowire.DecodeZigZag(v), true
		case podSandboxCreation:
			s.SandboxCreation = protowire.DecodeZigZag(v)
		case podTermination:
			s.Termination = protowire.DecodeZigZag(v)
		case podReadiness:
			s.Readiness = protowire.DecodeZigZag(v)
		case podStabilization:
			s.Stabilization = protowire.DecodeZigZag(v)
		case podRecreations:
			s.Recreations = uint32(v)
		case podStabilityLosses:
			s.StabilityLosses = uint32(v)
		case podScheduledPrecise, podDeletionPrecise, podContainerStartPrecise:
			if v > math.MaxInt16 {
				return fmt.Errorf("field %d: precise time %d out of range: %w", num, v, errDecode)
			}
			switch num {
			case podScheduledPrecise:
				s.ScheduledPrecise = lifecycle.Precise(v)
			case podDeletionPrecise:
				s.DeletionPrecise = lifecycle.Precise(v)
			default:
				s.ContainerStartPrecise = lifecycle.Precise(v)
			}
		case podContainerStart:
			containerStart.v, containerStart.set = protowire.DecodeZigZag(v), true
		case podImagePull:
			if v > math.MaxUint32 {
				return fmt.Errorf("image_pull: %d ms out of range: %w", v, errDecode)
			}
			s.ImagePull = uint32(v)
		case podImagePullKiB:
			if v > math.MaxUint32 {
				return fmt.Errorf("image_pull_kib: %d KiB out of range: %w", v, errDecode)
			}
			s.ImagePullKiB = uint32(v)
		case podStartup:
			ms := protowire.DecodeZigZag(v)
			if ms > math.MaxInt32 || ms < math.MinInt32 {
				return fmt.Errorf("startup: %d ms out of range: %w", ms, errDecode)
			}
			s.Startup = int32(ms)
		case podPullFlags:
			// Bits a newer release added are left out, as for podFlags.
			s.Pulls = lifecycle.PullFlags(v & math.MaxUint8)
		case podSkipped:
			for len(bytes) > 0 {
				x, n := protowire.ConsumeVarint(bytes)
				if n < 0 {
					return fmt.Errorf("skipped: %w", errDecode)
				}
				bytes = bytes[n:]
				// A skip of an SLI or Reason this release does not know
				// was written by a newer one: it cannot be counted here.
				if sk := (lifecycle.Skip{SLI: lifecycle.SLI(x >> 8), Reason: lifecycle.Reason(x & 0xff)}); x>>16 == 0 && sk.Known() {
					s.Skipped = s.Skipped.With(sk)
				}
			}
		}
		return nil
	}, podWireTypes)
	if err != nil {
		return lifecycle.State{}, err
	}
	for i, p := range []*int64{&s.FirstSandboxReady, &s.LastSandboxReady, &s.DeletionRequested, &s.FirstReady, &s.FirstStable, &s.StabilityLost} {
		if times[i].set {
			*p = s.Scheduled + times[i].v
		}
	}
	if containerStart.set {
		s.ContainerStart = s.Scheduled + containerStart.v
	}
	return s, nil
}

func podWireTypes(num protowire.Number) (protowire.Type, bool) {
	switch {
	case num == podSkipped:
		return protowire.BytesType, true
	case num >= podFlags && num < podSkipped, num >= podScheduledPrecise && num <= podImagePullKiB:
		return protowire.VarintType, true
	}
	return 0, false
}

// fields calls fn for each field of body whose number wantType knows, with
// its value (varint and fixed64 fields) or its bytes (length-delimited
// ones), and skips every other field: those of a newer release.
func fields(body []byte, fn func(num protowire.Number, v uint64, b []byte) error, wantType func(protowire.Number) (protowire.Type, bool)) error {
	for len(body) > 0 {
		num, typ, n := protowire.ConsumeTag(body)
		if n < 0 {
			return fmt.Errorf("tag: %w", errDecode)
		}
		body = body[n:]
		want, known := wantType(num)
		if !known {
			n = protowire.ConsumeFieldValue(num, typ, body)
			if n < 0 {
				return fmt.Errorf("field %d: %w", num, errDecode)
			}
			body = body[n:]
			continue
		}
		if typ != want {
			return fmt.Errorf("field %d has wire type %d, want %d: %w", num, typ, want, errDecode)
		}
		var v uint64
		var b []byte
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(body)
		case protowire.Fixed64Type:
			v, n = protowire.ConsumeFixed64(body)
		case protowire.Fixed32Type:
			var x uint32
			x, n = protowire.ConsumeFixed32(body)
			v = uint64(x)
		case protowire.BytesType:
			b, n = protowire.ConsumeBytes(body)
		}
		if n < 0 {
			return fmt.Errorf("field %d: %w", num, errDecode)
		}
		body = body[n:]
		if err := fn(num, v, b); err != nil {
			return err
		}
	}
	return nil
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

// Aggregate kinds, persisted: a kind a reader does not know is a record it
// cannot use, so a new kind needs a new format.
const (
	kindCounter   = 1
	kindHistogram = 2
)

// The fields of a format-2 aggregate record.
const (
	aggCreated   protowire.Number = 1  // Unix seconds, zigzag
	aggKind      protowire.Number = 2  // varint: kindCounter or kindHistogram
	aggValue     protowire.Number = 3  // fixed64: a counter's value
	aggCount     protowire.Number = 4  // varint
	aggSum       protowire.Number = 5  // fixed64
	aggLayout    protowire.Number = 6  // fixed32: the layout ID of the classic bounds the counts were written with
	aggClassic   protowire.Number = 7  // packed varints: per-bucket counts, +Inf last
	aggSchema    protowire.Number = 8  // zigzag
	aggZeroCount protowire.Number = 9  // varint
	aggNative    protowire.Number = 10 // packed varints: zigzag index delta, count; in index order
	aggPrecise   protowire.Number = 11 // varint: observations measured in milliseconds (issue 27)
)

var aggregateFieldNames = map[protowire.Number]string{
	aggCreated: "created", aggKind: "kind", aggValue: "value", aggCount: "count", aggSum: "sum",
	aggLayout: "layout", aggClassic: "classic", aggSchema: "schema", aggZeroCount: "zero_count", aggNative: "native",
	aggPrecise: "precise",
}

func aggregateWireTypes(num protowire.Number) (protowire.Type, bool) {
	switch num {
	case aggCreated, aggKind, aggCount, aggSchema, aggZeroCount, aggPrecise:
		return protowire.VarintType, true
	case aggValue, aggSum:
		return protowire.Fixed64Type, true
	case aggLayout:
		return protowire.Fixed32Type, true
	case aggClassic, aggNative:
		return protowire.BytesType, true
	}
	return 0, false
}

func appendFixed(b []byte, num protowire.Number, v float64) []byte {
	if v == 0 {
		return b
	}
	b = protowire.AppendTag(b, num, protowire.Fixed64Type)
	return protowire.AppendFixed64(b, math.Float64bits(v))
}

// encodeAggregate writes a, naming the layout of the classic bounds its
// counts are in (layoutID), so that a release with other bounds can carry
// the counts over (rebucket). The layout itself is its own record
// (encodeLayout), written once, not in every histogram record.
func encodeAggregate(a *Aggregate, layout uint32) []byte {
	if a.Histogram == nil {
		b := make([]byte, 0, 24)
		b = append(b, aggregateRecordV2)
		b = appendInt(b, aggCreated, a.Created)
		b = appendUint(b, aggKind, kindCounter)
		b = appendFixed(b, aggValue, a.Value)
		return sealRecord(b)
	}
	h := a.Histogram
	classic := 0
	for _, c := range h.Classic {
		classic += protowire.SizeVarint(c)
	}
	native, prev := 0, int32(0)
	for _, nb := range h.Native {
		native += protowire.SizeVarint(protowire.EncodeZigZag(int64(nb.Index-prev))) + protowire.SizeVarint(nb.Count)
		prev = nb.Index
	}
	// Sized once: the record is written at every observation of its series.
	b := make([]byte, 0, 64+classic+native)
	b = append(b, aggregateRecordV2)
	b = appendInt(b, aggCreated, a.Created)
	b = appendUint(b, aggKind, kindHistogram)
	b = appendUint(b, aggCount, h.Count)
	b = appendFixed(b, aggSum, h.Sum)
	b = protowire.AppendTag(b, aggLayout, protowire.Fixed32Type)
	b = protowire.AppendFixed32(b, layout)
	b = protowire.AppendTag(b, aggClassic, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(classic))
	for _, c := range h.Classic {
		b = protowire.AppendVarint(b, c)
	}
	b = appendInt(b, aggSchema, int64(h.Schema))
	b = appendUint(b, aggZeroCount, h.ZeroCount)
	b = appendUint(b, aggPrecise, h.Precise)
	if len(h.Native) > 0 {
		b = protowire.AppendTag(b, aggNative, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(native))
		prev = 0
		for _, nb := range h.Native {
			b = protowire.AppendVarint(b, protowire.EncodeZigZag(int64(nb.Index-prev)))
			b = protowire.AppendVarint(b, nb.Count)
			prev = nb.Index
		}
	}
	return sealRecord(b)
}

// layoutID names a classic bucket layout: the CRC-32C of its bounds.
func layoutID(bounds []float64) uint32 {
	b := make([]byte, 0, 8*len(bounds))
	for _, x := range bounds {
		b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
	}
	return crc32.Checksum(b, crcTable)
}

func layoutKey(id uint32) []byte {
	return binary.BigEndian.AppendUint32([]byte{prefixLayout}, id)
}

// The field of a layout record: its bounds, packed fixed64.
const layoutBounds protowire.Number = 1

var layoutFieldNames = map[protowire.Number]string{layoutBounds: "bounds"}

func encodeLayout(bounds []float64) []byte {
	b := make([]byte, 0, 16+8*len(bounds))
	b = append(b, layoutRecordV2)
	b = protowire.AppendTag(b, layoutBounds, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(8*len(bounds)))
	for _, x := range bounds {
		b = protowire.AppendFixed64(b, math.Float64bits(x))
	}
	return sealRecord(b)
}

func decodeLayout(key, b []byte) (uint32, []float64, error) {
	if len(key) != 5 {
		return 0, nil, fmt.Errorf("layout key %q: %w", key, errDecode)
	}
	if _, err := recordFormat(b); err != nil {
		return 0, nil, err
	}
	body, err := openRecord(b)
	if err != nil {
		return 0, nil, err
	}
	var raw []byte
	err = fields(body, func(_ protowire.Number, _ uint64, bs []byte) error { raw = bs; return nil },
		func(n protowire.Number) (protowire.Type, bool) { return protowire.BytesType, n == layoutBounds })
	if err != nil {
		return 0, nil, err
	}
	if len(raw)%8 != 0 {
		return 0, nil, fmt.Errorf("layout bounds of %d bytes: %w", len(raw), errDecode)
	}
	bounds := make([]float64, 0, len(raw)/8)
	for ; len(raw) > 0; raw = raw[8:] {
		bounds = append(bounds, math.Float64frombits(binary.LittleEndian.Uint64(raw)))
	}
	id := binary.BigEndian.Uint32(key[1:])
	if !slices.IsSorted(bounds) || layoutID(bounds) != id {
		return 0, nil, fmt.Errorf("layout %08x holds other bounds: %w", id, errDecode)
	}
	return id, bounds, nil
}

// storedAggregate is an aggregate as read, with the classic bounds its
// counts were written with.
type storedAggregate struct {
	Aggregate
	bounds []float64
}

// decodeAggregate reads an aggregate record of any format this release
// knows and moves its classic counts onto bounds (rebucket); layouts are
// the layout records the state holds, by ID.
func decodeAggregate(b []byte, bounds []float64, layouts map[uint32][]float64) (*Aggregate, error) {
	format, err := recordFormat(b)
	if err != nil {
		return nil, err
	}
	var a *storedAggregate
	if format == aggregateRecordV1 {
		if a, err = decodeAggregateV1(b); err != nil {
			return nil, fmt.Errorf("format 1: %w (%w)", errChecksum, err)
		}
	} else if a, err = decodeAggregateV2(b, layouts); err != nil {
		return nil, err
	}
	if a.Histogram != nil {
		a.Histogram.Classic = rebucket(a.Histogram.Classic, a.bounds, bounds)
	}
	return &a.Aggregate, nil
}

func decodeAggregateV2(b []byte, layouts map[uint32][]float64) (*storedAggregate, error) {
	body, err := openRecord(b)
	if err != nil {
		return nil, err
	}
	a := &storedAggregate{}
	h := &Histogram{}
	var kind uint64
	var layout uint32
	var classic, native []byte
	err = fields(body, func(num protowire.Number, v uint64, bs []byte) error {
		switch num {
		case aggCreated:
			a.Created = protowire.DecodeZigZag(v)
		case aggKind:
			kind = v
		case aggValue:
			a.Value = math.Float64frombits(v)
		case aggCount:
			h.Count = v
		case aggSum:
			h.Sum = math.Float64frombits(v)
		case aggLayout:
			layout = uint32(v)
		case aggClassic:
			classic = bs
		case aggSchema:
			h.Schema = int32(protowire.DecodeZigZag(v))
		case aggZeroCount:
			h.ZeroCount = v
		case aggNative:
			native = bs
		case aggPrecise:
			h.Precise = v
		}
		return nil
	}, aggregateWireTypes)
	if err != nil {
		return nil, err
	}
	switch kind {
	case kindCounter:
		return a, nil
	case kindHistogram:
	default:
		return nil, fmt.Errorf("aggregate kind %d: %w", kind, ErrNewerFormat)
	}
	var known bool
	if a.bounds, known = layouts[layout]; !known {
		// Written in the same transaction as the first histogram that
		// names it: a state without it was changed by something else.
		return nil, fmt.Errorf("histogram names bucket layout %08x, which the state does not hold: %w", layout, errDecode)
	}
	for len(classic) > 0 {
		c, n := protowire.ConsumeVarint(classic)
		if n < 0 {
			return nil, fmt.Errorf("classic counts: %w", errDecode)
		}
		h.Classic, classic = append(h.Classic, c), classic[n:]
	}
	if len(h.Classic) != len(a.bounds)+1 {
		return nil, fmt.Errorf("%d classic counts for %d bounds: %w", len(h.Classic), len(a.bounds), errDecode)
	}
	if h.Schema < nativeMinSchema || h.Schema > nativeInitialSchema {
		return nil, fmt.Errorf("native schema %d: %w", h.Schema, errDecode)
	}
	if h.Precise > h.Count {
		return nil, fmt.Errorf("%d observations in milliseconds of %d: %w", h.Precise, h.Count, errDecode)
	}
	idx := int64(0)
	for len(native) > 0 {
		d, n := protowire.ConsumeVarint(native)
		if n < 0 {
			return nil, fmt.Errorf("native buckets: %w", errDecode)
		}
		c, m := protowire.ConsumeVarint(native[n:])
		if m < 0 {
			return nil, fmt.Errorf("native buckets: %w", errDecode)
		}
		native = native[n+m:]
		delta := protowire.DecodeZigZag(d)
		if len(h.Native) > 0 && delta <= 0 {
			return nil, fmt.Errorf("native buckets out of order: %w", errDecode)
		}
		idx += delta
		if idx < math.MinInt32 || idx > math.MaxInt32 || len(h.Native) == maxNativeBuckets {
			return nil, fmt.Errorf("native buckets out of range: %w", errDecode)
		}
		h.Native = append(h.Native, NativeBucket{Index: int32(idx), Count: c})
	}
	a.Histogram = h
	return a, nil
}

// rebucket moves classic counts written under the bounds from onto the
// bounds to. Each old bucket's count goes to the new bucket that holds its
// upper bound: the cumulative count at every bound the two layouts share is
// unchanged, so those series go on without a reset, and a new bound starts
// with what is certainly below it (an old bucket that straddles it counts
// above). Counts are never split, dropped or counted twice; Count and Sum
// do not change.
func rebucket(counts []uint64, from, to []float64) []uint64 {
	if slices.Equal(from, to) {
		return counts
	}
	out := make([]uint64, len(to)+1)
	for i, c := range counts {
		j := len(to) // +Inf
		if i < len(from) {
			j = sort.SearchFloat64s(to, from[i])
		}
		out[j] += c
	}
	return out
}
