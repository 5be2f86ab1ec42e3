package lifecycle

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// deleting marks pod as deleted at requestedAt with a grace period, the way
// the API server does: deletionTimestamp is the request time plus grace.
func deleting(t *testing.T, pod *Pod, requestedAt string, grace int64) *Pod {
	t.Helper()
	p := pod.DeepCopyObject().(*Pod)
	dt := metav1.NewTime(ts(t, requestedAt).Add(time.Duration(grace) * time.Second))
	p.DeletionTimestamp = &dt
	p.DeletionGracePeriodSeconds = &grace
	return p
}

// killedAt marks a container of pod as SIGKILLed (exit 137) at finishedAt.
func killedAt(t *testing.T, pod *Pod, finishedAt string) *Pod {
	t.Helper()
	pod.ContainerKilled = ts(t, finishedAt).Unix()
	return pod
}

type terminationRun struct {
	terminated []float64
	overGrace  []bool
	skips      []Skip
	state      State
}

func runTermination(t *testing.T, snaps []snapshot, vanish bool) terminationRun {
	t.Helper()
	var (
		st  State
		got terminationRun
	)
	cfg := &Config{}
	collect := func(out Outcome) {
		for _, o := range out.Observations {
			if o.Kind == Terminated {
				got.terminated = append(got.terminated, o.Seconds)
				got.overGrace = append(got.overGrace, o.OverGrace)
			}
		}
		for _, s := range out.Skips {
			if s.SLI == Termination {
				got.skips = append(got.skips, s)
			}
		}
	}
	for _, s := range snaps {
		next, out := Step(ts(t, s.at), s.pod, Inputs{}, st, cfg)
		collect(out)
		st = next
	}
	if vanish {
		next, out := Vanish(st)
		collect(out)
		st = next
	}
	got.state = st
	return got
}

func TestTermination(t *testing.T) {
	running := podWith(cond(t, hasNetwork, T, "2022-12-06T12:33:48Z"), cond(t, scheduled, T, "2022-12-06T12:33:46Z"))
	down := func(at string) *Pod {
		return podWith(cond(t, hasNetwork, F, at), cond(t, scheduled, T, "2022-12-06T12:33:46Z"))
	}
	tests := []struct {
		name      string
		snaps     []snapshot
		vanish    bool
		want      []float64
		overGrace []bool
		skips     []Skip
	}{
		{
			// KEP-3085 Story 5: delete invoked 15:33:47, terminated 15:33:49.
			// With the default 30s grace, deletionTimestamp is 15:34:17:
			// measured from it, the latency would be -28s.
			name: "story 5: 2s, not -28s",
			snaps: []snapshot{
				{"2022-12-06T12:33:50Z", running},
				{"2022-12-06T15:33:47Z", deleting(t, running, "2022-12-06T15:33:47Z", 30)},
				{"2022-12-06T15:33:49Z", deleting(t, down("2022-12-06T15:33:49Z"), "2022-12-06T15:33:47Z", 30)},
			},
			vanish:    true,
			want:      []float64{2},
			overGrace: []bool{false},
		},
		{
			name: "a second, shorter delete does not move the request time",
			snaps: []snapshot{
				{"2022-12-06T12:33:50Z", running},
				{"2022-12-06T15:33:47Z", deleting(t, running, "2022-12-06T15:33:47Z", 30)},
				// kubectl delete --grace-period=1 ten seconds later.
				{"2022-12-06T15:33:57Z", deleting(t, running, "2022-12-06T15:33:57Z", 1)},
				{"2022-12-06T15:33:59Z", deleting(t, down("2022-12-06T15:33:59Z"), "2022-12-06T15:33:57Z", 1)},
			},
			vanish: true,
			want:   []float64{12},
			// The second delete moved deletionTimestamp to 15:33:58, but
			// the kubelet keeps the first grace, to 15:34:17 (on the real
			// node it killed a pod 10 s after a delete of grace 10 that a
			// delete of grace 2 followed 1.6 s later): the sandbox went
			// within it.
			overGrace: []bool{false},
		},
		{
			name: "the kubelet's final grace-0 delete does not move the grace period's end",
			snaps: []snapshot{
				{"2022-12-06T12:33:50Z", running},
				{"2022-12-06T15:33:47Z", deleting(t, running, "2022-12-06T15:33:47Z", 2)},
				// The sandbox False first seen in the update of the
				// kubelet's final delete: deletionTimestamp now, grace 0.
				{"2022-12-06T15:33:53Z", deleting(t, down("2022-12-06T15:33:52Z"), "2022-12-06T15:33:53Z", 0)},
			},
			vanish:    true,
			want:      []float64{5},
			overGrace: []bool{true},
		},
		{
			// The real kubelet SIGKILLs a container that ignores SIGTERM at
			// the end of its grace and tears the sandbox down within the
			// same second: at one-second precision the sandbox's False is
			// not after deletionTimestamp, but the container's exit 137 at
			// that second says the grace was used up (issue 26, defect 2).
			name: "killed at the end of the grace period, sandbox down in the same second",
			snaps: []snapshot{
				{"2022-12-06T12:33:50Z", running},
				{"2022-12-06T15:33:47Z", deleting(t, running, "2022-12-06T15:33:47Z", 5)},
				{"2022-12-06T15:33:53Z", killedAt(t, deleting(t, down("2022-12-06T15:33:52Z"), "2022-12-06T15:33:47Z", 5), "2022-12-06T15:33:52Z")},
			},
			vanish:    true,
			want:      []float64{5},
			overGrace: []bool{true},
		},
		{
			name: "a container SIGKILLed before the grace period ended is no overrun",
			snaps: []snapshot{
				{"2022-12-06T12:33:50Z", running},
				{"2022-12-06T15:33:47Z", deleting(t, running, "2022-12-06T15:33:47Z", 5)},
				{"2022-12-06T15:33:53Z", killedAt(t, deleting(t, down("2022-12-06T15:33:52Z"), "2022-12-06T15:33:47Z", 5), "2022-12-06T15:33:51Z")},
			},
			vanish:    true,
			want:      []float64{5},
			overGrace: []bool{false},
		},
		{
			name: "terminating past the grace period",
			snaps: []snapshot{
				{"2022-12-06T12:33:50Z", running},
				{"2022-12-06T15:33:47Z", deleting(t, running, "2022-12-06T15:33:47Z", 5)},
				{"2022-12-06T15:34:00Z", deleting(t, down("2022-12-06T15:33:59Z"), "2022-12-06T15:33:47Z", 5)},
			},
			want:      []float64{12},
			overGrace: []bool{true},
		},
		{
			name: "force deletion: gone without a False",
			snaps: []snapshot{
				{"2022-12-06T12:33:50Z", running},
				{"2022-12-06T15:33:47Z", deleting(t, running, "2022-12-06T15:33:47Z", 0)},
			},
			vanish: true,
			skips:  []Skip{{Termination, Vanished}},
		},
		{
			name: "a sandbox that never existed vanishes",
			snaps: []snapshot{
				{"2022-12-06T12:33:50Z", down("2022-12-06T12:33:47Z")},
				{"2022-12-06T12:35:00Z", deleting(t, down("2022-12-06T12:33:47Z"), "2022-12-06T12:35:00Z", 30)},
			},
			vanish: true,
			skips:  []Skip{{Termination, Vanished}},
		},
		{
			// podslo missed the request (down, or an outage) and first
			// sees the kubelet's final grace-0 delete, which moved
			// deletionTimestamp to now: the request may have come before
			// the sandbox went down, so the termination is lost, not free.
			name: "first seen at the kubelet's final grace-0 delete",
			snaps: []snapshot{
				{"2022-12-06T12:33:50Z", running},
				{"2022-12-06T15:00:31Z", deleting(t, down("2022-12-06T15:00:30Z"), "2022-12-06T15:00:31Z", 0)},
			},
			vanish: true,
			skips:  []Skip{{Termination, Vanished}},
		},
		{
			name: "a completed pod deleted later cost no termination",
			snaps: []snapshot{
				{"2022-12-06T12:33:50Z", running},
				{"2022-12-06T13:00:01Z", down("2022-12-06T13:00:00Z")},
				{"2022-12-06T15:00:00Z", deleting(t, down("2022-12-06T13:00:00Z"), "2022-12-06T15:00:00Z", 30)},
			},
			vanish: true,
			skips:  []Skip{{Termination, TerminatedBeforeDelete}},
		},
		{
			name: "kubelet clock behind the API server's",
			snaps: []snapshot{
				{"2022-12-06T12:33:50Z", running},
				{"2022-12-06T15:33:47Z", deleting(t, running, "2022-12-06T15:33:47Z", 30)},
				{"2022-12-06T15:33:49Z", deleting(t, down("2022-12-06T15:33:45Z"), "2022-12-06T15:33:47Z", 30)},
			},
			vanish: true,
			skips:  []Skip{{Termination, NegativeDuration}},
		},
		{
			name: "repeated updates after the False count once",
			snaps: []snapshot{
				{"2022-12-06T12:33:50Z", running},
				{"2022-12-06T15:33:47Z", deleting(t, running, "2022-12-06T15:33:47Z", 30)},
				{"2022-12-06T15:33:49Z", deleting(t, down("2022-12-06T15:33:49Z"), "2022-12-06T15:33:47Z", 30)},
				{"2022-12-06T15:33:50Z", deleting(t, down("2022-12-06T15:33:49Z"), "2022-12-06T15:33:47Z", 30)},
			},
			vanish:    true,
			want:      []float64{2},
			overGrace: []bool{false},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runTermination(t, tt.snaps, tt.vanish)
			assert.Equal(t, tt.want, got.terminated)
			assert.Equal(t, tt.overGrace, got.overGrace)
			assert.Equal(t, tt.skips, got.skips)
			assert.True(t, got.state.TerminationDone || !tt.vanish)
		})
	}
}

func TestTerminationRequestTimeIsPersisted(t *testing.T) {
	running := podWith(cond(t, hasNetwork, T, "2022-12-06T12:33:48Z"), cond(t, scheduled, T, "2022-12-06T12:33:46Z"))
	st, _ := Step(ts(t, "2022-12-06T15:33:47Z"), deleting(t, running, "2022-12-06T15:33:47Z", 30), Inputs{}, State{FirstSandboxReady: 1, LastSandboxReady: 1}, &Config{})
	assert.Equal(t, ts(t, "2022-12-06T15:33:47Z").Unix(), st.DeletionRequested)
	again, _ := Step(ts(t, "2022-12-06T15:33:57Z"), deleting(t, running, "2022-12-06T15:33:57Z", 1), Inputs{}, st, &Config{})
	assert.Equal(t, st.DeletionRequested, again.DeletionRequested)
}
