package lifecycle

import (
	"math"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// received is pod as the watch delivered it at the RFC 3339 time at (with
// fractional seconds), while current.
func received(t *testing.T, pod *Pod, at string) *Pod {
	t.Helper()
	p := pod.DeepCopyObject().(*Pod)
	r, err := time.Parse(time.RFC3339Nano, at)
	require.NoError(t, err)
	p.Received = r.UnixMilli()
	return p
}

// measured is the observations of one kind, with their precision.
type measured struct {
	Seconds float64
	Precise bool
}

func measuredOf(out Outcome, k Kind, p Phase) []measured {
	var m []measured
	for _, o := range out.Observations {
		if o.Kind == k && (k != PhaseDone || o.Phase == p) {
			m = append(m, measured{o.Seconds, o.Precise})
		}
	}
	return m
}

func TestSandboxCreationInMilliseconds(t *testing.T) {
	cfg := &Config{}
	scheduled := podWith(cond(t, corev1.PodScheduled, corev1.ConditionTrue, "2026-01-01T10:00:00Z"))
	ready := podWith(cond(t, corev1.PodScheduled, corev1.ConditionTrue, "2026-01-01T10:00:00Z"),
		cond(t, corev1.PodReadyToStartContainers, corev1.ConditionTrue, "2026-01-01T10:00:01Z"))
	now := ts(t, "2026-01-01T10:00:02Z")

	for _, tc := range []struct {
		name                 string
		scheduledAt, readyAt string // receive times; "" for a list
		want                 measured
		wantScheduledPrecise Precise
	}{
		{"both ends from the watch", "2026-01-01T10:00:00.120Z", "2026-01-01T10:00:01.350Z", measured{1.23, true}, 1120},
		{"ends 0.1 s apart across a second", "2026-01-01T10:00:00.950Z", "2026-01-01T10:00:01.050Z", measured{0.1, true}, 1950},
		{"the start from a list", "", "2026-01-01T10:00:01.350Z", measured{1, false}, 0},
		{"the end from a list", "2026-01-01T10:00:00.120Z", "", measured{1, false}, 1120},
		// The kubelet's clock 200 ms ahead of podslo's: within the
		// default tolerance of 250 ms.
		{"received before its second, within tolerance", "2026-01-01T10:00:00.120Z", "2026-01-01T10:00:00.800Z", measured{0.68, true}, 1120},
		{"received before its second, beyond tolerance", "2026-01-01T10:00:00.120Z", "2026-01-01T10:00:00.700Z", measured{1, false}, 1120},
		// A late watch: the update arrived 1.2 s after the start of its
		// second, within the second plus the tolerance.
		{"received after its second, within tolerance", "2026-01-01T09:59:59.900Z", "2026-01-01T10:00:02.200Z", measured{2.3, true}, 900},
		{"received after its second, beyond tolerance", "2026-01-01T10:00:00.100Z", "2026-01-01T10:00:02.300Z", measured{1, false}, 1100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, r := scheduled, ready
			if tc.scheduledAt != "" {
				s = received(t, s, tc.scheduledAt)
			}
			if tc.readyAt != "" {
				r = received(t, r, tc.readyAt)
			}
			st, _ := Step(now, s, Inputs{}, State{}, cfg)
			assert.Equal(t, tc.wantScheduledPrecise, st.ScheduledPrecise)
			st, out := Step(now, r, Inputs{}, st, cfg)
			assert.Equal(t, []measured{tc.want}, measuredOf(out, SandboxCreated, 0))
			assert.Equal(t, []measured{tc.want}, measuredOf(out, PhaseDone, PhaseSandbox), "the sandbox phase has the same ends")
			assert.Equal(t, int32(math.Round(tc.want.Seconds*1000)), st.SandboxCreationMs, "the per-pod series keeps what the observation had")
		})
	}
}

// An exporter restart between the two ends keeps the start's precision:
// it is in the state, which the store persists; the list after the
// restart shows the pod without a receive time.
func TestPrecisionSurvivesARestart(t *testing.T) {
	cfg := &Config{}
	now := ts(t, "2026-01-01T10:00:05Z")
	scheduled := podWith(cond(t, corev1.PodScheduled, corev1.ConditionTrue, "2026-01-01T10:00:00Z"))
	st, _ := Step(now, received(t, scheduled, "2026-01-01T10:00:00.400Z"), Inputs{}, State{}, cfg)
	st, out := Step(now, scheduled, Inputs{}, st, cfg) // the relist after the restart
	assert.True(t, out.Empty())
	assert.Equal(t, Precise(1400), st.ScheduledPrecise, "a later update does not move or drop the start")
	ready := podWith(cond(t, corev1.PodScheduled, corev1.ConditionTrue, "2026-01-01T10:00:00Z"),
		cond(t, corev1.PodReadyToStartContainers, corev1.ConditionTrue, "2026-01-01T10:00:03Z"))
	_, out = Step(now, received(t, ready, "2026-01-01T10:00:03.150Z"), Inputs{}, st, cfg)
	assert.Equal(t, []measured{{2.75, true}}, measuredOf(out, SandboxCreated, 0))
}

func TestReadinessInMilliseconds(t *testing.T) {
	cfg := &Config{}
	now := ts(t, "2026-01-01T10:00:10Z")
	base := func(conds ...Condition) *Pod {
		p := podWith(append([]Condition{
			cond(t, corev1.PodScheduled, corev1.ConditionTrue, "2026-01-01T10:00:00Z"),
			cond(t, corev1.PodReadyToStartContainers, corev1.ConditionTrue, "2026-01-01T10:00:01Z"),
		}, conds...)...)
		p.ContainersStarted = ts(t, "2026-01-01T10:00:01Z").Unix()
		return p
	}
	ready := cond(t, corev1.PodReady, corev1.ConditionTrue, "2026-01-01T10:00:03Z")

	t.Run("a readiness probe: start and Ready in two updates", func(t *testing.T) {
		st, _ := Step(now, received(t, base(), "2026-01-01T10:00:01.600Z"), Inputs{}, State{}, cfg)
		assert.Equal(t, Precise(1600), st.ContainerStartPrecise)
		st, out := Step(now, received(t, base(ready), "2026-01-01T10:00:03.100Z"), Inputs{}, st, cfg)
		assert.Equal(t, []measured{{1.5, true}}, measuredOf(out, BecameReady, 0))
		assert.Equal(t, []measured{{1.5, true}}, measuredOf(out, PhaseDone, PhaseReadiness))
		assert.Equal(t, int32(1500), st.ReadinessMs)
	})
	t.Run("no probe: the kubelet writes both in one update", func(t *testing.T) {
		p := base(cond(t, corev1.PodReady, corev1.ConditionTrue, "2026-01-01T10:00:01Z"))
		_, out := Step(now, received(t, p, "2026-01-01T10:00:01.600Z"), Inputs{}, State{}, cfg)
		assert.Equal(t, []measured{{0, true}}, measuredOf(out, BecameReady, 0))
	})
	t.Run("a newer container start moves the start", func(t *testing.T) {
		st, _ := Step(now, received(t, base(), "2026-01-01T10:00:01.600Z"), Inputs{}, State{}, cfg)
		newer := base()
		newer.ContainersStarted = ts(t, "2026-01-01T10:00:02Z").Unix()
		st, _ = Step(now, received(t, newer, "2026-01-01T10:00:02.300Z"), Inputs{}, st, cfg)
		newer.Conditions = append(newer.Conditions, ready)
		_, out := Step(now, received(t, newer, "2026-01-01T10:00:03.100Z"), Inputs{}, st, cfg)
		assert.Equal(t, []measured{{0.8, true}}, measuredOf(out, BecameReady, 0))
	})
	t.Run("a newer start seen only in a list is measured in seconds", func(t *testing.T) {
		st, _ := Step(now, received(t, base(), "2026-01-01T10:00:01.600Z"), Inputs{}, State{}, cfg)
		newer := base()
		newer.ContainersStarted = ts(t, "2026-01-01T10:00:02Z").Unix()
		st, _ = Step(now, newer, Inputs{}, st, cfg)
		newer.Conditions = append(newer.Conditions, ready)
		_, out := Step(now, received(t, newer, "2026-01-01T10:00:03.100Z"), Inputs{}, st, cfg)
		assert.Equal(t, []measured{{1, false}}, measuredOf(out, BecameReady, 0))
	})
}

func TestTerminationInMilliseconds(t *testing.T) {
	cfg := &Config{}
	now := ts(t, "2026-01-01T10:01:00Z")
	running := podWith(cond(t, corev1.PodScheduled, corev1.ConditionTrue, "2026-01-01T10:00:00Z"),
		cond(t, corev1.PodReadyToStartContainers, corev1.ConditionTrue, "2026-01-01T10:00:01Z"))
	st, _ := Step(now, running, Inputs{}, State{}, cfg)
	// deletionTimestamp is the request time plus the grace period: the
	// request's second is 10:00:30.
	deleted := deleting(t, running, "2026-01-01T10:00:30Z", 30)
	st, out := Step(now, received(t, deleted, "2026-01-01T10:00:30.700Z"), Inputs{}, st, cfg)
	assert.True(t, out.Empty())
	assert.Equal(t, Precise(1700), st.DeletionPrecise)
	down := deleted.DeepCopyObject().(*Pod)
	down.Conditions[1] = cond(t, corev1.PodReadyToStartContainers, corev1.ConditionFalse, "2026-01-01T10:00:31Z")
	st, out = Step(now, received(t, down, "2026-01-01T10:00:31.050Z"), Inputs{}, st, cfg)
	assert.Equal(t, []measured{{0.35, true}}, measuredOf(out, Terminated, 0))
	assert.Equal(t, int32(350), st.TerminationMs)
}

// A pod whose every transition is in its first object (a list, a watch
// that just resumed) has no receive time: everything is in seconds.
func TestFirstSightFromAListIsInSeconds(t *testing.T) {
	p := podWith(cond(t, corev1.PodScheduled, corev1.ConditionTrue, "2026-01-01T10:00:00Z"),
		cond(t, corev1.PodReadyToStartContainers, corev1.ConditionTrue, "2026-01-01T10:00:01Z"))
	p.CreationTimestamp = metav1.NewTime(ts(t, "2026-01-01T09:59:59Z"))
	_, out := Step(ts(t, "2026-01-01T10:00:02Z"), p, Inputs{}, State{}, &Config{})
	require.NotEmpty(t, out.Observations)
	for _, o := range out.Observations {
		assert.False(t, o.Precise, "%+v", o)
	}
}

func TestWatchTolerance(t *testing.T) {
	assert.Equal(t, DefaultWatchTolerance, (&Config{}).watchTolerance())
	assert.Equal(t, 999*time.Millisecond, (&Config{WatchTolerance: 5 * time.Second}).watchTolerance(), "an offset must fit a Precise")
	cfg := &Config{WatchTolerance: 50 * time.Millisecond}
	c := stepper{cfg: cfg, pod: &Pod{Received: 1700000000*1000 - 50}}
	assert.Equal(t, Precise(950), c.precise(1700000000))
	c.pod.Received--
	assert.Zero(t, c.precise(1700000000))
	c.pod.Received = 1700000001*1000 + 49
	assert.Equal(t, Precise(2049), c.precise(1700000000))
	c.pod.Received++
	assert.Zero(t, c.precise(1700000000))
	ms, ok := Precise(2049).At(1700000000)
	assert.True(t, ok)
	assert.Equal(t, int64(1700000001049), ms)
	_, ok = Precise(0).At(1700000000)
	assert.False(t, ok)
}

// TestStateSize holds the memory a pod's state costs: the store keeps one
// State per pod in memory, with a pointer beside it (store.pod). Until
// issue 33 a State was 144 bytes (152 with the pointer: Go's 160-byte size
// class) without a byte of padding left. Issue 33 gave the skips room for
// 16 SLIs of 16 reasons (a SkipSet of 32 bytes, 24 more) and split the
// start-up's three quantities into three fields (8 more), and made the
// four latencies int32 seconds (16 less): 161 bytes of fields in 168, so
// 176 with the pointer, the next size class, 16 bytes more per pod
// (docs/benchmarks.md). 7 bytes of padding are left, at the end of the
// pulls group; a field that pushes a State past 168 bytes moves every pod
// into the 192-byte class.
func TestStateSize(t *testing.T) {
	assert.LessOrEqual(t, unsafe.Sizeof(State{}), uintptr(168))
	assert.LessOrEqual(t, unsafe.Sizeof(State{})+unsafe.Sizeof(uintptr(0)), uintptr(176), "a State and the store's pointer fit Go's 176-byte size class")
}
