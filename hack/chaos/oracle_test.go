package main

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// t0 is the Unix second the synthetic histories start at; at(s) is the
// wall time s seconds later, when the recorder saw a revision.
const t0 = 1_000_000

func at(s float64) time.Time { return time.Unix(t0, 0).Add(time.Duration(s * float64(time.Second))) }

// pod builds a history from revisions given as (seconds after t0, change).
type step struct {
	at     float64
	change func(r *revision)
}

func build(rc string, claims []string, steps ...step) *history {
	h := &history{UID: types.UID("uid-" + rc), Namespace: "chaos-00", Name: "pod-00000", Created: t0, RuntimeClass: rc, Claims: claims}
	var cur revision
	for _, s := range steps {
		s.change(&cur)
		cur.At = at(s.at)
		h.Revs = append(h.Revs, cur)
	}
	return h
}

func sched(t int64) func(*revision) {
	return func(r *revision) { r.Scheduled = cond{"True", t0 + t} }
}
func sandbox(status string, t int64) func(*revision) {
	return func(r *revision) { r.Sandbox = cond{status, t0 + t} }
}
func running(t int64) func(*revision) { return func(r *revision) { r.Started = t0 + t } }
func ready(status string, t int64) func(*revision) {
	return func(r *revision) { r.Ready = cond{status, t0 + t} }
}
func deletion(requested, grace int64) func(*revision) {
	return func(r *revision) { r.Deletion, r.Grace = t0+requested+grace, grace }
}

// lifecycle is a pod through deploy/kwok's stages: scheduled at 0, sandbox
// at 1, containers at 2, Ready at 4, deleted at 100 with grace, sandbox
// down at 100+down, removed one second later.
func lifecycle(rc string, grace, down int64) *history {
	h := build(rc, nil,
		step{0, sched(0)},
		step{0.1, sandbox("False", 0)},
		step{1.1, sandbox("True", 1)},
		step{2.1, running(2)},
		step{4.1, ready("True", 4)},
		step{100, deletion(100, grace)},
		step{100.1 + float64(down), func(r *revision) { sandbox("False", 100+down)(r); ready("False", 100+down)(r) }},
	)
	h.Removed = at(101.2 + float64(down))
	return h
}

func watchingAll() *timeline {
	return &timeline{Watching: []span{{From: at(-10)}}, Checking: []span{{From: at(-10)}}, MayCheck: []span{{From: at(-10)}}}
}

func config() *oracleConfig {
	return &oracleConfig{Timeout: 60 * time.Second, UserError: map[types.UID]bool{}, Buckets: []float64{0.5, 1, 2, 5, 10}, End: at(1000)}
}

func TestOracleSeenEverything(t *testing.T) {
	oc := config()
	v := oc.judge(lifecycle("kata", 1, 3), watchingAll())
	if len(v.Outcomes) != 1 || len(v.Uncertain) != 0 || len(v.Loose) != 0 {
		t.Fatalf("want one certain outcome, got %d (uncertain %v, loose %v)", len(v.Outcomes), v.Uncertain, v.Loose)
	}
	out := v.Outcomes[0]
	kata := classLabels{"kata", "none"}
	for k, want := range map[string][]float64{
		classSeries(mCreation, kata):                     {1},
		classSeries(mReadiness, kata):                    {2},
		classSeries(mTermination, kata):                  {3},
		classSeries(mPhase, kata, "phase", "scheduling"): {0},
		classSeries(mPhase, kata, "phase", "sandbox"):    {1},
		classSeries(mPhase, kata, "phase", "containers"): {1},
		classSeries(mPhase, kata, "phase", "readiness"):  {2},
		classSeries(mPhase, kata, "phase", "total"):      {4},
	} {
		if got := out.Observe[k]; len(got) != len(want) || got[0] != want[0] {
			t.Errorf("%s: got %v, want %v", k, got, want)
		}
	}
	if len(out.Observe) != 8 {
		t.Errorf("observations: got %v", out.Observe)
	}
	// Grace 1, sandbox down 3 s after the request: over grace.
	if got := out.Count[classSeries(mOverGrace, kata)]; got != 1 {
		t.Errorf("over grace: got %v, want 1", got)
	}
	// No Pulled event came for the pod, which ran and was deleted: its
	// pulls and start-up are given up (pulls_unknown).
	for _, sli := range []string{"image_pull", "pod_startup"} {
		if got := out.Count[seriesKey(mSkipped, map[string]string{"reason": "pulls_unknown", "sli": sli})]; got != 1 {
			t.Errorf("%s pulls_unknown: got %v, want 1", sli, got)
		}
	}
	if len(out.Count) != 3 {
		t.Errorf("counters: got %v, want only over grace and the pulls given up", out.Count)
	}
}

// TestOracleKilledAtGraceEnd is deploy/kwok's podslo-pod-kill: the sandbox
// goes away in deletionTimestamp's own second, with a container killed
// then (exit 137). docs/metrics.md counts it over grace; one that exited
// by itself in that second is not.
func TestOracleKilledAtGraceEnd(t *testing.T) {
	kata := classLabels{"kata", "none"}
	for _, tc := range []struct {
		name   string
		killed int64 // finishedAt of a container killed with 137, 0: none
		want   float64
	}{
		{"killed at the end of the grace", t0 + 102, 1},
		{"exited within the grace", 0, 0},
		{"killed before the end of the grace", t0 + 101, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := lifecycle("kata", 2, 2) // deletionTimestamp and sandbox down at 102
			h.Revs[len(h.Revs)-1].Killed = tc.killed
			v := config().judge(h, watchingAll())
			if len(v.Outcomes) != 1 {
				t.Fatalf("got %d outcomes", len(v.Outcomes))
			}
			if got := v.Outcomes[0].Count[classSeries(mOverGrace, kata)]; got != tc.want {
				t.Errorf("over grace: got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOracleTermination(t *testing.T) {
	h := lifecycle("runc", 30, 1) // sandbox down at 101, removed at 102.2
	vanished := seriesKey(mSkipped, map[string]string{"sli": "termination", "reason": "vanished"})
	term := classSeries(mTermination, classLabels{"runc", "none"})
	for _, tc := range []struct {
		name      string
		tl        *timeline
		outcomes  int
		observed  bool // the certain outcome observes the termination
		uncertain bool
	}{
		{"watching", watchingAll(), 1, true, false},
		{"killed before, restarted after removal", &timeline{
			Watching: []span{{From: at(-10), To: at(99)}, {From: at(110)}},
			Blind:    []span{{From: at(100), To: at(108)}},
		}, 1, false, false},
		{"restarted between down and removal", &timeline{
			Watching:  []span{{From: at(-10), To: at(99)}, {From: at(104)}},
			Blind:     []span{{From: at(100), To: at(101.5)}},
			Snapshots: []span{{From: at(101.5), To: at(104)}},
		}, 2, false, true},
		{"listed while down", &timeline{
			Watching:  []span{{From: at(-10), To: at(99)}, {From: at(105)}},
			Blind:     []span{{From: at(100), To: at(101.3)}},
			Snapshots: []span{{From: at(101.3), To: at(102)}},
		}, 1, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := config().judge(h, tc.tl)
			if len(v.Outcomes) != tc.outcomes || (len(v.Uncertain) > 0) != tc.uncertain {
				t.Fatalf("got %d outcomes, uncertain %v", len(v.Outcomes), v.Uncertain)
			}
			if tc.outcomes == 1 {
				out := v.Outcomes[0]
				if got := len(out.Observe[term]) == 1; got != tc.observed {
					t.Errorf("termination observed: got %v, want %v", got, tc.observed)
				}
				if got := out.Count[vanished] == 1; got == tc.observed {
					t.Errorf("vanished: got %v, want %v", got, !tc.observed)
				}
			}
		})
	}
}

func TestOracleRecreation(t *testing.T) {
	h := build("", []string{"std-00", "fast-00"},
		step{0, sched(0)},
		step{0.1, sandbox("False", 0)},
		step{1.1, sandbox("True", 1)},
		step{2.1, running(2)},
		step{4.1, ready("True", 4)},
		step{34.1, func(r *revision) { sandbox("False", 34)(r); ready("False", 34)(r); r.Restarts = 0 }},
		step{36.1, func(r *revision) { sandbox("True", 36)(r); r.Restarts = 1 }},
		step{37.1, running(37)},
		step{39.1, ready("True", 39)},
	)
	oc := config()
	oc.ClaimClass = map[string]string{"chaos-00/std-00": "standard", "chaos-00/fast-00": "fast"}
	h = withPull(oc, h)
	v := oc.judge(h, watchingAll())
	l := classLabels{"none", "fast,standard"}
	out := v.Outcomes[0]
	if got := out.Count[classSeries(mRecreations, l)]; got != 1 {
		t.Errorf("recreations: got %v, want 1 (counters %v)", got, out.Count)
	}
	if got := out.Observe[classSeries(mReadiness, l)]; len(got) != 1 || got[0] != 2 {
		t.Errorf("readiness: got %v, want [2] (the first Ready only)", got)
	}
	if !v.Final.Alive || v.Final.Recreations == nil || *v.Final.Recreations != 1 || *v.Final.Creation != 1 {
		t.Errorf("final: %+v", v.Final)
	}
	// The exporter down from before the first sandbox until after the
	// crash: it never saw the first sandbox, and takes the re-created one
	// for the first.
	blind := &timeline{Watching: []span{{From: at(-10), To: at(0.5)}, {From: at(40)}}, Blind: []span{{From: at(0.6), To: at(39.5)}},
		Snapshots: []span{{From: at(39.5), To: at(40)}}, Lists: []span{{From: at(39.5), To: at(40)}}}
	v = oc.judge(h, blind)
	if len(v.Outcomes) != 1 || len(v.Loose) > 0 {
		t.Fatalf("want one certain outcome, got %d (loose %v, uncertain %v)", len(v.Outcomes), v.Loose, v.Uncertain)
	}
	out = v.Outcomes[0]
	if got := out.Count[classSeries(mRecreations, l)]; got != 0 {
		t.Errorf("recreations seen: got %v, want 0", got)
	}
	if got := out.Observe[classSeries(mCreation, l)]; len(got) != 1 || got[0] != 36 {
		t.Errorf("creation seen: got %v, want [36]", got)
	}
	if got := v.Ideal.Count[classSeries(mRecreations, l)]; got != 1 {
		t.Errorf("ideal recreations: got %v, want 1", got)
	}
}

// A sandbox lost and re-created within the second of its readiness keeps
// the readiness's time: the False the exporter saw between makes it a
// re-creation, and without that False it is none (lifecycle/sandbox.go).
func TestOracleRecreationInTheSameSecond(t *testing.T) {
	h := build("", nil,
		step{0, sched(0)},
		step{0.1, sandbox("False", 0)},
		step{1.1, sandbox("True", 1)},
		step{1.3, sandbox("False", 1)},
		step{1.5, func(r *revision) { sandbox("True", 1)(r); r.Restarts = 0 }},
		step{2.1, running(2)},
	)
	l := classLabels{"none", "none"}
	oc := config()
	if got := oc.judge(h, watchingAll()).Outcomes[0].Count[classSeries(mRecreations, l)]; got != 1 {
		t.Errorf("recreations, every revision seen: got %v, want 1", got)
	}
	ch := choices{Seen: []bool{true, true, true, false, true, true}}
	out, _, _ := oc.walk(h, ch)
	if got := out.Count[classSeries(mRecreations, l)]; got != 0 {
		t.Errorf("recreations, the False not seen: got %v, want 0", got)
	}
}

// The first Ready, after a restart, reaches the exporter from a new
// process's list: it may be the restart's, and is skipped
// (restarted_before_seen); from an outage's snapshot, a resumed watch or a
// list, either may be.
func TestOracleRestartListed(t *testing.T) {
	h := build("", nil,
		step{0, sched(0)},
		step{0.1, sandbox("False", 0)},
		step{1.1, sandbox("True", 1)},
		step{2.1, running(2)},
		step{10.1, func(r *revision) { running(10)(r); r.Restarts = 1 }},
		step{12.1, ready("True", 12)},
	)
	oc := config()
	h = withPull(oc, h)
	l := classLabels{"none", "none"}
	restarted := func(sli string) string {
		return seriesKey(mSkipped, map[string]string{"sli": sli, "reason": "restarted_before_seen"})
	}
	down := &timeline{Watching: []span{{From: at(-10), To: at(3)}, {From: at(40)}}, Blind: []span{{From: at(3), To: at(39.5)}},
		Snapshots: []span{{From: at(39.5), To: at(40)}}, Lists: []span{{From: at(39.5), To: at(40)}}}
	v := oc.judge(h, down)
	if len(v.Outcomes) != 1 {
		t.Fatalf("want one outcome, got %d (uncertain %v)", len(v.Outcomes), v.Uncertain)
	}
	out := v.Outcomes[0]
	if out.Count[restarted("readiness")] != 1 || out.Count[restarted("startup_phase")] != 1 {
		t.Errorf("readiness and phases not skipped: %v", out.Count)
	}
	if got := out.Observe[classSeries(mReadiness, l)]; len(got) != 0 {
		t.Errorf("readiness observed: %v", got)
	}
	if out.Count[restarted("pod_startup")] != 0 {
		t.Errorf("the start-up's end was watched (2 s, before the restart), yet skipped")
	}
	// The same from an outage's snapshot: listed or resumed.
	outage := &timeline{Watching: []span{{From: at(-10), To: at(3)}, {From: at(40)}}, Blind: []span{{From: at(3), To: at(39.5)}},
		Snapshots: []span{{From: at(39.5), To: at(40)}}}
	v = oc.judge(h, outage)
	if len(v.Outcomes) != 2 || !slices.Contains(v.Uncertain, "restart listed") {
		t.Fatalf("want both outcomes, got %d (uncertain %v)", len(v.Outcomes), v.Uncertain)
	}
	// Watched throughout: measured.
	v = oc.judge(h, watchingAll())
	if got := v.Outcomes[0].Observe[classSeries(mReadiness, l)]; len(v.Outcomes) != 1 || len(got) != 1 || got[0] != 2 {
		t.Errorf("readiness watched: got %v, want [2]", got)
	}
}

func TestOracleTimeout(t *testing.T) {
	stuck := func(deleteAt float64) *history {
		steps := []step{{0, sched(0)}, {0.1, sandbox("False", 0)}}
		if deleteAt > 0 {
			steps = append(steps, step{deleteAt, deletion(int64(deleteAt), 30)})
		}
		h := build("runc", nil, steps...)
		if deleteAt > 0 {
			h.Removed = at(deleteAt + 1)
		}
		return h
	}
	timeouts := classSeries(mTimeouts, classLabels{"runc", "none"})
	excluded := classSeries(mExcluded, classLabels{"runc", "none"}, "reason", "user_error")
	sweptSkip := seriesKey(mSkipped, map[string]string{"sli": "sandbox_creation", "reason": "vanished"})
	for _, tc := range []struct {
		name      string
		h         *history
		userError bool
		tl        *timeline
		want      []float64 // the timeout counter in each outcome
	}{
		{"alive past the timeout", stuck(0), false, watchingAll(), []float64{1}},
		{"deleted well after", stuck(120), false, watchingAll(), []float64{1}},
		{"deleted well before", stuck(30), false, watchingAll(), []float64{0}},
		{"user error", stuck(0), true, watchingAll(), []float64{0}},
		// Found gone by the new process's list, past its timeout: the
		// timeout is skipped as vanished (below), not counted.
		{"exporter down over the timeout, pod gone before its return", stuck(120), false, &timeline{
			Checking: []span{{From: at(-10), To: at(50)}, {From: at(130)}}, MayCheck: []span{{From: at(-10), To: at(51)}, {From: at(130)}}, Watching: []span{{From: at(-10), To: at(50)}, {From: at(130)}},
			Blind: []span{{From: at(51), To: at(125)}}, Snapshots: []span{{From: at(125), To: at(130)}}, Lists: []span{{From: at(125), To: at(130)}},
		}, []float64{0}},
		{"exporter ready just after the timeout", stuck(120), false, &timeline{
			Checking: []span{{From: at(-10), To: at(50)}, {From: at(61.5)}}, MayCheck: []span{{From: at(-10), To: at(51)}, {From: at(61.5)}}, Watching: []span{{From: at(-10), To: at(50)}, {From: at(61.5)}},
		}, []float64{1}},
		// The request's time decides (docs/metrics.md), not whether a
		// check ran between the timeout and the deletion.
		{"deletion requested just past the timeout", stuck(61), false, watchingAll(), []float64{1}},
		{"deletion requested at the timeout", stuck(60), false, watchingAll(), []float64{0}},
		{"exporter down over the timeout and the late sandbox, seen after its return", build("runc", nil,
			step{0, sched(0)}, step{0.1, sandbox("False", 0)}, step{90, sandbox("True", 90)}), false, &timeline{
			Checking: []span{{From: at(-10), To: at(50)}, {From: at(100)}}, MayCheck: []span{{From: at(-10), To: at(51)}, {From: at(100)}}, Watching: []span{{From: at(-10), To: at(50)}, {From: at(100)}},
			Blind: []span{{From: at(51), To: at(95)}}, Snapshots: []span{{From: at(95), To: at(100)}},
		}, []float64{1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			oc := config()
			oc.UserError[tc.h.UID] = tc.userError
			v := oc.judge(tc.h, tc.tl)
			var got []float64
			for _, out := range v.Outcomes {
				got = append(got, out.Count[timeouts])
				if tc.userError && out.Count[excluded] != 1 {
					t.Errorf("a user-error pod past its timeout is excluded once, got %v", out.Count)
				}
				if strings.HasPrefix(tc.name, "exporter down over the timeout, pod gone") && out.Count[sweptSkip] != 1 {
					t.Errorf("the timeout of a pod found gone past it is skipped, got %v", out.Count)
				}
			}
			if len(got) != len(tc.want) {
				t.Fatalf("timeouts per outcome: got %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("timeouts per outcome: got %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestExpectAndCompare(t *testing.T) {
	oc := config()
	certain := lifecycle("runc", 30, 1)
	uncertain := lifecycle("kata", 30, 3)
	uncertain.UID = "uid-uncertain"
	tl := &timeline{
		Watching:  []span{{From: at(-10), To: at(99)}, {From: at(106)}},
		Blind:     []span{{From: at(100), To: at(103.5)}},
		Snapshots: []span{{From: at(103.5), To: at(106)}},
	}
	verdicts := map[types.UID]*podVerdict{}
	for _, h := range []*history{certain, uncertain} {
		v := oc.judge(h, watchingAll())
		if h == uncertain {
			v = oc.judge(h, tl)
		}
		verdicts[h.UID] = &v
	}
	exp := oc.expect(verdicts)
	kata := classSeries(mTermination, classLabels{"kata", "none"})
	name, labels := splitSeries(kata)
	if b := exp.Series[name+"_count"+labels]; b != (bounds{0, 1}) {
		t.Errorf("uncertain kata termination count: got %v", b)
	}
	// A termination may be timed to the millisecond: its 3 s between
	// condition times may be up to watchSpread more or less.
	if b := exp.Series[name+"_sum"+labels]; b != (bounds{0, 3 + watchSpread}) {
		t.Errorf("uncertain kata termination sum: got %v", b)
	}
	runc := classSeries(mTermination, classLabels{"runc", "none"})
	name, labels = splitSeries(runc)
	if b := exp.Series[name+"_count"+labels]; b != (bounds{1, 1}) {
		t.Errorf("runc termination count: got %v", b)
	}
	// 1 s between condition times may be 0.2 s to the millisecond.
	if b := exp.Series[bucketKey(name, labels, 0.5)]; b != (bounds{0, 1}) {
		t.Errorf("runc le=0.5: got %v", b)
	}
	if b := exp.Series[bucketKey(name, labels, 5)]; b != (bounds{1, 1}) {
		t.Errorf("runc le=5: got %v", b)
	}
	if b := exp.Series[bucketKey(name, labels, math.Inf(1))]; b != (bounds{1, 1}) {
		t.Errorf("runc le=+Inf: got %v", b)
	}

	// The exporter lost the runc termination and counted the kata one twice.
	got := &exposition{Series: map[string]float64{}}
	for k, b := range exp.Series {
		got.Series[k] = b.Lo
	}
	got.Series[name+"_count"+labels] = 0
	got.Series[name+"_sum"+labels] = 0
	kname, klabels := splitSeries(kata)
	got.Series[kname+"_count"+klabels] = 2
	got.Series[kname+"_sum"+klabels] = 6
	var term *FamilyResult
	for _, f := range compare(exp, got) {
		if f.Family == mTermination {
			term = f
		}
	}
	// The lost runc termination's sum, 0, is within the spread of its 1 s:
	// its count says it was lost. The doubled kata one's 6 is beyond 4.5.
	if term == nil || term.Lost != 1 || term.Doubled != 1 || term.SumMismatches != 1 || term.Compared != 1 {
		t.Fatalf("termination comparison: %+v", term)
	}
}

func TestSpread(t *testing.T) {
	for _, tc := range []struct {
		name, labels string
		want         float64
	}{
		{mCreation, `{runtime_class="runc",storage_class="none"}`, watchSpread},
		{mReadiness, `{}`, watchSpread},
		{mTermination, `{}`, watchSpread},
		{mPhase, `{phase="sandbox",runtime_class="runc",storage_class="none"}`, watchSpread},
		{mPhase, `{phase="readiness",runtime_class="runc",storage_class="none"}`, watchSpread},
		// Timed in whole seconds only: compared exactly.
		{mPhase, `{phase="scheduling",runtime_class="runc",storage_class="none"}`, 0},
		{mPhase, `{phase="total",runtime_class="runc",storage_class="none"}`, 0},
		{mStabilize, `{}`, 0},
	} {
		if got := spread(tc.name, tc.labels); got != tc.want {
			t.Errorf("spread(%s%s) = %v, want %v", tc.name, tc.labels, got, tc.want)
		}
	}
}

func TestBucketKeyOrder(t *testing.T) {
	got := bucketKey(mPhase, `{phase="sandbox",runtime_class="runc",storage_class="none"}`, 2.5)
	want := mPhase + `_bucket{le="2.5",phase="sandbox",runtime_class="runc",storage_class="none"}`
	if got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

// TestOracleReplacedInOutage is the pod force-deleted and created again
// under its name while the exporter's watch is down: the old UID vanishes,
// and its timeout, due after the exporter watches again, must never count.
func TestOracleReplacedInOutage(t *testing.T) {
	h := build("runc", nil, step{0, sched(0)}, step{0.1, sandbox("False", 0)})
	h.Removed = at(20.1) // grace 0: no revision with a deletion timestamp
	outage := outageRecord{Stop: at(5), APIReady: at(20), WatchBack: at(25)}
	tl := buildTimeline([]instance{{N: 1, Start: at(-20), Ready: at(-15)}}, []outageRecord{outage})
	v := config().judge(h, tl)
	// Removed before its timeout, but the sweep that finds it gone may
	// come after: with or without the timeout's vanished skip.
	if len(v.Outcomes) != 2 || !slices.Equal(v.Uncertain, []string{"swept past the timeout"}) {
		t.Fatalf("want two outcomes, got %d (uncertain %v)", len(v.Outcomes), v.Uncertain)
	}
	swept := seriesKey(mSkipped, map[string]string{"sli": "sandbox_creation", "reason": "vanished"})
	if v.Outcomes[0].Count[swept]+v.Outcomes[1].Count[swept] != 1 {
		t.Errorf("one outcome with the timeout skipped: %v", v.Outcomes)
	}
	out := v.Outcomes[0]
	if out.Count[swept] != 0 {
		out = v.Outcomes[1]
	}
	// Its containers never ran: its start-up leaves with it too.
	want := map[string]float64{
		seriesKey(mSkipped, map[string]string{"sli": "termination", "reason": "vanished"}): 1,
		seriesKey(mSkipped, map[string]string{"sli": "pod_startup", "reason": "vanished"}): 1,
	}
	if !maps.Equal(out.Count, want) {
		t.Errorf("counters: got %v, want %v", out.Count, want)
	}
	if v.Final.Alive || v.Final.Pending {
		t.Errorf("final: %+v", v.Final)
	}
}

// TestOracleFinalRevisionOnly is kwok's removal, a delete with grace 0 that
// moves deletionTimestamp to the removal request: an exporter that saw
// only that last revision cannot tell when the request came, and the
// termination is lost (vanished), not free.
func TestOracleFinalRevisionOnly(t *testing.T) {
	h := build("runc", nil,
		step{0, sched(0)}, step{0.1, sandbox("False", 0)}, step{1.1, sandbox("True", 1)},
		step{2.1, running(2)}, step{4.1, ready("True", 4)},
		step{100, deletion(100, 1)},
		step{101.1, func(r *revision) { sandbox("False", 101)(r); ready("False", 101)(r) }},
		step{102.1, deletion(102, 0)},
	)
	h.Removed = at(103.2)
	tl := &timeline{
		Watching:  []span{{From: at(-10), To: at(99.5)}, {From: at(104)}},
		Blind:     []span{{From: at(100), To: at(102.5)}},
		Snapshots: []span{{From: at(102.5), To: at(103)}},
	}
	v := config().judge(h, tl)
	if len(v.Outcomes) != 1 {
		t.Fatalf("want one outcome, got %d (uncertain %v)", len(v.Outcomes), v.Uncertain)
	}
	skipped := seriesKey(mSkipped, map[string]string{"sli": "termination", "reason": "vanished"})
	if got := v.Outcomes[0].Count[skipped]; got != 1 {
		t.Errorf("vanished: got %v, want 1 (%v)", got, v.Outcomes[0].Count)
	}
	if got := v.Ideal.Observe[classSeries(mTermination, classLabels{"runc", "none"})]; len(got) != 1 || got[0] != 1 {
		t.Errorf("ideal termination: got %v, want [1]", got)
	}
}

// TestOracleLateSandbox is a pod whose sandbox comes after the timeout: it
// counts once as a timeout and is still observed (docs/metrics.md); one
// whose sandbox the exporter could not see in time may count as both.
func TestOracleLateSandbox(t *testing.T) {
	h := build("runc", nil, step{0, sched(0)}, step{0.1, sandbox("False", 0)}, step{130.1, sandbox("True", 130)})
	timeouts := classSeries(mTimeouts, classLabels{"runc", "none"})
	creation := classSeries(mCreation, classLabels{"runc", "none"})
	v := config().judge(h, watchingAll())
	if len(v.Outcomes) != 1 || v.Outcomes[0].Count[timeouts] != 1 || len(v.Outcomes[0].Observe[creation]) != 1 {
		t.Errorf("late sandbox: got %+v", v.Outcomes)
	}
	// In time (at 50 s), but the watch was down from 40 s to 70 s.
	h = build("runc", nil, step{0, sched(0)}, step{0.1, sandbox("False", 0)}, step{50.1, sandbox("True", 50)})
	outage := outageRecord{Stop: at(40), APIReady: at(45), WatchBack: at(70)}
	v = config().judge(h, buildTimeline([]instance{{N: 1, Start: at(-20), Ready: at(-15)}}, []outageRecord{outage}))
	var got []float64
	for _, out := range v.Outcomes {
		got = append(got, out.Count[timeouts])
	}
	if len(got) != 2 || got[0]+got[1] != 1 {
		t.Errorf("a sandbox hidden by the outage: timeouts per outcome %v, want one of each", got)
	}
}

// withPull gives h one container and kwok's Pulled event of 312 ms.
func withPull(oc *oracleConfig, h *history) *history {
	h.Containers = 1
	if oc.Pulls == nil {
		oc.Pulls = map[types.UID]podPulls{}
	}
	oc.Pulls[h.UID] = podPulls{Containers: map[string]pullRecord{"": {Seconds: 0.312, Size: ptr(uint64(320368))}}}
	return h
}

func ptr[T any](v T) *T { return &v }

// TestOraclePullAndStartup is docs/metrics.md's image pull and start-up
// SLI for kwok's pods: a 312 ms pull, a cache miss, and the start-up from
// creation (0) to the container's start (2) less the pull; stateful when
// the pod has a claim.
func TestOraclePullAndStartup(t *testing.T) {
	for _, tc := range []struct {
		name     string
		claims   []string
		storage  string
		stateful string
	}{
		{"stateless", nil, "none", "false"},
		{"stateful", []string{"std-00"}, "standard", "true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			oc := config()
			oc.ClaimClass = map[string]string{"chaos-00/std-00": "standard"}
			h := lifecycle("runc", 30, 1)
			h.Claims = tc.claims
			v := oc.judge(withPull(oc, h), watchingAll())
			if len(v.Outcomes) != 1 || len(v.Uncertain)+len(v.Loose) > 0 {
				t.Fatalf("want one certain outcome, got %d (uncertain %v, loose %v)", len(v.Outcomes), v.Uncertain, v.Loose)
			}
			l := classLabels{"runc", tc.storage}
			out := v.Outcomes[0]
			if got := out.Observe[classSeries(mPull, l, "cache", "miss")]; len(got) != 1 || got[0] != 0.312 {
				t.Errorf("pull: got %v, want [0.312]", got)
			}
			if got := out.Observe[classSeries(mStartup, l, "stateful", tc.stateful)]; len(got) != 1 || got[0] != 2-0.312 {
				t.Errorf("start-up: got %v, want [1.688] (observations %v)", got, out.Observe)
			}
			// 320368 bytes are 312.86 KiB: 313 KiB.
			if f := v.Final; f.Pull == nil || *f.Pull != 0.312 || f.PullSize == nil || *f.PullSize != 313*1024 || f.Startup == nil || *f.Startup != 2-0.312 {
				t.Errorf("per pod: %+v", f)
			}
		})
	}
}

// TestOraclePullNotCounted: kwok's event names no container, so a pod with
// an init container and no events of the harness shows no pull and no
// start-up; a user-error pod its
// pull but no start-up; a pod the exporter saw running only once its
// deletion was requested its pull, but no start-up end.
func TestOraclePullNotCounted(t *testing.T) {
	oc := config()
	l := classLabels{"runc", "none"}
	pull, startup := classSeries(mPull, l, "cache", "miss"), classSeries(mStartup, l, "stateful", "false")

	h := withPull(oc, lifecycle("runc", 30, 1))
	h.Containers, h.HasInit = 2, true
	for i := range h.Revs {
		if h.Revs[i].Started != 0 {
			h.Revs[i].Initialized = cond{"True", t0 + 2}
		}
	}
	if out := oc.judge(h, watchingAll()).Outcomes[0]; len(out.Observe[pull])+len(out.Observe[startup]) != 0 ||
		out.Count[seriesKey(mSkipped, map[string]string{"reason": "pulls_unknown", "sli": "pod_startup"})] != 1 {
		t.Errorf("init container: got %v, %v", out.Observe, out.Count)
	}

	h = withPull(oc, lifecycle("runc", 30, 1))
	oc.UserError = map[types.UID]bool{h.UID: true}
	out := oc.judge(h, watchingAll()).Outcomes[0]
	if len(out.Observe[pull]) != 1 || len(out.Observe[startup]) != 0 {
		t.Errorf("user error: got %v", out.Observe)
	}
	oc.UserError = map[types.UID]bool{}

	// Down from before the containers started until after the deletion
	// request (at 100).
	tl := &timeline{
		Watching:  []span{{From: at(-10), To: at(1.5)}, {From: at(100.6)}},
		Blind:     []span{{From: at(1.6), To: at(100.3)}},
		Snapshots: []span{{From: at(100.3), To: at(100.6)}},
	}
	h = withPull(oc, lifecycle("runc", 30, 1))
	h.Removed = time.Time{} // alive at the end: the exporter holds pod and event
	v := oc.judge(h, tl)
	for _, out := range v.Outcomes {
		if len(out.Observe[pull]) != 1 || len(out.Observe[startup]) != 0 {
			t.Errorf("seen running only when deleted: got %v", out.Observe)
		}
	}
}

// TestOraclePullsGivenUp: pulls that cannot all come are given up
// pullsWait after the containers ran: not before, maybe after (the
// exporter's wait starts when it sees them, and again at a restart).
func TestOraclePullsGivenUp(t *testing.T) {
	unknown := seriesKey(mSkipped, map[string]string{"reason": "pulls_unknown", "sli": "pod_startup"})
	for _, tc := range []struct {
		end      float64
		outcomes []float64
	}{
		{end: 2 + pullsWait.Seconds() - 1, outcomes: []float64{0}},
		{end: 2 + pullsWait.Seconds(), outcomes: []float64{0, 1}},
	} {
		oc := config()
		oc.End = at(tc.end)
		h := lifecycle("runc", 30, 1)
		h.Removed = time.Time{}
		v := oc.judge(h, watchingAll())
		var got []float64
		for _, out := range v.Outcomes {
			got = append(got, out.Count[unknown])
		}
		slices.Sort(got)
		if !slices.Equal(got, tc.outcomes) {
			t.Errorf("end %v s: pulls_unknown per outcome %v, want %v (uncertain %v)", tc.end, got, tc.outcomes, v.Uncertain)
		}
	}
}

// TestOraclePullOfARemovedPod: a pod removed at the end whose containers'
// start the exporter surely watched has its pull; one whose start it may
// have missed may have been removed before the event reached it.
func TestOraclePullOfARemovedPod(t *testing.T) {
	oc := config()
	pull := classSeries(mPull, classLabels{"runc", "none"}, "cache", "miss")
	v := oc.judge(withPull(oc, lifecycle("runc", 30, 1)), watchingAll())
	if len(v.Outcomes) != 1 || len(v.Outcomes[0].Observe[pull]) != 1 {
		t.Fatalf("watched: got %+v", v.Outcomes)
	}
	tl := &timeline{
		Watching:  []span{{From: at(-10), To: at(1.5)}, {From: at(200)}},
		Blind:     []span{{From: at(1.6), To: at(199)}},
		Snapshots: []span{{From: at(199), To: at(200)}},
	}
	v = oc.judge(withPull(oc, lifecycle("runc", 30, 1)), tl)
	var n []int
	for _, out := range v.Outcomes {
		n = append(n, len(out.Observe[pull]))
	}
	if len(n) != 2 || n[0]+n[1] != 1 || !slices.Contains(v.Uncertain, "image pull") {
		t.Errorf("missed: pulls per outcome %v, uncertain %v", n, v.Uncertain)
	}
	if got := v.Ideal.Observe[pull]; len(got) != 1 {
		t.Errorf("ideal: got %v", got)
	}
}

// withContainerPulls gives h the harness's image events (workload.go),
// one per container, beside kwok's event about no container, which a pod
// of more than one container ignores.
func withContainerPulls(oc *oracleConfig, h *history, failed bool, pulls map[string]pullRecord) *history {
	h.Containers = len(pulls)
	for k := range pulls {
		if strings.HasPrefix(k, "spec.initContainers{") {
			h.HasInit = true
		}
	}
	if oc.Pulls == nil {
		oc.Pulls = map[types.UID]podPulls{}
	}
	all := map[string]pullRecord{"": {Seconds: 0.312, Size: ptr(uint64(320368))}}
	maps.Copy(all, pulls)
	oc.Pulls[h.UID] = podPulls{Containers: all, Failed: failed}
	return h
}

// TestOracleContainerPulls is docs/metrics.md's image pull and start-up
// SLI for pods of several containers, whose events the harness writes:
// the pull is the sum of every container's (init containers included;
// kwok's event about no container ignored), a cache hit only when every
// image was present, its size the sizes rounded up to a KiB each; the
// start-up less the init phase and the containers' pulls; a failed pull
// counted once, and the pod left out of the start-up SLI.
func TestOracleContainerPulls(t *testing.T) {
	fval := func(p *float64) string {
		if p == nil {
			return "none"
		}
		return fmt.Sprint(*p)
	}
	l := classLabels{"runc", "none"}
	pull := func(c string) string { return classSeries(mPull, l, "cache", c) }
	startup := classSeries(mStartup, l, "stateful", "false")
	skipped := func(reason string) string {
		return seriesKey(mSkipped, map[string]string{"reason": reason, "sli": "pod_startup"})
	}
	failedKey := classSeries(mPullsFailed, l)
	// An init container's pod: sandbox at 1, Initialized at 3, the
	// containers at 4.
	initPod := func() *history {
		h := build("runc", nil,
			step{0, sched(0)},
			step{1.1, sandbox("True", 1)},
			step{3.1, func(r *revision) { r.Initialized = cond{"True", t0 + 3} }},
			step{4.1, running(4)},
			step{6.1, ready("True", 6)},
		)
		return h
	}
	for _, tc := range []struct {
		name      string
		h         func() *history
		failed    bool
		pulls     map[string]pullRecord
		cache     string
		want      float64 // the pull
		size      *float64
		startup   *float64
		skip      string
		pullFails float64
	}{
		{
			name: "three containers", h: func() *history { return lifecycle("runc", 30, 1) },
			pulls: map[string]pullRecord{
				"spec.containers{app}":   {Seconds: 1.234, Size: ptr(uint64(2048))},
				"spec.containers{proxy}": {Cached: true},
				"spec.containers{logs}":  {Seconds: 0.1, Size: ptr(uint64(1))},
			},
			// 2 KiB + 1 byte rounded up to 1 KiB.
			cache: "miss", want: 1.334, size: ptr(3 * 1024.0), startup: ptr(2 - 1.334),
		},
		{
			name: "every image present", h: func() *history { return lifecycle("runc", 30, 1) },
			pulls: map[string]pullRecord{
				"spec.containers{app}":   {Cached: true},
				"spec.containers{proxy}": {Cached: true},
				"spec.containers{logs}":  {Cached: true},
			},
			cache: "hit", want: 0, size: ptr(0.0), startup: ptr(2.0),
		},
		{
			// 4 s to the containers, less the init phase (1 to 3) and
			// the app's pull; the init container's is inside the phase.
			name: "init container", h: initPod,
			pulls: map[string]pullRecord{
				"spec.initContainers{init}": {Seconds: 0.5, Size: ptr(uint64(1024))},
				"spec.containers{app}":      {Seconds: 0.25, Size: ptr(uint64(1024))},
			},
			cache: "miss", want: 0.75, size: ptr(2 * 1024.0), startup: ptr(4 - 2 - 0.25),
		},
		{
			name: "a failed pull first", h: func() *history { return lifecycle("runc", 30, 1) }, failed: true,
			pulls: map[string]pullRecord{
				"spec.containers{app}":   {Seconds: 1, Size: ptr(uint64(1024))},
				"spec.containers{proxy}": {Cached: true},
				"spec.containers{logs}":  {Cached: true},
			},
			cache: "miss", want: 1, size: ptr(1024.0), skip: "image_pull_failed", pullFails: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			oc := config()
			v := oc.judge(withContainerPulls(oc, tc.h(), tc.failed, tc.pulls), watchingAll())
			if len(v.Outcomes) != 1 || len(v.Uncertain)+len(v.Loose) > 0 {
				t.Fatalf("want one certain outcome, got %d (uncertain %v, loose %v)", len(v.Outcomes), v.Uncertain, v.Loose)
			}
			out := v.Outcomes[0]
			if got := out.Observe[pull(tc.cache)]; len(got) != 1 || math.Abs(got[0]-tc.want) > 1e-9 {
				t.Errorf("pull: got %v, want [%v] (observations %v)", got, tc.want, out.Observe)
			}
			if f := v.Final; f.Pull == nil || math.Abs(*f.Pull-tc.want) > 1e-9 || (f.PullSize == nil) != (tc.size == nil) || (f.PullSize != nil && *f.PullSize != *tc.size) {
				t.Errorf("per pod: pull %v, size %v; want %v, %v", fval(f.Pull), fval(f.PullSize), tc.want, fval(tc.size))
			}
			got := out.Observe[startup]
			switch {
			case tc.startup == nil && len(got) != 0, tc.startup != nil && (len(got) != 1 || math.Abs(got[0]-*tc.startup) > 1e-9):
				t.Errorf("start-up: got %v, want %v", got, fval(tc.startup))
			}
			if tc.skip != "" && out.Count[skipped(tc.skip)] != 1 {
				t.Errorf("start-up skipped as %s: got %v", tc.skip, out.Count)
			}
			if out.Count[skipped("pulls_unknown")] != 0 {
				t.Errorf("pulls_unknown for a pod whose pulls came: %v", out.Count)
			}
			if out.Count[failedKey] != tc.pullFails {
				t.Errorf("failed pulls: got %v, want %v", out.Count[failedKey], tc.pullFails)
			}
		})
	}

	// One container's event missing: the pulls never all come, and are
	// given up when the pod goes; the failed pull still counts.
	oc := config()
	h := withContainerPulls(oc, lifecycle("runc", 30, 1), true, map[string]pullRecord{
		"spec.containers{app}": {Cached: true}, "spec.containers{proxy}": {Cached: true},
	})
	h.Containers = 3
	out := oc.judge(h, watchingAll()).Outcomes[0]
	if len(out.Observe[pull("hit")])+len(out.Observe[startup]) != 0 || out.Count[failedKey] != 1 ||
		out.Count[skipped("image_pull_failed")] != 1 || out.Count[skipped("pulls_unknown")] != 0 ||
		out.Count[seriesKey(mSkipped, map[string]string{"reason": "pulls_unknown", "sli": "image_pull"})] != 1 {
		t.Errorf("a missing event: got %v, %v", out.Observe, out.Count)
	}
}

func TestReadPulled(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want pullRecord
	}{
		{`Successfully pulled image "registry.k8s.io/pause:3.10" in 312ms (312ms including waiting). Image size: 320368 bytes.`, pullRecord{Seconds: 0.312, Size: ptr(uint64(320368))}},
		{`Successfully pulled image "x" in 1.234s (1.5s including waiting)`, pullRecord{Seconds: 1.5}},
		{`Container image "x" already present on machine`, pullRecord{Cached: true}},
	} {
		got, err := readPulled(tc.msg)
		if err != nil || !got.same(tc.want) {
			t.Errorf("readPulled(%q) = %+v, %v; want %+v", tc.msg, got, err, tc.want)
		}
	}
	for _, msg := range []string{`Successfully pulled image "x" in 1.234s`, `Pulling image "x"`, `Successfully pulled image "x" in 1s (soon including waiting)`, `Successfully pulled image "x" in 1s (1s including waiting). Image size: many bytes.`} {
		if got, err := readPulled(msg); err == nil {
			t.Errorf("readPulled(%q) = %+v, want an error", msg, got)
		}
	}
}

// TestSumRounding: 0.312 s pulls summed in another order than the
// exporter's are equal to the exporter's sum, not a mismatch.
func TestSumRounding(t *testing.T) {
	oc := config()
	verdicts := map[types.UID]*podVerdict{}
	for i := range 7 {
		h := lifecycle("runc", 30, 1)
		h.UID = types.UID(fmt.Sprint("uid-", i))
		v := oc.judge(withPull(oc, h), watchingAll())
		verdicts[h.UID] = &v
	}
	exp := oc.expect(verdicts)
	got := &exposition{Series: map[string]float64{}}
	for k, b := range exp.Series {
		got.Series[k] = b.Lo
	}
	name, labels := splitSeries(classSeries(mPull, classLabels{"runc", "none"}, "cache", "miss"))
	var sum float64
	for range 7 {
		sum += 0.312
	}
	got.Series[name+"_sum"+labels] = sum
	for _, f := range compare(exp, got) {
		if !f.ok() {
			t.Errorf("%s: %+v", f.Family, f)
		}
	}
	got.Series[name+"_sum"+labels] = sum + 0.001
	for _, f := range compare(exp, got) {
		if f.Family == mPull && f.SumMismatches != 1 {
			t.Errorf("a sum 1 ms off: %+v", f)
		}
	}
}

// contradicted is chaos-05/pod-00155 of a failed run: created one second
// after the API server came back, scheduled, admitted (sandbox False), and
// then given its predecessor's termination by kwok (a container that
// started before the pod even existed, sandbox False, phase Succeeded),
// with no sandbox of its own ever ready; alive and never Ready at the end.
func contradicted() *history {
	return build("runc", nil,
		step{0, sched(0)},
		step{0.1, sandbox("False", 0)},
		step{1.5, func(r *revision) { sandbox("False", 1)(r); ready("False", 1)(r); r.Ran = t0 - 40 }},
	)
}

func TestContradiction(t *testing.T) {
	if c := contradiction(contradicted()); c == "" {
		t.Error("a container start with no sandbox ever ready: no contradiction named")
	}
	restartOnly := build("runc", nil, step{0, sched(0)}, step{0.1, sandbox("False", 0)}, step{1, func(r *revision) { r.Restarts = 1 }})
	if c := contradiction(restartOnly); c == "" {
		t.Error("a restart with no sandbox ever ready: no contradiction named")
	}
	// A sandbox lost and re-created: the containers ran in a ready one.
	crash := lifecycle("runc", 30, 1)
	crash.Revs = append(crash.Revs[:5:5],
		revision{At: at(10), Scheduled: crash.Revs[4].Scheduled, Sandbox: cond{"False", t0 + 10}, Ready: crash.Revs[4].Ready, Started: t0 + 2, Ran: t0 + 2},
		revision{At: at(10.2), Scheduled: crash.Revs[4].Scheduled, Sandbox: cond{"True", t0 + 10}, Ready: crash.Revs[4].Ready, Started: t0 + 10, Ran: t0 + 2, Restarts: 1})
	for i := range crash.Revs[3:5] {
		crash.Revs[3+i].Ran = t0 + 2
	}
	for _, h := range []*history{lifecycle("kata", 1, 3), crash} {
		if c := contradiction(h); c != "" {
			t.Errorf("a kubelet's history named a contradiction: %s", c)
		}
	}
}

// TestOracleDoesNotChargeAContradiction judges the contradicted pod against
// both readings: podslo's documented one (recreated_before_seen: the
// container start says a first sandbox was ready and lost, so no timeout)
// and the oracle's (pending past its timeout). Neither is lost nor
// doubled; the same exposition against a stuck pod without the
// contradiction is.
func TestOracleDoesNotChargeAContradiction(t *testing.T) {
	timeouts := classSeries(mTimeouts, classLabels{"runc", "none"})
	recreated := seriesKey(mSkipped, map[string]string{"sli": "sandbox_creation", "reason": "recreated_before_seen"})
	podslo := map[string]float64{recreated: 1}
	oracle := map[string]float64{timeouts: 1}
	stuck := build("runc", nil, step{0, sched(0)}, step{0.1, sandbox("False", 0)})
	for _, tc := range []struct {
		name    string
		h       *history
		got     map[string]float64
		charged bool
	}{
		{"contradiction, podslo's reading", contradicted(), podslo, false},
		{"contradiction, the oracle's reading", contradicted(), oracle, false},
		{"contradiction, neither", contradicted(), map[string]float64{}, false},
		{"contradiction, both at once", contradicted(), map[string]float64{timeouts: 1, recreated: 2}, true},
		{"stuck, the oracle's reading", stuck, oracle, false},
		{"stuck, podslo's reading", stuck, podslo, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			oc := config()
			v := oc.judge(tc.h, watchingAll())
			if (v.Contradiction != "") != (tc.h != stuck) {
				t.Fatalf("contradiction %q", v.Contradiction)
			}
			exp := oc.expect(map[types.UID]*podVerdict{tc.h.UID: &v})
			// Every other series as the oracle expects it; the two
			// readings' counters as given.
			got := &exposition{Series: map[string]float64{}}
			for k, b := range exp.Series {
				got.Series[k] = b.Lo
			}
			for _, k := range []string{timeouts, recreated} {
				got.Series[k] = tc.got[k]
			}
			var off []string
			for _, f := range compare(exp, got) {
				if !f.ok() {
					off = append(off, fmt.Sprintf("%s lost %v doubled %v", f.Family, f.Lost, f.Doubled))
				}
			}
			if charged := len(off) > 0; charged != tc.charged {
				t.Errorf("charged %v, want %v: %v", charged, tc.charged, off)
			}
		})
	}
}

// TestJudgeRunNamesAContradiction: the run fails naming deploy/kwok, not a
// lost or doubled count.
func TestJudgeRunNamesAContradiction(t *testing.T) {
	h := contradicted()
	res := &Results{Options: &Options{SandboxTimeout: 60 * time.Second}, End: at(1000),
		Instances: []instance{{N: 1, Start: at(-20), Ready: at(-15)}}}
	got := &exposition{Series: map[string]float64{
		seriesKey(mSkipped, map[string]string{"sli": "sandbox_creation", "reason": "recreated_before_seen"}): 1,
	}, Buckets: []float64{0.5, 1, 2, 5, 10}}
	judgeRun(res, map[types.UID]*history{h.UID: h}, got)
	if len(res.Contradictions) != 1 {
		t.Fatalf("contradictions: %v", res.Contradictions)
	}
	var named bool
	for _, f := range res.Failures {
		if strings.HasPrefix(f, "deploy/kwok wrote 1 pod(s) a kubelet cannot") {
			named = true
		} else {
			t.Errorf("charged elsewhere: %s", f)
		}
	}
	if !named {
		t.Errorf("failures %v: the contradiction is not named", res.Failures)
	}
}

// TestOracleGraceEndsWithTheFirstRequest: the grace period ends at the
// first request plus its grace, where the kubelet kills, though the
// kubelet's final grace-0 delete moves deletionTimestamp to now and a
// second, shorter delete moves it earlier (docs/metrics.md).
func TestOracleGraceEndsWithTheFirstRequest(t *testing.T) {
	overGrace := classSeries(mOverGrace, classLabels{"runc", "none"})
	for _, tc := range []struct {
		name  string
		steps []step
		want  float64
	}{
		{"the sandbox first seen down at the grace-0 delete", []step{
			{100, deletion(100, 2)},
			{105.1, func(r *revision) {
				sandbox("False", 104)(r)
				r.Deletion, r.Grace = t0+105, 0
			}},
		}, 1},
		{"a second, shorter delete, the sandbox down within the first grace", []step{
			{100, deletion(100, 30)},
			{110, deletion(109, 1)},
			{113.1, func(r *revision) { sandbox("False", 113)(r) }},
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := build("runc", nil, append([]step{
				{0, sched(0)},
				{1.1, sandbox("True", 1)},
				{2.1, running(2)},
				{4.1, ready("True", 4)},
			}, tc.steps...)...)
			h.Removed = at(120)
			v := config().judge(h, watchingAll())
			if len(v.Outcomes) != 1 {
				t.Fatalf("want one outcome, got %d (uncertain %v)", len(v.Outcomes), v.Uncertain)
			}
			if got := v.Outcomes[0].Count[overGrace]; got != tc.want {
				t.Errorf("over grace: got %v, want %v", got, tc.want)
			}
		})
	}
}
