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

// The bools of lifecycle.State, as bits of format 1's flags and of format
// 2's flags field alike. They are persisted: a new one takes the next bit,
// and a reader ignores the bits it does not know.
var stateFlagBits = []struct {
	bit   uint64
	field func(*lifecycle.State) *bool
}{
	{1 << 0, func(s *lifecycle.State) *bool { return &s.HasSandboxCreation }},
	{1 << 1, func(s *lifecycle.State) *bool { return &s.TimedOut }},
	{1 << 2, func(s *lifecycle.State) *bool { return &s.UserError }},
	{1 << 3, func(s *lifecycle.State) *bool { return &s.Excluded }},
	{1 << 4, func(s *lifecycle.State) *bool { return &s.HasTermination }},
	{1 << 5, func(s *lifecycle.State) *bool { return &s.TerminationDone }},
	{1 << 6, func(s *lifecycle.State) *bool { return &s.HasReadiness }},
	{1 << 7, func(s *lifecycle.State) *bool { return &s.HasStabilization }},
	{1 << 8, func(s *lifecycle.State) *bool { return &s.Stable }},
	{1 << 9, func(s *lifecycle.State) *bool { return &s.StableSeen }},
	{1 << 10, func(s *lifecycle.State) *bool { return &s.SeenLate }},
	{1 << 11, func(s *lifecycle.State) *bool { return &s.SeenRecreated }},
	{1 << 12, func(s *lifecycle.State) *bool { return &s.SandboxDownSeen }},
}

func stateFlags(s *lifecycle.State) uint64 {
	var flags uint64
	for _, f := range stateFlagBits {
		if *f.field(s) {
			flags |= f.bit
		}
	}
	return flags
}

func setFlags(s *lifecycle.State, flags uint64) {
	for _, f := range stateFlagBits {
		*f.field(s) = flags&f.bit != 0
	}
}

// podField declares one field of the format-2 pod record, once: its
// number, its name (testdata/golden/fields.txt), its wire type, the unit of
// the number it writes, and how it is written and read. The encoder, the
// decoder, the wire types the decoder accepts and TestFieldNumbersOnlyGrow
// all follow from podFields; docs/architecture.md says how to add one.
type podField struct {
	num  protowire.Number
	name string
	wire protowire.Type
	unit string
	// put appends the field of s to b, or nothing when it is zero: an
	// absent field reads as zero, "not seen".
	put func(b []byte, num protowire.Number, s *lifecycle.State) []byte
	// take sets the field in s from what was read of it: v for a varint
	// field, raw for a bytes field, each copy in the order met (a later
	// copy of a number replaces an earlier one, the skips of each add
	// up). r holds what other fields a field is read relative to: the
	// times to scheduled, which may come after them in another release's
	// record.
	take func(s *lifecycle.State, r podRecord, v uint64, raw []byte) error
}

// Field numbers that other fields of the pod record are read relative to.
const (
	podScheduled protowire.Number = 3
	podPullFlags protowire.Number = 23
)

// podFields is the pod record of format 2, in field-number order, which is
// the order the encoder writes them in (the golden records hold it). Times
// other than scheduled are deltas from it (a record stays around 40
// bytes); every signed number is zigzag-encoded.
var podFields = []podField{
	{num: 1, name: "flags", wire: protowire.VarintType, unit: "bits: stateFlagBits",
		put: func(b []byte, num protowire.Number, s *lifecycle.State) []byte {
			return appendUint(b, num, stateFlags(s))
		},
		take: func(s *lifecycle.State, _ podRecord, v uint64, _ []byte) error {
			setFlags(s, v)
			return nil
		}},
	{num: 2, name: "phases", wire: protowire.VarintType, unit: "bits: bit p is lifecycle.Phase p",
		put: func(b []byte, num protowire.Number, s *lifecycle.State) []byte {
			return appendUint(b, num, uint64(s.Phases))
		},
		take: func(s *lifecycle.State, _ podRecord, v uint64, _ []byte) error {
			// A phase a newer release appended is left out.
			for p := lifecycle.Phase(0); v>>p != 0; p++ {
				if v&(1<<p) != 0 && p.Known() {
					s.Phases = s.Phases.With(p)
				}
			}
			return nil
		}},
	{num: podScheduled, name: "scheduled", wire: protowire.VarintType, unit: "Unix seconds, zigzag",
		put: func(b []byte, num protowire.Number, s *lifecycle.State) []byte { return appendInt(b, num, s.Scheduled) },
		take: func(s *lifecycle.State, _ podRecord, v uint64, _ []byte) error {
			s.Scheduled = protowire.DecodeZigZag(v)
			return nil
		}},
	timeField(4, "first_sandbox_ready", func(s *lifecycle.State) *int64 { return &s.FirstSandboxReady }),
	timeField(5, "last_sandbox_ready", func(s *lifecycle.State) *int64 { return &s.LastSandboxReady }),
	timeField(6, "deletion_requested", func(s *lifecycle.State) *int64 { return &s.DeletionRequested }),
	timeField(7, "first_ready", func(s *lifecycle.State) *int64 { return &s.FirstReady }),
	timeField(8, "first_stable", func(s *lifecycle.State) *int64 { return &s.FirstStable }),
	timeField(9, "stability_lost", func(s *lifecycle.State) *int64 { return &s.StabilityLost }),
	secondsOfMillisField(10, "sandbox_creation", func(s *lifecycle.State) *int32 { return &s.SandboxCreationMs }),
	secondsOfMillisField(11, "termination", func(s *lifecycle.State) *int32 { return &s.TerminationMs }),
	secondsOfMillisField(12, "readiness", func(s *lifecycle.State) *int32 { return &s.ReadinessMs }),
	secondsField(13, "stabilization", func(s *lifecycle.State) *int32 { return &s.Stabilization }),
	uintField(14, "recreations", "count", func(s *lifecycle.State) *uint32 { return &s.Recreations }),
	uintField(15, "stability_losses", "count", func(s *lifecycle.State) *uint32 { return &s.StabilityLosses }),
	{num: 16, name: "skipped", wire: protowire.BytesType, unit: "packed varints: SLI<<8 | Reason",
		put: appendSkips, take: takeSkips},
	// The watch receive times of issue 27 and the readiness SLI's start.
	preciseField(17, "scheduled_precise", func(s *lifecycle.State) *lifecycle.Precise { return &s.ScheduledPrecise }),
	preciseField(18, "deletion_precise", func(s *lifecycle.State) *lifecycle.Precise { return &s.DeletionPrecise }),
	timeField(19, "container_start", func(s *lifecycle.State) *int64 { return &s.ContainerStart }),
	preciseField(20, "container_start_precise", func(s *lifecycle.State) *lifecycle.Precise { return &s.ContainerStartPrecise }),
	// The image pulls and the start-up SLI of issue 28 (lifecycle/pulls.go,
	// lifecycle/startup.go).
	uintField(21, "image_pull", "milliseconds", func(s *lifecycle.State) *uint32 { return &s.ImagePull }),
	{num: 22, name: "startup", wire: protowire.VarintType, unit: "milliseconds, zigzag",
		put: appendStartupSlot, take: takeStartupSlot},
	{num: podPullFlags, name: "pull_flags", wire: protowire.VarintType, unit: "bits: lifecycle.PullFlags",
		put: func(b []byte, num protowire.Number, s *lifecycle.State) []byte {
			return appendUint(b, num, uint64(s.Pulls))
		},
		take: func(s *lifecycle.State, _ podRecord, v uint64, _ []byte) error {
			// Bits a newer release added are left out, as for flags.
			s.Pulls = lifecycle.PullFlags(v) & lifecycle.KnownPullFlags
			return nil
		}},
	uintField(24, "image_pull_kib", "KiB", func(s *lifecycle.State) *uint32 { return &s.ImagePullKiB }),
	// Issue 33: two of the three quantities that startup held in turn,
	// each in a field of its own.
	unlessInSlot(slotBeforePulls,
		intField(25, "startup_before_pulls", "milliseconds, zigzag", func(s *lifecycle.State) *int32 { return &s.StartupBeforePulls })),
	unlessInSlot(slotPullsInit,
		uintField(26, "image_pull_init", "milliseconds", func(s *lifecycle.State) *uint32 { return &s.ImagePullInit })),
	// Issue 35: the first deletion's grace period, for over-grace.
	secondsField(27, "deletion_grace", func(s *lifecycle.State) *int32 { return &s.DeletionGrace }),
	// Issue 35: the part of a second of fields 10 to 12, which the per-pod
	// series show as the observations had it.
	millisField(28, "sandbox_creation_ms", func(s *lifecycle.State) *int32 { return &s.SandboxCreationMs }),
	millisField(29, "termination_ms", func(s *lifecycle.State) *int32 { return &s.TerminationMs }),
	millisField(30, "readiness_ms", func(s *lifecycle.State) *int32 { return &s.ReadinessMs }),
}

// secondsOfMillisField is a duration the state keeps in milliseconds,
// written in whole seconds (truncated), as releases before issue 35 kept
// it and read it: a rollback finds the seconds it knows. millisField
// writes the milliseconds beside it when they are not whole seconds. In
// either order, the seconds do not overwrite milliseconds in the same
// second.
func secondsOfMillisField(num protowire.Number, name string, field func(*lifecycle.State) *int32) podField {
	return podField{num: num, name: name, wire: protowire.VarintType, unit: "seconds, zigzag (of a milliseconds value; see the _ms field)",
		put: func(b []byte, num protowire.Number, s *lifecycle.State) []byte {
			return appendInt(b, num, int64(*field(s)/1000))
		},
		take: func(s *lifecycle.State, _ podRecord, v uint64, _ []byte) error {
			if sec := protowire.DecodeZigZag(v); int64(*field(s)/1000) != sec || *field(s) == 0 {
				*field(s) = lifecycle.MillisOfSeconds(sec)
			}
			return nil
		}}
}

// millisField is the milliseconds of a secondsOfMillisField, written only
// when they are not whole seconds: a record of whole seconds stays as
// long as before.
func millisField(num protowire.Number, name string, field func(*lifecycle.State) *int32) podField {
	return podField{num: num, name: name, wire: protowire.VarintType, unit: "milliseconds, zigzag, when not whole seconds",
		put: func(b []byte, num protowire.Number, s *lifecycle.State) []byte {
			if v := *field(s); v%1000 != 0 {
				return appendInt(b, num, int64(v))
			}
			return b
		},
		take: func(s *lifecycle.State, _ podRecord, v uint64, _ []byte) error {
			*field(s) = lifecycle.Millis32(protowire.DecodeZigZag(v))
			return nil
		}}
}

// timeField is a time in Unix seconds, written as its delta from
// scheduled, zigzag. A time equal to scheduled is written (as 0), so that
// it is not taken for "not seen".
func timeField(num protowire.Number, name string, field func(*lifecycle.State) *int64) podField {
	return podField{num: num, name: name, wire: protowire.VarintType, unit: "Unix seconds, as seconds after scheduled, zigzag",
		put: func(b []byte, num protowire.Number, s *lifecycle.State) []byte {
			return appendTime(b, num, *field(s), s.Scheduled)
		},
		take: func(s *lifecycle.State, r podRecord, v uint64, _ []byte) error {
			*field(s) = r.scheduled + protowire.DecodeZigZag(v)
			return nil
		}}
}

// secondsField is a duration in whole seconds. Releases before issue 33
// kept it in an int64: a value beyond an int32's 68 years (which only a
// broken clock gives) reads as the limit, as lifecycle.Seconds32 keeps it.
func secondsField(num protowire.Number, name string, field func(*lifecycle.State) *int32) podField {
	return podField{num: num, name: name, wire: protowire.VarintType, unit: "seconds, zigzag",
		put: func(b []byte, num protowire.Number, s *lifecycle.State) []byte {
			return appendInt(b, num, int64(*field(s)))
		},
		take: func(s *lifecycle.State, _ podRecord, v uint64, _ []byte) error {
			*field(s) = lifecycle.Seconds32(protowire.DecodeZigZag(v))
			return nil
		}}
}

// uintField is an unsigned number. No release writes more than its Go type
// holds: a record that does is refused, with the field named, rather than
// read cut short.
func uintField[T ~uint8 | ~uint16 | ~uint32](num protowire.Number, name, unit string, field func(*lifecycle.State) *T) podField {
	return podField{num: num, name: name, wire: protowire.VarintType, unit: unit,
		put: func(b []byte, num protowire.Number, s *lifecycle.State) []byte {
			return appendUint(b, num, uint64(*field(s)))
		},
		take: func(s *lifecycle.State, _ podRecord, v uint64, _ []byte) error {
			if uint64(T(v)) != v {
				return fmt.Errorf("%s: %d %s out of range: %w", name, v, unit, errDecode)
			}
			*field(s) = T(v)
			return nil
		}}
}

// intField is a signed number, zigzag, refused out of its Go type's range
// like uintField's.
func intField[T ~int16 | ~int32](num protowire.Number, name, unit string, field func(*lifecycle.State) *T) podField {
	return podField{num: num, name: name, wire: protowire.VarintType, unit: unit,
		put: func(b []byte, num protowire.Number, s *lifecycle.State) []byte {
			return appendInt(b, num, int64(*field(s)))
		},
		take: func(s *lifecycle.State, _ podRecord, v uint64, _ []byte) error {
			x := protowire.DecodeZigZag(v)
			if int64(T(x)) != x {
				return fmt.Errorf("%s: %d %s out of range: %w", name, x, unit, errDecode)
			}
			*field(s) = T(x)
			return nil
		}}
}

// preciseField is a lifecycle.Precise: milliseconds from the start of its
// time's second, plus 1000, as a varint; 0 when known to the second only.
func preciseField(num protowire.Number, name string, field func(*lifecycle.State) *lifecycle.Precise) podField {
	return podField{num: num, name: name, wire: protowire.VarintType, unit: "milliseconds into the second, +1000 (lifecycle.Precise)",
		put: func(b []byte, num protowire.Number, s *lifecycle.State) []byte {
			return appendUint(b, num, uint64(*field(s)))
		},
		take: func(s *lifecycle.State, _ podRecord, v uint64, _ []byte) error {
			if v > math.MaxInt16 {
				return fmt.Errorf("%s: precise time %d out of range: %w", name, v, errDecode)
			}
			*field(s) = lifecycle.Precise(v)
			return nil
		}}
}

func appendSkips(b []byte, num protowire.Number, s *lifecycle.State) []byte {
	if s.Skipped.Empty() {
		return b
	}
	skips := s.Skipped.All()
	n := 0
	for _, sk := range skips {
		n += protowire.SizeVarint(uint64(sk.SLI)<<8 | uint64(sk.Reason))
	}
	b = protowire.AppendTag(b, num, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(n))
	for _, sk := range skips {
		b = protowire.AppendVarint(b, uint64(sk.SLI)<<8|uint64(sk.Reason))
	}
	return b
}

func takeSkips(s *lifecycle.State, _ podRecord, _ uint64, raw []byte) error {
	for len(raw) > 0 {
		x, n := protowire.ConsumeVarint(raw)
		if n < 0 {
			return fmt.Errorf("skipped: %w", errDecode)
		}
		raw = raw[n:]
		// A skip of an SLI or Reason this release does not know was
		// written by a newer one: it cannot be counted here.
		if sk := (lifecycle.Skip{SLI: lifecycle.SLI(x >> 8), Reason: lifecycle.Reason(x & 0xff)}); x>>16 == 0 && sk.Known() {
			s.Skipped = s.Skipped.With(sk)
		}
	}
	return nil
}

// Field 22, startup, is the one field with more than one meaning, kept for
// the releases before issue 33, which read it and need it to: it holds,
// in milliseconds, the start-up SLI once pull_flags has StartupMeasured
// (and 0 once StartupDone without it); before that, while it has
// StartupEndSeen, the SLI before the pulls are taken off; before that,
// once it has PullsDone, the init containers' part of the pulls. This
// release keeps each in a State field of its own. It writes 22 as those
// releases did, so a record it writes before the SLI is measured is the
// record they wrote; and the last two under fields 25 and 26, which
// those releases skip, whenever 22 does not hold them. It reads 22 as one
// of them when its own field is absent.
type startupSlotHolds uint8

const (
	slotStartup startupSlotHolds = iota
	slotBeforePulls
	slotPullsInit
)

func startupSlotFor(p lifecycle.PullFlags) startupSlotHolds {
	switch {
	case p.Has(lifecycle.StartupMeasured), p.Has(lifecycle.StartupDone):
		return slotStartup
	case p.Has(lifecycle.StartupEndSeen):
		return slotBeforePulls
	case p.Has(lifecycle.PullsDone):
		return slotPullsInit
	}
	return slotStartup
}

func startupSlot(s *lifecycle.State) int32 {
	switch startupSlotFor(s.Pulls) {
	case slotBeforePulls:
		return s.StartupBeforePulls
	case slotPullsInit:
		return int32(min(s.ImagePullInit, math.MaxInt32))
	}
	return s.Startup
}

// unlessInSlot is f, left out of a record whose field 22 holds its value.
func unlessInSlot(holds startupSlotHolds, f podField) podField {
	put := f.put
	f.put = func(b []byte, num protowire.Number, s *lifecycle.State) []byte {
		if startupSlotFor(s.Pulls) == holds {
			return b
		}
		return put(b, num, s)
	}
	return f
}

func appendStartupSlot(b []byte, num protowire.Number, s *lifecycle.State) []byte {
	return appendInt(b, num, int64(startupSlot(s)))
}

func takeStartupSlot(s *lifecycle.State, r podRecord, v uint64, _ []byte) error {
	ms := protowire.DecodeZigZag(v)
	if ms > math.MaxInt32 || ms < math.MinInt32 {
		return fmt.Errorf("startup: %d ms out of range: %w", ms, errDecode)
	}
	// Fields 25 and 26 may come after this one: r has them, s not yet.
	switch startupSlotFor(r.pulls) {
	case slotBeforePulls:
		if !r.has(25) {
			s.StartupBeforePulls = int32(ms)
		}
	case slotPullsInit:
		if ms < 0 {
			return fmt.Errorf("startup: %d ms of init containers' pulls: %w", ms, errDecode)
		}
		if !r.has(26) {
			s.ImagePullInit = uint32(ms)
		}
	default:
		s.Startup = int32(ms)
	}
	return nil
}

// podRecord is what a first pass over a pod record finds: the fields
// that others are read relative to, and which numbers it has. It is
// handed to take by value, so that decoding allocates nothing for it.
type podRecord struct {
	scheduled int64
	pulls     lifecycle.PullFlags
	seen      uint64
}

func (r podRecord) has(num protowire.Number) bool { return r.seen&(1<<num) != 0 }

// maxPodField is the highest pod field number podRecord has room for.
const maxPodField = 63

// podFieldIndex finds a field of podFields by its number.
var podFieldIndex = indexPodFields(podFields)

// indexPodFields checks the table when the package loads: a number out of
// podRecord's room, reused, or out of order, a name reused, or a field
// without a unit or a wire type the decoder reads, panics there, so that
// every test fails.
func indexPodFields(fields []podField) [maxPodField + 1]*podField {
	var index [maxPodField + 1]*podField
	names := map[string]bool{}
	for i := range fields {
		f := &fields[i]
		switch {
		case !f.num.IsValid() || f.num > maxPodField:
			panic(fmt.Sprintf("pod field %s: number %d out of 1..%d", f.name, f.num, maxPodField))
		case index[f.num] != nil:
			panic(fmt.Sprintf("pod field %s: number %d is %s's", f.name, f.num, index[f.num].name))
		case i > 0 && f.num < fields[i-1].num:
			panic(fmt.Sprintf("pod field %s: number %d after %d: the table is in number order, which is the order of the record", f.name, f.num, fields[i-1].num))
		case names[f.name] || f.name == "":
			panic(fmt.Sprintf("pod field %d: name %q reused or empty", f.num, f.name))
		case f.unit == "" || f.put == nil || f.take == nil:
			panic(fmt.Sprintf("pod field %s: a unit, put and take are required", f.name))
		case f.wire != protowire.VarintType && f.wire != protowire.BytesType:
			panic(fmt.Sprintf("pod field %s: wire type %d is not read", f.name, f.wire))
		}
		index[f.num], names[f.name] = f, true
	}
	return index
}

// podFieldNames names every pod field number ever used, for the golden test
// that keeps them from being renumbered or reused.
func podFieldNames() map[protowire.Number]string {
	out := make(map[protowire.Number]string, len(podFields))
	for _, f := range podFields {
		out[f.num] = f.name
	}
	return out
}

func podWireTypes(num protowire.Number) (protowire.Type, bool) {
	if num < 0 || num > maxPodField || podFieldIndex[num] == nil {
		return 0, false
	}
	return podFieldIndex[num].wire, true
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
	for i := range podFields {
		b = podFields[i].put(b, podFields[i].num, &s)
	}
	return sealRecord(b)
}

// decodeState reads a pod record of any format this release knows.
func decodeState(b []byte) (lifecycle.State, error) {
	var s lifecycle.State
	err := decodeStateInto(b, &s)
	return s, err
}

// decodeStateInto is decodeState into *dst, which the load allocates
// already (store.pod): the table's take functions take a pointer, which
// moves the State they write to the heap. dst is zero on an error.
func decodeStateInto(b []byte, dst *lifecycle.State) error {
	*dst = lifecycle.State{}
	format, err := recordFormat(b)
	if err != nil {
		return err
	}
	if format == podRecordV1 {
		s, err := decodeStateV1(b)
		if err != nil {
			// Format 1 has no checksum: a record 0.1.0 wrote always
			// decodes, so one that does not was damaged.
			return fmt.Errorf("format 1: %w (%w)", errChecksum, err)
		}
		*dst = s
		return nil
	}
	body, err := openRecord(b)
	if err != nil {
		return err
	}
	var r podRecord
	err = fields(body, func(num protowire.Number, v uint64, _ []byte) error {
		switch num {
		case podScheduled:
			r.scheduled = protowire.DecodeZigZag(v)
		case podPullFlags:
			r.pulls = lifecycle.PullFlags(v)
		}
		r.seen |= 1 << num
		return nil
	}, podWireTypes)
	if err == nil {
		err = fields(body, func(num protowire.Number, v uint64, raw []byte) error {
			return podFieldIndex[num].take(dst, r, v, raw)
		}, podWireTypes)
	}
	if err != nil {
		*dst = lifecycle.State{}
		return err
	}
	return nil
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
