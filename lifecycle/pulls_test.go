package lifecycle

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// running is a pod created at created whose containers (and init
// containers) are all running, the newest started at started.
func running(t *testing.T, created, started string, containers, initContainers uint16, conds ...Condition) *Pod {
	p := podWith(conds...)
	p.CreationTimestamp = metav1.NewTime(ts(t, created))
	p.ContainersStarted = ts(t, started).Unix()
	p.Containers, p.InitContainers, p.ContainersRunning = containers, initContainers, containers
	p.HasInitContainers = initContainers > 0
	return p
}

func pulled(container string, ms uint32) PullEvent {
	return PullEvent{Container: "spec.containers{" + container + "}", Result: PullDone, Ms: ms}
}

func observed(out Outcome, k Kind) []Observation {
	var got []Observation
	for _, o := range out.Observations {
		if o.Kind == k {
			got = append(got, o)
		}
	}
	return got
}

// TestPullsAndStartup walks a pod's pull events and pod updates in each
// order they can reach podslo (two watches), and checks each SLI is
// observed once, with the pulls taken off the start-up.
func TestPullsAndStartup(t *testing.T) {
	cfg := &Config{}
	const created, started = "2026-01-01T00:00:00Z", "2026-01-01T00:00:09Z"
	sched := cond(t, corev1.PodScheduled, corev1.ConditionTrue, created)
	for _, tc := range []struct {
		name        string
		events      []PullEvent
		eventsFirst bool
		// received is the pod update's receive time, "" for a list.
		received    string
		wantPull    []float64
		wantCached  bool
		wantStartup []float64
		wantPrecise bool
		wantFailed  int
		wantSkips   []Skip
	}{
		{
			name:   "two pulls, then the pod update seen by the watch",
			events: []PullEvent{pulled("a", 1500), pulled("b", 2250)}, eventsFirst: true,
			received: "2026-01-01T00:00:09.400Z",
			wantPull: []float64{3.75}, wantStartup: []float64{9.4 - 3.75}, wantPrecise: true,
		},
		{
			name:   "the pod update first, the pulls later",
			events: []PullEvent{pulled("a", 1500), pulled("b", 2250)}, eventsFirst: false,
			received: "2026-01-01T00:00:09.400Z",
			wantPull: []float64{3.75}, wantStartup: []float64{9.4 - 3.75}, wantPrecise: true,
		},
		{
			name:   "a list shows the pod: seconds, from the newest start",
			events: []PullEvent{pulled("a", 1500), {Container: "spec.containers{b}", Result: PullCached}}, eventsFirst: true,
			wantPull: []float64{1.5}, wantStartup: []float64{9 - 1.5},
		},
		{
			name:     "every image present: a cache hit, nothing taken off",
			events:   []PullEvent{{Container: "spec.containers{a}", Result: PullCached}, {Container: "spec.containers{b}", Result: PullCached}},
			received: "2026-01-01T00:00:09.400Z",
			wantPull: []float64{0}, wantCached: true, wantStartup: []float64{9.4}, wantPrecise: true,
		},
		{
			name:   "a second Pulled of a container (a restart) changes nothing",
			events: []PullEvent{pulled("a", 1500), pulled("a", 9000), pulled("b", 500)}, eventsFirst: true,
			received: "2026-01-01T00:00:09.400Z",
			wantPull: []float64{2}, wantStartup: []float64{7.4}, wantPrecise: true,
		},
		{
			name:   "a failed pull: counted once, the start-up left out",
			events: []PullEvent{{Container: "spec.containers{a}", Result: PullFailed}, {Container: "spec.containers{a}", Result: PullFailed}, pulled("a", 1500), pulled("b", 1)}, eventsFirst: true,
			received: "2026-01-01T00:00:09.400Z",
			wantPull: []float64{1.501}, wantFailed: 1, wantSkips: []Skip{{PodStartup, ImagePullFailed}},
		},
		{
			// A list hands the events over in name order: the failure
			// after the images, before the containers run.
			name:   "a failed pull listed after every image is in: counted, the start-up left out",
			events: []PullEvent{pulled("a", 1500), pulled("b", 1), {Container: "spec.containers{a}", Result: PullFailed}}, eventsFirst: true,
			received: "2026-01-01T00:00:09.400Z",
			wantPull: []float64{1.501}, wantFailed: 1, wantSkips: []Skip{{PodStartup, ImagePullFailed}},
		},
		{
			name:   "a failed pull after the start-up ended: a restarted container's, not counted",
			events: []PullEvent{pulled("a", 1500), pulled("b", 1), {Container: "spec.containers{a}", Result: PullFailed}}, eventsFirst: false,
			received: "2026-01-01T00:00:09.400Z",
			wantPull: []float64{1.501}, wantStartup: []float64{9.4 - 1.501}, wantPrecise: true,
		},
		{
			name:   "one container's image still missing: nothing yet",
			events: []PullEvent{pulled("a", 1500)}, eventsFirst: true,
			received: "2026-01-01T00:00:09.400Z",
		},
		{
			name:     "pulls longer than the start-up (a clock or a message wrong)",
			events:   []PullEvent{pulled("a", 9000), pulled("b", 1000)},
			received: "2026-01-01T00:00:09.400Z",
			wantPull: []float64{10}, wantSkips: []Skip{{PodStartup, NegativeDuration}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := running(t, created, started, 2, 0, sched)
			if tc.received != "" {
				pod = received(t, pod, tc.received)
			}
			now := ts(t, started).Add(time.Second)
			var st State
			var pulls Pulls
			var outs []Outcome
			events := func() {
				for _, e := range tc.events {
					pulls.Add(e)
					var out Outcome
					st, out = Fold(now, Inputs{Pulls: &pulls}, int(pod.Containers), st, cfg)
					outs = append(outs, out)
				}
			}
			if tc.eventsFirst {
				events()
			}
			var out Outcome
			st, out = Step(now, pod, Inputs{}, st, cfg)
			outs = append(outs, out)
			st, out = Fold(now, Inputs{Pulls: &pulls}, int(pod.Containers), st, cfg)
			outs = append(outs, out)
			if !tc.eventsFirst {
				events()
			}
			// The same update again, and the events again (a relist after
			// a restart): nothing new.
			st2, again := Step(now, pod, Inputs{}, st, cfg)
			assert.Equal(t, st, st2)
			assert.True(t, again.Empty())
			st2, again = Fold(now, Inputs{Pulls: &pulls}, int(pod.Containers), st, cfg)
			assert.Equal(t, st, st2)
			assert.True(t, again.Empty())

			var pull, startup []float64
			var failed int
			var skips []Skip
			for _, o := range outs {
				for _, p := range observed(o, ImagesPulled) {
					pull = append(pull, p.Seconds)
					assert.True(t, p.Precise, "pull durations are exact")
					assert.Equal(t, tc.wantCached, p.Cached)
				}
				for _, s := range observed(o, StartedUp) {
					startup = append(startup, s.Seconds)
					assert.Equal(t, tc.wantPrecise, s.Precise)
					assert.False(t, s.Stateful)
				}
				failed += len(observed(o, ImagePullFailedOnce))
				for _, s := range o.Skips {
					if s.SLI == ImagePull || s.SLI == PodStartup {
						skips = append(skips, s)
					}
				}
			}
			require.Len(t, pull, len(tc.wantPull))
			assert.InDeltaSlice(t, tc.wantPull, pull, 1e-9, "pull")
			require.Len(t, startup, len(tc.wantStartup))
			assert.InDeltaSlice(t, tc.wantStartup, startup, 1e-9, "start-up")
			assert.Equal(t, tc.wantFailed, failed)
			assert.Equal(t, tc.wantSkips, skips)
		})
	}
}

func TestStartupTakesOffTheInitPhase(t *testing.T) {
	cfg := &Config{}
	created := "2026-01-01T00:00:00Z"
	pod := running(t, created, "2026-01-01T00:00:20Z", 1, 1,
		cond(t, corev1.PodScheduled, corev1.ConditionTrue, created),
		cond(t, corev1.PodReadyToStartContainers, corev1.ConditionTrue, "2026-01-01T00:00:02Z"),
		cond(t, corev1.PodInitialized, corev1.ConditionTrue, "2026-01-01T00:00:12Z"))
	pod.Volumes = []Volume{{Claim: "data"}}
	pod = received(t, pod, "2026-01-01T00:00:20.300Z")
	var pulls Pulls
	pulls.Add(PullEvent{Container: "spec.initContainers{setup}", Init: true, Result: PullDone, Ms: 4000})
	pulls.Add(pulled("app", 3000))
	now := ts(t, "2026-01-01T00:00:21Z")
	for _, pullsFirst := range []bool{false, true} {
		var st State
		var out, more Outcome
		if pullsFirst {
			// The init containers' pulls wait in the state for the end.
			st, out = Fold(now, Inputs{Pulls: &pulls}, 2, st, cfg)
			st, more = Step(now, pod, Inputs{}, st, cfg)
		} else {
			st, out = Step(now, pod, Inputs{}, st, cfg)
			st, more = Fold(now, Inputs{Pulls: &pulls}, 2, st, cfg)
		}
		out.Observations = append(out.Observations, more.Observations...)
		pull := observed(out, ImagesPulled)
		require.Len(t, pull, 1)
		assert.InDelta(t, 7.0, pull[0].Seconds, 1e-9, "the init container's pull counts in the pod's pulls")
		s := observed(out, StartedUp)
		require.Len(t, s, 1, "pulls first: %v", pullsFirst)
		// 20.3 s to every container running, minus 10 s of init phase
		// (whose 4 s pull it holds), minus the app's 3 s pull.
		assert.InDelta(t, 7.3, s[0].Seconds, 1e-9, "pulls first: %v", pullsFirst)
		assert.False(t, s[0].Precise, "the init phase is known to the second")
		assert.True(t, s[0].Stateful, "a pod with a PVC is stateful")
		assert.EqualValues(t, 7300, st.Startup)
		assert.EqualValues(t, 7000, st.ImagePull)
		// Each quantity in a field of its own, whichever came first.
		assert.EqualValues(t, 4000, st.ImagePullInit, "the init container's pull")
		assert.EqualValues(t, 10300, st.StartupBeforePulls, "20.3 s less the 10 s init phase")
	}
}

func TestStartupOfAPodSeenLateIsSkipped(t *testing.T) {
	cfg := &Config{}
	pod := running(t, "2026-01-01T00:00:00Z", "2026-01-01T00:00:09Z", 1, 0,
		cond(t, corev1.PodScheduled, corev1.ConditionTrue, "2026-01-01T00:00:00Z"))
	var pulls Pulls
	pulls.Add(pulled("a", 100))
	now := ts(t, "2026-01-01T03:00:00Z")
	st, out := Step(now, pod, Inputs{}, State{}, cfg)
	assert.Equal(t, []Skip{{PodStartup, TooOld}}, filterSkips(out.Skips, PodStartup))
	st, out = Fold(now, Inputs{Pulls: &pulls}, 1, st, cfg)
	assert.Empty(t, observed(out, ImagesPulled))
	assert.Equal(t, []Skip{{ImagePull, TooOld}}, filterSkips(out.Skips, ImagePull))
	assert.True(t, st.Pulls.Has(PullsDone))
	assert.EqualValues(t, 100, st.ImagePull, "the per-pod series still shows it")
}

func filterSkips(skips []Skip, s SLI) []Skip {
	var out []Skip
	for _, k := range skips {
		if k.SLI == s {
			out = append(out, k)
		}
	}
	return out
}

// TestPodLevelPullEvent: an event about the pod, not a container (kwok's
// stages cannot name one), stands for a one-container pod's only image,
// and is ignored beside an event about a container or for a pod of more.
func TestPodLevelPullEvent(t *testing.T) {
	pod := PullEvent{Result: PullDone, Ms: 312}
	app := PullEvent{Container: "spec.containers{app}", Result: PullDone, Ms: 900}
	side := PullEvent{Container: "spec.containers{side}", Result: PullCached}
	for _, tc := range []struct {
		name       string
		events     []PullEvent
		containers int
		complete   bool
		sum        int64
	}{
		{"one container, the pod's event", []PullEvent{pod}, 1, true, 312},
		{"one container, both events: the container's counts", []PullEvent{pod, app}, 1, true, 900},
		{"two containers, the pod's event alone", []PullEvent{pod}, 2, false, 0},
		{"two containers, the pod's and one container's", []PullEvent{pod, app}, 2, false, 0},
		{"two containers, each its own", []PullEvent{pod, app, side}, 2, true, 900},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var p Pulls
			for _, e := range tc.events {
				p.Add(e)
			}
			assert.Equal(t, tc.complete, p.complete(tc.containers))
			if tc.complete {
				var sum int64
				for _, e := range p.counted(tc.containers) {
					sum += int64(e.Ms)
				}
				assert.Equal(t, tc.sum, sum)
			}
		})
	}
}

// TestPulledImageSize: the sizes of the pulled images add up, each rounded
// up to a KiB, once every container's image is in; a cached image adds 0,
// and a kubelet that gives no size leaves 0.
func TestPulledImageSize(t *testing.T) {
	sized := func(c string, bytes uint64) PullEvent {
		e := pulled(c, 100)
		e.Bytes = bytes
		return e
	}
	cached := PullEvent{Container: "spec.containers{c}", Result: PullCached}
	for _, tc := range []struct {
		name   string
		events []PullEvent
		want   uint32
	}{
		{"one byte over a KiB is two", []PullEvent{sized("a", 1025), sized("b", 1024), cached}, 3},
		{"one byte is a KiB", []PullEvent{sized("a", 1), sized("b", 0), cached}, 1},
		{"a restart's pull is not counted", []PullEvent{sized("a", 4096), sized("a", 1<<30), sized("b", 2048), cached}, 6},
		{"over 4 GiB", []PullEvent{sized("a", 5<<30), sized("b", 3<<30), cached}, 8 << 20},
		{"no sizes given", []PullEvent{pulled("a", 100), pulled("b", 100), cached}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var st State
			var pulls Pulls
			for i, e := range tc.events {
				pulls.Add(e)
				st, _ = Fold(time.Unix(100, 0), Inputs{Pulls: &pulls}, 3, st, &Config{})
				if done := st.Pulls.Has(PullsDone); done != (i == len(tc.events)-1) {
					t.Fatalf("after %d events: done %v", i+1, done)
				}
			}
			if st.ImagePullKiB != tc.want {
				t.Errorf("ImagePullKiB = %d, want %d", st.ImagePullKiB, tc.want)
			}
		})
	}
}
