package store

import (
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/podslo/podslo/lifecycle"
)

// fullState sets every field of State, every phase and, per SLI, two skips.
func fullState() lifecycle.State {
	s := lifecycle.State{
		Scheduled: 1700000000, FirstSandboxReady: 1700000003, LastSandboxReady: 1700007200, SandboxCreationMs: 3000, HasSandboxCreation: true,
		Recreations: 2, TimedOut: true, UserError: true, Excluded: true,
		DeletionRequested: 1700009000, TerminationMs: 12000, HasTermination: true, TerminationDone: true,
		FirstReady: 1700000010, ReadinessMs: 4000, HasReadiness: true,
		FirstStable: 1700000040, Stabilization: 30, HasStabilization: true, StableSeen: true, Stable: true, StabilityLost: 1700005000, StabilityLosses: 3,
		SeenLate: true,
	}
	for _, p := range []lifecycle.Phase{lifecycle.PhaseScheduling, lifecycle.PhaseSandbox, lifecycle.PhaseInit, lifecycle.PhaseContainers, lifecycle.PhaseReadiness, lifecycle.PhaseTotal} {
		s.Phases = s.Phases.With(p)
	}
	return s
}

func TestStateRoundTrip(t *testing.T) {
	full := fullState()
	full.Skipped = lifecycle.SkipSet{}.With(lifecycle.Skip{SLI: lifecycle.Termination, Reason: lifecycle.Vanished}).With(lifecycle.Skip{SLI: lifecycle.Stabilization, Reason: lifecycle.NoContainerStarted})
	for _, st := range []lifecycle.State{
		{},
		full,
		// Ready without PodScheduled: times before and equal to the base.
		{FirstSandboxReady: 1700000000, LastSandboxReady: 1700000000},
		{Scheduled: 1700000000, FirstSandboxReady: 1700000000, LastSandboxReady: 1699999990},
		{Scheduled: -5, FirstReady: -1, SandboxCreationMs: -2000},
	} {
		b := encodeState(st)
		got, err := decodeState(b)
		require.NoError(t, err)
		assert.Equal(t, st, got)
	}
	// Tags and the checksum cost about 20 bytes over format 1's 30.
	assert.LessOrEqual(t, len(encodeState(full)), 56, "a full record stays small")
}

// TestEveryStateFieldIsPersisted is the rule "a new State field is
// persisted": each field alone, set to a value that is not zero, survives
// the round trip. A field added to lifecycle.State and not to the codec
// fails here.
func TestEveryStateFieldIsPersisted(t *testing.T) {
	typ := reflect.TypeOf(lifecycle.State{})
	for i := range typ.NumField() {
		f := typ.Field(i)
		t.Run(f.Name, func(t *testing.T) {
			var st lifecycle.State
			v := reflect.ValueOf(&st).Elem().Field(i)
			switch v.Kind() {
			case reflect.Bool:
				v.SetBool(true)
			case reflect.Int64:
				v.SetInt(1700000123)
			case reflect.Uint32, reflect.Uint16, reflect.Uint8:
				v.SetUint(3)
			case reflect.Int32:
				// Seconds, or milliseconds (StartupBeforePulls: negative
				// for a start-up's end before a clock-skewed creation).
				v.SetInt(-1234)
			case reflect.Int16:
				// A lifecycle.Precise: 123 ms into its second.
				v.SetInt(1123)
			case reflect.Array:
				// A SkipSet: one skip that exists.
				v.Set(reflect.ValueOf(lifecycle.SkipSet{}.With(lifecycle.Skip{SLI: lifecycle.Readiness, Reason: lifecycle.Vanished})))
			default:
				t.Fatalf("field %s has kind %s: teach the codec and this test about it", f.Name, v.Kind())
			}
			got, err := decodeState(encodeState(st))
			require.NoError(t, err)
			assert.Equal(t, st, got, "field %s is lost in the record", f.Name)
		})
	}
}

func TestDamagedRecordsFailTheirChecksum(t *testing.T) {
	b := encodeState(lifecycle.State{Scheduled: 1700000000, FirstSandboxReady: 1700000003})
	for i := range b {
		_, err := decodeState(b[:i])
		assert.ErrorIs(t, err, errChecksum, "truncated at %d", i)
		flipped := slices.Clone(b)
		flipped[i] ^= 0x10
		_, err = decodeState(flipped)
		if i == 0 {
			assert.ErrorIs(t, err, ErrNewerFormat, "format byte 2^0x10 is format 18")
			continue
		}
		assert.ErrorIs(t, err, errChecksum, "bit flipped at %d", i)
	}
	_, err := decodeState(append(b, 0))
	assert.ErrorIs(t, err, errChecksum, "trailing byte")

	// Format 1 had no checksum: a damaged one that does not decode is
	// corrupt all the same.
	v1 := golden(t, "format1", "pod-full")
	_, err = decodeState(v1[:len(v1)-1])
	assert.ErrorIs(t, err, errChecksum)
}

// reseal replaces a record's checksum after a test edited its body.
func reseal(b []byte) []byte { return sealRecord(slices.Clone(b[:len(b)-4])) }

// TestUnknownFieldsAreSkipped is what lets a release read a record that a
// later one wrote, as long as that one only added fields: a rollback keeps
// counting.
func TestUnknownFieldsAreSkipped(t *testing.T) {
	st := fullState()
	st.Skipped = st.Skipped.With(lifecycle.Skip{SLI: lifecycle.Readiness, Reason: lifecycle.TooOld})
	b := encodeState(st)
	body := slices.Clone(b[:len(b)-4])
	body = protowire.AppendTag(body, 90, protowire.VarintType)
	body = protowire.AppendVarint(body, 12345)
	body = protowire.AppendTag(body, 91, protowire.BytesType)
	body = protowire.AppendBytes(body, []byte("a later release's field"))
	body = protowire.AppendTag(body, 92, protowire.Fixed64Type)
	body = protowire.AppendFixed64(body, 7)
	body = protowire.AppendTag(body, 93, protowire.Fixed32Type)
	body = protowire.AppendFixed32(body, 7)
	// A skip of an SLI and a Reason appended later, and a phase appended
	// later: known only to that release, and left out here.
	packed := protowire.AppendVarint(nil, uint64(lifecycle.Readiness)<<8|uint64(lifecycle.TooOld))
	packed = protowire.AppendVarint(packed, 200<<8|1)
	packed = protowire.AppendVarint(packed, 1<<8|200)
	body = protowire.AppendTag(body, podFieldNum(t, "skipped"), protowire.BytesType)
	body = protowire.AppendBytes(body, packed)
	body = protowire.AppendTag(body, podFieldNum(t, "phases"), protowire.VarintType)
	body = protowire.AppendVarint(body, uint64(st.Phases)|1<<7)
	got, err := decodeState(sealRecord(body))
	require.NoError(t, err)
	assert.Equal(t, st, got)

	// A known field in another wire type is not a later release's field
	// but a broken record: an error, not corruption.
	bad := append(slices.Clone(b[:len(b)-4]), protowire.AppendTag(nil, podScheduled, protowire.BytesType)...)
	bad = protowire.AppendBytes(bad, []byte{1})
	_, err = decodeState(sealRecord(bad))
	assert.ErrorIs(t, err, errDecode)
	assert.NotErrorIs(t, err, errChecksum)
}

func TestNewerFormatIsRefused(t *testing.T) {
	for _, b := range [][]byte{
		reseal(append([]byte{maxFormat + 1}, encodeState(fullState())[1:]...)),
		{255},
	} {
		_, err := decodeState(b)
		assert.ErrorIs(t, err, ErrNewerFormat)
		_, err = decodeAggregate(b, Buckets, testLayouts)
		assert.ErrorIs(t, err, ErrNewerFormat)
	}
	// An aggregate of a kind this release does not know.
	b := append([]byte{aggregateRecordV2}, protowire.AppendTag(nil, aggKind, protowire.VarintType)...)
	b = protowire.AppendVarint(b, 3)
	_, err := decodeAggregate(sealRecord(b), Buckets, testLayouts)
	assert.ErrorIs(t, err, ErrNewerFormat)
}

// testLayouts holds the one layout the golden histograms were written in.
var testLayouts = map[uint32][]float64{layoutID(v1Bounds): v1Bounds}

func golden(t *testing.T, format, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "golden", format, name+".hex"))
	require.NoError(t, err)
	b, err := hex.DecodeString(strings.TrimSpace(string(raw)))
	require.NoError(t, err)
	return b
}

// goldenHistogram is the histogram of the golden aggregate records: these
// ten values observed into Buckets as release 0.1.0 had them.
func goldenHistogram() *Histogram {
	h := newHistogram(v1Bounds)
	for _, v := range []float64{0, 0.3, 0.5, 0.7, 1.5, 2, 7, 45, 400, 5000} {
		h.observe(v1Bounds, v)
	}
	return h
}

// The golden pod states. Each golden record under testdata/golden was
// written by the release its directory names, from these values: format1
// by release 0.1.0 (commit 3b7944d), format2 by this one. They are never
// regenerated: a record a release wrote must read the same for ever.
var goldenStates = map[string]func() lifecycle.State{
	"pod-empty": func() lifecycle.State { return lifecycle.State{} },
	"pod-full": func() lifecycle.State {
		s := fullState()
		for _, sli := range []lifecycle.SLI{lifecycle.SandboxCreation, lifecycle.Termination, lifecycle.Readiness, lifecycle.StartupPhase, lifecycle.Stabilization} {
			for _, r := range []lifecycle.Reason{lifecycle.TooOld, lifecycle.NegativeDuration, lifecycle.NoScheduledCondition, lifecycle.InvalidCondition, lifecycle.Vanished, lifecycle.TerminatedBeforeDelete, lifecycle.NoContainerStarted} {
				s.Skipped = s.Skipped.With(lifecycle.Skip{SLI: sli, Reason: r})
			}
		}
		return s
	},
	"pod-partial": func() lifecycle.State {
		return lifecycle.State{
			Scheduled: 1700000000, FirstSandboxReady: 1700000002, LastSandboxReady: 1700000002, SandboxCreationMs: 2000, HasSandboxCreation: true,
			Phases:  lifecycle.PhaseSet(0).With(lifecycle.PhaseSandbox),
			Skipped: lifecycle.SkipSet{}.With(lifecycle.Skip{SLI: lifecycle.Readiness, Reason: lifecycle.NegativeDuration}).With(lifecycle.Skip{SLI: lifecycle.StartupPhase, Reason: lifecycle.InvalidCondition}),
		}
	},
}

// goldenStatesFormat2 are states whose fields came after release 0.1.0:
// only format2 holds them. pod-precise: the watch receive times of issue
// 27 (lifecycle.Precise), a readiness SLI begun in milliseconds.
// pod-pulls: the image pulls and start-up SLI of issue 28, with a skip of
// each of their SLIs and of the reason they added. pod-pull-size: the
// pulled images' size, which came after. pod-startup-parts: issue 33's
// fields for two of the three quantities field 22 held in turn.
var goldenStatesFormat2 = map[string]func() lifecycle.State{
	"pod-millis": goldenStateMillis,
	"pod-precise": func() lifecycle.State {
		return lifecycle.State{
			Scheduled: 1700000000, ScheduledPrecise: 1123, FirstSandboxReady: 1700000001, LastSandboxReady: 1700000001,
			SandboxCreationMs: 1000, HasSandboxCreation: true, Phases: lifecycle.PhaseSet(0).With(lifecycle.PhaseSandbox),
			ContainerStart: 1700000002, ContainerStartPrecise: 1999,
			DeletionRequested: 1700000002, DeletionPrecise: 800,
		}
	},
	"pod-pulls": func() lifecycle.State {
		return lifecycle.State{
			Scheduled: 1700000000, FirstSandboxReady: 1700000001, LastSandboxReady: 1700000001,
			ImagePull: 2345, Startup: 3422,
			Pulls: lifecycle.PullsDone | lifecycle.PullFailedCounted | lifecycle.StartupEndSeen | lifecycle.StartupEndPrecise |
				lifecycle.StartupStateful | lifecycle.StartupMeasured | lifecycle.StartupDone,
			Skipped: lifecycle.SkipSet{}.With(lifecycle.Skip{SLI: lifecycle.ImagePull, Reason: lifecycle.TooOld}).
				With(lifecycle.Skip{SLI: lifecycle.PodStartup, Reason: lifecycle.ImagePullFailed}),
		}
	},
	"pod-pull-size": func() lifecycle.State {
		return lifecycle.State{
			Scheduled: 1700000000, FirstSandboxReady: 1700000001, LastSandboxReady: 1700000001,
			ImagePull: 312, ImagePullKiB: 5 << 20, Pulls: lifecycle.PullsDone,
		}
	},
	"pod-startup-parts": func() lifecycle.State {
		return lifecycle.State{
			Scheduled: 1700000000, FirstSandboxReady: 1700000001, LastSandboxReady: 1700000001, SandboxCreationMs: 1000, HasSandboxCreation: true,
			ImagePull: 7000, ImagePullInit: 4000, StartupBeforePulls: 10300, Startup: 7300,
			Pulls:   lifecycle.PullsDone | lifecycle.StartupEndSeen | lifecycle.StartupMeasured | lifecycle.StartupDone,
			Skipped: lifecycle.SkipSet{}.With(lifecycle.Skip{SLI: lifecycle.PodStartup, Reason: lifecycle.ImagePullFailed}).With(lifecycle.Skip{SLI: lifecycle.Termination, Reason: lifecycle.Vanished}),
		}
	},
}

// goldenStateMillis is written by releases from issue 35 on: per-pod
// durations with a part of a second, which releases before it read in
// whole seconds (fields 10 to 12; fields 28 to 30 are unknown to them).
func goldenStateMillis() lifecycle.State {
	return lifecycle.State{
		Scheduled: 1700000000, FirstSandboxReady: 1700000001, LastSandboxReady: 1700000001,
		SandboxCreationMs: 550, HasSandboxCreation: true,
		DeletionRequested: 1700000100, TerminationMs: 2350, HasTermination: true, TerminationDone: true,
		FirstReady: 1700000003, ReadinessMs: 1001, HasReadiness: true,
	}
}

var goldenAggregates = map[string]func() *Aggregate{
	"aggregate-counter":   func() *Aggregate { return &Aggregate{Created: 1700000000, Value: 42} },
	"aggregate-histogram": func() *Aggregate { return &Aggregate{Created: 1700000100, Histogram: goldenHistogram()} },
}

// TestGoldenRecords reads the records every release wrote, and fails on a
// change that renumbers a persisted enum (a skip's SLI or Reason, a phase,
// a flag, a field) or stops reading a format.
func TestGoldenRecords(t *testing.T) {
	for _, format := range []string{"format1", "format2"} {
		for name, want := range goldenStates {
			t.Run(format+"/"+name, func(t *testing.T) {
				got, err := decodeState(golden(t, format, name))
				require.NoError(t, err)
				assert.Equal(t, want(), got)
			})
		}
		for name, want := range goldenAggregates {
			t.Run(format+"/"+name, func(t *testing.T) {
				got, err := decodeAggregate(golden(t, format, name), v1Bounds, testLayouts)
				require.NoError(t, err)
				assert.Equal(t, want(), got)
			})
		}
	}
	for name, want := range goldenStatesFormat2 {
		got, err := decodeState(golden(t, "format2", name))
		require.NoError(t, err)
		assert.Equal(t, want(), got, name)
		assert.Equal(t, hex.EncodeToString(golden(t, "format2", name)), hex.EncodeToString(encodeState(want())), name)
	}
	// This release writes format 2 byte for byte as the golden records
	// hold it, so that what it writes today reads the same in every
	// release after it.
	for name, want := range goldenStates {
		assert.Equal(t, hex.EncodeToString(golden(t, "format2", name)), hex.EncodeToString(encodeState(want())), name)
	}
	for name, want := range goldenAggregates {
		assert.Equal(t, hex.EncodeToString(golden(t, "format2", name)), hex.EncodeToString(encodeAggregate(want(), layoutID(v1Bounds))), name)
	}
}

// TestFieldNumbersOnlyGrow holds the field numbers to
// testdata/golden/fields.txt: a line may be appended there for a new field,
// but none changed or removed, since a number once written means that field
// in every release's records.
func TestFieldNumbersOnlyGrow(t *testing.T) {
	var lines []string
	for _, tab := range []struct {
		record string
		names  map[protowire.Number]string
	}{{"pod", podFieldNames()}, {"aggregate", aggregateFieldNames}, {"layout", layoutFieldNames}} {
		nums := make([]int, 0, len(tab.names))
		for n := range tab.names {
			nums = append(nums, int(n))
		}
		sort.Ints(nums)
		for _, n := range nums {
			lines = append(lines, fmt.Sprintf("%s %d %s", tab.record, n, tab.names[protowire.Number(n)]))
		}
	}
	raw, err := os.ReadFile(filepath.Join("testdata", "golden", "fields.txt"))
	require.NoError(t, err)
	var recorded []string
	for _, l := range strings.Split(string(raw), "\n") {
		if l != "" && !strings.HasPrefix(l, "#") {
			recorded = append(recorded, l)
		}
	}
	for _, l := range recorded {
		assert.Contains(t, lines, l, "field %q was renumbered, renamed or removed: a field number is never reused", l)
	}
	for _, l := range lines {
		assert.Contains(t, recorded, l, "new field %q: append it to testdata/golden/fields.txt", l)
	}
	for _, tab := range []map[protowire.Number]string{podFieldNames(), aggregateFieldNames, layoutFieldNames} {
		for n := range tab {
			assert.True(t, n.IsValid(), "field number %d", n)
		}
	}
}

func TestRebucket(t *testing.T) {
	h := goldenHistogram()
	cumulative := func(counts []uint64, bounds []float64) map[float64]uint64 {
		out := map[float64]uint64{}
		var sum uint64
		for i, c := range counts {
			sum += c
			if i < len(bounds) {
				out[bounds[i]] = sum
			}
		}
		return out
	}
	finer := append([]float64{0.05, 0.1, 0.25}, v1Bounds...)
	got := rebucket(h.Classic, v1Bounds, finer)
	require.Len(t, got, len(finer)+1)
	before, after := cumulative(h.Classic, v1Bounds), cumulative(got, finer)
	for _, b := range v1Bounds {
		assert.Equal(t, before[b], after[b], "le=%g keeps its count", b)
	}
	assert.Equal(t, []uint64{0, 0, 0}, got[:3], "a new bound starts with what is certainly below it")
	assert.Equal(t, h.Classic[len(h.Classic)-1], got[len(got)-1], "+Inf")

	// Fewer bounds: an old bucket goes to the one above its bound.
	coarse := []float64{1, 10, 100}
	got = rebucket(h.Classic, v1Bounds, coarse)
	before = cumulative(h.Classic, v1Bounds)
	assert.Equal(t, map[float64]uint64{1: before[1], 10: before[10], 100: before[60]}, cumulative(got, coarse))
	var total uint64
	for _, c := range got {
		total += c
	}
	assert.Equal(t, h.Count, total, "nothing lost or counted twice")

	assert.Equal(t, h.Classic, rebucket(h.Classic, v1Bounds, v1Bounds))
}

func TestLayoutRecord(t *testing.T) {
	id, bounds, err := decodeLayout(layoutKey(layoutID(v1Bounds)), encodeLayout(v1Bounds))
	require.NoError(t, err)
	assert.Equal(t, layoutID(v1Bounds), id)
	assert.Equal(t, v1Bounds, bounds)
	assert.Equal(t, hex.EncodeToString(golden(t, "format2", "layout")), hex.EncodeToString(encodeLayout(v1Bounds)))

	// A layout stored under another layout's ID is no layout at all.
	_, _, err = decodeLayout(layoutKey(layoutID(v1Bounds)+1), encodeLayout(v1Bounds))
	assert.ErrorIs(t, err, errDecode)
	// A histogram naming a layout the state lacks cannot be read.
	_, err = decodeAggregate(golden(t, "format2", "aggregate-histogram"), v1Bounds, map[uint32][]float64{})
	assert.ErrorIs(t, err, errDecode)
	assert.NotErrorIs(t, err, errChecksum)
}

// TestPreciseCountIsPersisted: a histogram's count of observations made in
// milliseconds survives its record, and a record claiming more of them
// than observations is malformed, not a state to expose.
func TestPreciseCountIsPersisted(t *testing.T) {
	a := &Aggregate{Created: 1700000000, Histogram: goldenHistogram()}
	a.Histogram.Precise = 7
	got, err := decodeAggregate(encodeAggregate(a, layoutID(v1Bounds)), v1Bounds, testLayouts)
	require.NoError(t, err)
	assert.Equal(t, a.Histogram, got.Histogram)

	a.Histogram.Precise = a.Histogram.Count + 1
	_, err = decodeAggregate(encodeAggregate(a, layoutID(v1Bounds)), v1Bounds, testLayouts)
	assert.ErrorIs(t, err, errDecode)
}

// TestOutOfRangeFieldsAreRefused: a sealed record whose 32-bit field holds
// more than 32 bits was not written by any release: an error naming the
// field, not a value cut short.
func TestOutOfRangeFieldsAreRefused(t *testing.T) {
	for _, tc := range []struct {
		num  protowire.Number
		v    uint64
		name string
	}{
		{podFieldNum(t, "image_pull"), 1 << 32, "image_pull"},
		{podFieldNum(t, "image_pull_kib"), 1 << 32, "image_pull_kib"},
		{podFieldNum(t, "startup"), protowire.EncodeZigZag(1 << 31), "startup"},
		{podFieldNum(t, "image_pull_init"), 1 << 32, "image_pull_init"},
		{podFieldNum(t, "startup_before_pulls"), protowire.EncodeZigZag(-1<<31 - 1), "startup_before_pulls"},
		{podFieldNum(t, "recreations"), 1 << 32, "recreations"},
		{podFieldNum(t, "scheduled_precise"), 1 << 15, "scheduled_precise"},
	} {
		b := encodeState(fullState())
		body := protowire.AppendTag(slices.Clone(b[:len(b)-4]), tc.num, protowire.VarintType)
		body = protowire.AppendVarint(body, tc.v)
		_, err := decodeState(sealRecord(body))
		assert.ErrorIs(t, err, errDecode, tc.name)
		assert.ErrorContains(t, err, tc.name)
	}
}

// podFieldNum is the number of the pod field named name in podFields.
func podFieldNum(t *testing.T, name string) protowire.Number {
	t.Helper()
	for _, f := range podFields {
		if f.name == name {
			return f.num
		}
	}
	t.Fatalf("no pod field %q", name)
	return 0
}

// withoutFields is a record with the given fields taken out, as a release
// that did not know them wrote it, or rewrote it.
func withoutFields(t *testing.T, b []byte, drop ...protowire.Number) []byte {
	t.Helper()
	body := b[1 : len(b)-4]
	out := []byte{b[0]}
	for len(body) > 0 {
		num, typ, n := protowire.ConsumeTag(body)
		require.Positive(t, n)
		m := protowire.ConsumeFieldValue(num, typ, body[n:])
		require.Positive(t, m)
		if !slices.Contains(drop, num) {
			out = append(out, body[:n+m]...)
		}
		body = body[n+m:]
	}
	return sealRecord(out)
}

// startupSlotOf reads field 22 of a record as a release before issue 33
// did: one number, whose meaning the pull flags give.
func startupSlotOf(t *testing.T, b []byte) int64 {
	t.Helper()
	body, err := openRecord(b)
	require.NoError(t, err)
	var ms int64
	require.NoError(t, fields(body, func(num protowire.Number, v uint64, _ []byte) error {
		if num == podFieldNum(t, "startup") {
			ms = protowire.DecodeZigZag(v)
		}
		return nil
	}, podWireTypes))
	return ms
}

// TestStartupSlotStaysReadable: the three quantities that field 22 held in
// turn before issue 33 are three State fields now, and two fields of the
// record of their own. A record of an earlier release, at each stage,
// reads into the right one; and what this release writes holds in field 22
// what an earlier release reads there at that stage, so that a rollback
// finishes the start-ups in flight (exporter's
// TestStartupInFlightAcrossRollback runs both binaries).
func TestStartupSlotStaysReadable(t *testing.T) {
	base := lifecycle.State{Scheduled: 1700000000, FirstSandboxReady: 1700000001, LastSandboxReady: 1700000001}
	for _, tc := range []struct {
		name   string
		state  lifecycle.State
		slot   int64 // field 22, as the earlier release wrote it
		legacy lifecycle.State
	}{{
		name:   "pulls done, the end not yet seen: the init containers' pulls",
		state:  lifecycle.State{ImagePull: 7000, ImagePullInit: 4000, Pulls: lifecycle.PullsDone},
		slot:   4000,
		legacy: lifecycle.State{ImagePull: 7000, ImagePullInit: 4000, Pulls: lifecycle.PullsDone},
	}, {
		name:   "the end seen, the pulls not yet done: the SLI before the pulls",
		state:  lifecycle.State{StartupBeforePulls: -250, Pulls: lifecycle.StartupEndSeen | lifecycle.StartupEndPrecise},
		slot:   -250,
		legacy: lifecycle.State{StartupBeforePulls: -250, Pulls: lifecycle.StartupEndSeen | lifecycle.StartupEndPrecise},
	}, {
		name: "measured: the SLI",
		state: lifecycle.State{ImagePull: 7000, ImagePullInit: 4000, StartupBeforePulls: 10300, Startup: 7300,
			Pulls: lifecycle.PullsDone | lifecycle.StartupEndSeen | lifecycle.StartupMeasured | lifecycle.StartupDone},
		slot: 7300,
		// An earlier release kept only the SLI: the parts read as 0.
		legacy: lifecycle.State{ImagePull: 7000, Startup: 7300,
			Pulls: lifecycle.PullsDone | lifecycle.StartupEndSeen | lifecycle.StartupMeasured | lifecycle.StartupDone},
	}, {
		name:   "skipped: 0",
		state:  lifecycle.State{StartupBeforePulls: 900, Pulls: lifecycle.PullFailedCounted | lifecycle.StartupEndSeen | lifecycle.StartupDone},
		slot:   0,
		legacy: lifecycle.State{Pulls: lifecycle.PullFailedCounted | lifecycle.StartupEndSeen | lifecycle.StartupDone},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			merge := func(s lifecycle.State) lifecycle.State {
				s.Scheduled, s.FirstSandboxReady, s.LastSandboxReady = base.Scheduled, base.FirstSandboxReady, base.LastSandboxReady
				return s
			}
			st, legacy := merge(tc.state), merge(tc.legacy)
			b := encodeState(st)
			got, err := decodeState(b)
			require.NoError(t, err)
			assert.Equal(t, st, got, "round trip")
			assert.Equal(t, tc.slot, startupSlotOf(t, b), "field 22 holds what an earlier release reads there")

			// The record as an earlier release writes it: field 22 alone.
			old := withoutFields(t, b, podFieldNum(t, "startup_before_pulls"), podFieldNum(t, "image_pull_init"))
			if !st.Pulls.Has(lifecycle.StartupDone) {
				assert.Equal(t, hex.EncodeToString(old), hex.EncodeToString(b),
					"until the start-up is done, field 22 holds what 25 or 26 would, and the record is the earlier release's")
			}
			got, err = decodeState(old)
			require.NoError(t, err)
			assert.Equal(t, legacy, got, "a record of an earlier release")
		})
	}
}
