package lifecycle

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func ts(t *testing.T, s string) time.Time {
	t.Helper()
	v, err := time.Parse(time.RFC3339, s)
	require.NoError(t, err)
	return v
}

// cond builds a condition the way it appears in the KEP's YAML.
func cond(t *testing.T, typ corev1.PodConditionType, status corev1.ConditionStatus, at string) Condition {
	t.Helper()
	c := Condition{Type: typ, Status: status}
	if at != "" {
		c.LastTransitionTime = ts(t, at).Unix()
	}
	return c
}

func podWith(conds ...Condition) *Pod {
	return &Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}, Conditions: conds}
}

// snapshot is the pod status the KEP shows "at" a given time.
type snapshot struct {
	at  string
	pod *Pod
}

type want struct {
	created     []float64
	recreations int
	skips       []Skip
	state       sandboxState
}

// sandboxState is the part of State the sandbox creation SLI owns.
type sandboxState struct {
	FirstSandboxReady, LastSandboxReady int64
	SandboxCreation                     int32
	HasSandboxCreation                  bool
	Recreations                         uint32
	Skipped                             SkipSet
}

func sandboxOf(s State) sandboxState {
	var mine SkipSet
	for r := Reason(0); r < numReasons; r++ {
		if sk := (Skip{SandboxCreation, r}); s.Skipped.Has(sk) {
			mine = mine.With(sk)
		}
	}
	return sandboxState{s.FirstSandboxReady, s.LastSandboxReady, s.SandboxCreationMs / 1000, s.HasSandboxCreation, s.Recreations, mine}
}

// sandboxSkips keeps the skips of the sandbox creation SLI.
func sandboxSkips(skips []Skip) []Skip {
	var out []Skip
	for _, s := range skips {
		if s.SLI == SandboxCreation {
			out = append(out, s)
		}
	}
	return out
}

func run(t *testing.T, cfg *Config, snaps []snapshot) want {
	t.Helper()
	var (
		state State
		got   want
	)
	for _, s := range snaps {
		next, out := Step(ts(t, s.at), s.pod, Inputs{}, state, cfg)
		for _, o := range out.Observations {
			switch o.Kind {
			case SandboxCreated:
				got.created = append(got.created, o.Seconds)
			case SandboxRecreated:
				got.recreations++
			}
		}
		got.skips = append(got.skips, sandboxSkips(out.Skips)...)
		if out.Empty() {
			// Equal states are what lets the caller skip the write.
			assert.Equal(t, state.Recreations, next.Recreations, "no outcome at %s but recreations moved", s.at)
		}
		state = next
	}
	got.state = sandboxOf(state)
	return got
}

const (
	hasNetwork corev1.PodConditionType = "PodHasNetwork"
	ready                              = corev1.PodReadyToStartContainers
	scheduled                          = corev1.PodScheduled
	T                                  = corev1.ConditionTrue
	F                                  = corev1.ConditionFalse
)

// TestKEP3085Stories replays every user story and scenario of KEP-3085 with
// the exact timestamps of its YAML.
func TestKEP3085Stories(t *testing.T) {
	cfg := &Config{}
	tests := []struct {
		name  string
		snaps []snapshot
		want  want
	}{
		{
			name: "scenario 1: healthy node, 3s",
			snaps: []snapshot{
				{"2022-12-06T15:33:47Z", podWith(cond(t, hasNetwork, F, "2022-12-06T15:33:47Z"), cond(t, scheduled, T, "2022-12-06T15:33:46Z"))},
				{"2022-12-06T15:33:50Z", podWith(cond(t, hasNetwork, T, "2022-12-06T15:33:49Z"), cond(t, scheduled, T, "2022-12-06T15:33:46Z"))},
			},
			want: want{created: []float64{3}},
		},
		{
			name: "scenario 2: CSI, CNI or runtime handler delays, 10s",
			snaps: []snapshot{
				{"2022-12-06T15:33:47Z", podWith(cond(t, hasNetwork, F, "2022-12-06T15:33:47Z"), cond(t, scheduled, T, "2022-12-06T15:33:46Z"))},
				{"2022-12-06T15:34:00Z", podWith(cond(t, hasNetwork, T, "2022-12-06T15:33:56Z"), cond(t, scheduled, T, "2022-12-06T15:33:46Z"))},
			},
			want: want{created: []float64{10}},
		},
		{
			name: "story 3: sandbox never ready, nothing observed",
			snaps: []snapshot{
				{"2022-12-06T15:33:47Z", podWith(cond(t, hasNetwork, F, "2022-12-06T15:33:47Z"), cond(t, scheduled, T, "2022-12-06T15:33:46Z"))},
				{"2022-12-06T15:43:47Z", podWith(cond(t, hasNetwork, F, "2022-12-06T15:33:47Z"), cond(t, scheduled, T, "2022-12-06T15:33:46Z"))},
				{"2022-12-06T17:33:47Z", podWith(cond(t, hasNetwork, F, "2022-12-06T15:33:47Z"), cond(t, scheduled, T, "2022-12-06T15:33:46Z"))},
			},
			want: want{},
		},
		{
			// The KEP's prose says ready "after 5 seconds", its YAML says
			// 15:33:52 for a 15:33:46 schedule: the timestamps rule.
			name: "story 4: node or sandbox crash, 6s and one re-creation",
			snaps: []snapshot{
				{"2022-12-06T15:34:00Z", podWith(cond(t, hasNetwork, T, "2022-12-06T15:33:52Z"), cond(t, scheduled, T, "2022-12-06T15:33:46Z"))},
				{"2022-12-06T17:33:46Z", podWith(cond(t, hasNetwork, F, "2022-12-06T17:33:46Z"), cond(t, scheduled, T, "2022-12-06T15:33:46Z"))},
				{"2022-12-06T17:34:00Z", podWith(cond(t, hasNetwork, T, "2022-12-06T17:33:52Z"), cond(t, scheduled, T, "2022-12-06T15:33:46Z"))},
				// A resync delivers the same object again: not a new re-creation.
				{"2022-12-06T17:44:00Z", podWith(cond(t, hasNetwork, T, "2022-12-06T17:33:52Z"), cond(t, scheduled, T, "2022-12-06T15:33:46Z"))},
			},
			want: want{created: []float64{6}, recreations: 1},
		},
		{
			// The kubelet writes the crash's False alone and often the
			// re-creation's True in the same second: lost in the second
			// of the first readiness, the new True has the old time, and
			// only the False seen between tells (issue 35).
			name: "a sandbox lost and rebuilt within the second of its readiness",
			snaps: []snapshot{
				{"2022-12-06T15:33:53Z", podWith(cond(t, hasNetwork, T, "2022-12-06T15:33:52Z"), cond(t, scheduled, T, "2022-12-06T15:33:46Z"))},
				{"2022-12-06T15:33:53Z", podWith(cond(t, hasNetwork, F, "2022-12-06T15:33:52Z"), cond(t, scheduled, T, "2022-12-06T15:33:46Z"))},
				{"2022-12-06T15:33:53Z", podWith(cond(t, hasNetwork, T, "2022-12-06T15:33:52Z"), cond(t, scheduled, T, "2022-12-06T15:33:46Z"))},
				// The same object again, and a later loss and re-creation
				// in one second: one more each.
				{"2022-12-06T15:40:00Z", podWith(cond(t, hasNetwork, T, "2022-12-06T15:33:52Z"), cond(t, scheduled, T, "2022-12-06T15:33:46Z"))},
				{"2022-12-06T17:33:46Z", podWith(cond(t, hasNetwork, F, "2022-12-06T17:33:46Z"), cond(t, scheduled, T, "2022-12-06T15:33:46Z"))},
				{"2022-12-06T17:33:47Z", podWith(cond(t, hasNetwork, T, "2022-12-06T17:33:46Z"), cond(t, scheduled, T, "2022-12-06T15:33:46Z"))},
				{"2022-12-06T17:44:00Z", podWith(cond(t, hasNetwork, T, "2022-12-06T17:33:46Z"), cond(t, scheduled, T, "2022-12-06T15:33:46Z"))},
			},
			want: want{created: []float64{6}, recreations: 2},
		},
		{
			name: "story 5: graceful termination, 2s and the False at teardown is nothing",
			snaps: []snapshot{
				{"2022-12-06T12:33:50Z", podWith(cond(t, hasNetwork, T, "2022-12-06T12:33:48Z"), cond(t, scheduled, T, "2022-12-06T12:33:46Z"))},
				{"2022-12-06T15:33:46Z", podWith(cond(t, hasNetwork, T, "2022-12-06T12:33:48Z"), cond(t, scheduled, T, "2022-12-06T12:33:46Z"))},
				{"2022-12-06T15:33:49Z", podWith(cond(t, hasNetwork, F, "2022-12-06T15:33:49Z"), cond(t, scheduled, T, "2022-12-06T12:33:46Z"))},
			},
			want: want{created: []float64{2}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := run(t, cfg, tt.snaps)
			assert.Equal(t, tt.want.created, got.created)
			assert.Equal(t, tt.want.recreations, got.recreations)
			assert.Empty(t, got.skips)
		})
	}
}

func TestStepEdgeCases(t *testing.T) {
	const at = "2024-05-01T10:00:10Z"
	tests := []struct {
		name  string
		cfg   Config
		snaps []snapshot
		want  want
	}{
		{
			name:  "PodReadyToStartContainers is preferred over PodHasNetwork",
			snaps: []snapshot{{at, podWith(cond(t, hasNetwork, T, "2024-05-01T10:00:09Z"), cond(t, ready, T, "2024-05-01T10:00:04Z"), cond(t, scheduled, T, "2024-05-01T10:00:00Z"))}},
			want:  want{created: []float64{4}, state: sandboxState{FirstSandboxReady: 1714557604, LastSandboxReady: 1714557604, SandboxCreation: 4, HasSandboxCreation: true}},
		},
		{
			name:  "configured condition type",
			cfg:   Config{SandboxConditionTypes: []corev1.PodConditionType{"example.com/Sandbox"}},
			snaps: []snapshot{{at, podWith(cond(t, ready, T, "2024-05-01T10:00:01Z"), cond(t, "example.com/Sandbox", T, "2024-05-01T10:00:07Z"), cond(t, scheduled, T, "2024-05-01T10:00:00Z"))}},
			want:  want{created: []float64{7}, state: sandboxState{FirstSandboxReady: 1714557607, LastSandboxReady: 1714557607, SandboxCreation: 7, HasSandboxCreation: true}},
		},
		{
			name:  "zero latency is an observation",
			snaps: []snapshot{{at, podWith(cond(t, ready, T, "2024-05-01T10:00:00Z"), cond(t, scheduled, T, "2024-05-01T10:00:00Z"))}},
			want:  want{created: []float64{0}, state: sandboxState{FirstSandboxReady: 1714557600, LastSandboxReady: 1714557600, HasSandboxCreation: true}},
		},
		{
			name:  "clock skew gives a negative duration: consumed, skipped",
			snaps: []snapshot{{at, podWith(cond(t, ready, T, "2024-05-01T09:59:58Z"), cond(t, scheduled, T, "2024-05-01T10:00:00Z"))}},
			want: want{
				skips: []Skip{{SandboxCreation, NegativeDuration}},
				state: sandboxState{FirstSandboxReady: 1714557598, LastSandboxReady: 1714557598},
			},
		},
		{
			name:  "missing PodScheduled: consumed, skipped, later re-creations still count",
			snaps: []snapshot{{at, podWith(cond(t, ready, T, "2024-05-01T10:00:05Z"))}, {"2024-05-01T11:00:00Z", podWith(cond(t, ready, T, "2024-05-01T10:59:00Z"))}},
			want: want{
				recreations: 1,
				skips:       []Skip{{SandboxCreation, NoScheduledCondition}},
				state:       sandboxState{FirstSandboxReady: 1714557605, LastSandboxReady: 1714561140, Recreations: 1},
			},
		},
		{
			name:  "PodScheduled False",
			snaps: []snapshot{{at, podWith(cond(t, ready, T, "2024-05-01T10:00:05Z"), cond(t, scheduled, F, "2024-05-01T10:00:00Z"))}},
			want:  want{skips: []Skip{{SandboxCreation, NoScheduledCondition}}, state: sandboxState{FirstSandboxReady: 1714557605, LastSandboxReady: 1714557605}},
		},
		{
			name:  "PodScheduled with a zero time",
			snaps: []snapshot{{at, podWith(cond(t, ready, T, "2024-05-01T10:00:05Z"), cond(t, scheduled, T, ""))}},
			want:  want{skips: []Skip{{SandboxCreation, InvalidCondition}}, state: sandboxState{FirstSandboxReady: 1714557605, LastSandboxReady: 1714557605}},
		},
		{
			name:  "PodScheduled with an unknown status",
			snaps: []snapshot{{at, podWith(cond(t, ready, T, "2024-05-01T10:00:05Z"), cond(t, scheduled, "Maybe", "2024-05-01T10:00:00Z"))}},
			want:  want{skips: []Skip{{SandboxCreation, InvalidCondition}}, state: sandboxState{FirstSandboxReady: 1714557605, LastSandboxReady: 1714557605}},
		},
		{
			name: "malformed sandbox condition is counted once and a later good one is still observed",
			snaps: []snapshot{
				{at, podWith(cond(t, ready, "Yes", "2024-05-01T10:00:03Z"), cond(t, scheduled, T, "2024-05-01T10:00:00Z"))},
				{at, podWith(cond(t, ready, "Yes", "2024-05-01T10:00:03Z"), cond(t, scheduled, T, "2024-05-01T10:00:00Z"))},
				{at, podWith(cond(t, ready, T, ""), cond(t, scheduled, T, "2024-05-01T10:00:00Z"))},
				{at, podWith(cond(t, ready, T, "2024-05-01T10:00:03Z"), cond(t, scheduled, T, "2024-05-01T10:00:00Z"))},
			},
			want: want{
				created: []float64{3},
				skips:   []Skip{{SandboxCreation, InvalidCondition}},
				state:   sandboxState{FirstSandboxReady: 1714557603, LastSandboxReady: 1714557603, SandboxCreation: 3, HasSandboxCreation: true},
			},
		},
		{
			// First seen late: the sandbox it shows may be a re-created one,
			// so not even its latency is remembered as the creation's.
			name:  "scheduled longer ago than the max age when first seen: remembered, not observed",
			cfg:   Config{MaxObservationAge: 10 * time.Minute},
			snaps: []snapshot{{"2024-05-01T10:10:01Z", podWith(cond(t, ready, T, "2024-05-01T10:00:05Z"), cond(t, scheduled, T, "2024-05-01T10:00:00Z"))}},
			want:  want{skips: []Skip{{SandboxCreation, TooOld}}, state: sandboxState{FirstSandboxReady: 1714557605, LastSandboxReady: 1714557605, Skipped: SkipSet{}.With(Skip{SandboxCreation, TooOld})}},
		},
		{
			name:  "scheduled exactly the max age ago is still observed",
			cfg:   Config{MaxObservationAge: 10 * time.Minute},
			snaps: []snapshot{{"2024-05-01T10:10:00Z", podWith(cond(t, ready, T, "2024-05-01T10:00:05Z"), cond(t, scheduled, T, "2024-05-01T10:00:00Z"))}},
			want:  want{created: []float64{5}, state: sandboxState{FirstSandboxReady: 1714557605, LastSandboxReady: 1714557605, SandboxCreation: 5, HasSandboxCreation: true}},
		},
		{
			// Seen at scheduling, then podslo was down past the max age.
			name: "first readiness older than the max age of a pod seen scheduled: remembered, not observed",
			cfg:  Config{MaxObservationAge: 10 * time.Minute},
			snaps: []snapshot{
				{"2024-05-01T10:00:01Z", podWith(cond(t, scheduled, T, "2024-05-01T10:00:00Z"))},
				{"2024-05-01T10:10:06Z", podWith(cond(t, ready, T, "2024-05-01T10:00:05Z"), cond(t, scheduled, T, "2024-05-01T10:00:00Z"))},
			},
			want: want{skips: []Skip{{SandboxCreation, TooOld}}, state: sandboxState{FirstSandboxReady: 1714557605, LastSandboxReady: 1714557605, SandboxCreation: 5, HasSandboxCreation: true, Skipped: SkipSet{}.With(Skip{SandboxCreation, TooOld})}},
		},
		{
			// The case: scheduled 2 h ago, sandbox re-created 30 s
			// ago, podslo never saw the first sandbox.
			name:  "a re-created sandbox of a pod first seen late is no 2 h creation",
			snaps: []snapshot{{"2024-05-01T12:00:30Z", podWith(cond(t, ready, T, "2024-05-01T12:00:00Z"), cond(t, scheduled, T, "2024-05-01T10:00:00Z"))}},
			want:  want{skips: []Skip{{SandboxCreation, TooOld}}, state: sandboxState{FirstSandboxReady: 1714564800, LastSandboxReady: 1714564800, Skipped: SkipSet{}.With(Skip{SandboxCreation, TooOld})}},
		},
		{
			// ...and its later re-creations still count.
			name: "re-creations of a pod first seen late count",
			snaps: []snapshot{
				{"2024-05-01T12:00:30Z", podWith(cond(t, ready, T, "2024-05-01T12:00:00Z"), cond(t, scheduled, T, "2024-05-01T10:00:00Z"))},
				{"2024-05-01T12:05:00Z", podWith(cond(t, ready, T, "2024-05-01T12:04:00Z"), cond(t, scheduled, T, "2024-05-01T10:00:00Z"))},
			},
			want: want{recreations: 1, skips: []Skip{{SandboxCreation, TooOld}}, state: sandboxState{FirstSandboxReady: 1714564800, LastSandboxReady: 1714565040, Recreations: 1, Skipped: SkipSet{}.With(Skip{SandboxCreation, TooOld})}},
		},
		{
			// A kubelet upgraded past 1.29 writes PodReadyToStartContainers
			// beside the PodHasNetwork it no longer updates.
			name: "a sandbox condition type appearing beside the observed one is no re-creation",
			snaps: []snapshot{
				{at, podWith(cond(t, hasNetwork, T, "2024-05-01T10:00:05Z"), cond(t, scheduled, T, "2024-05-01T10:00:00Z"))},
				{at, podWith(cond(t, hasNetwork, T, "2024-05-01T10:00:05Z"), cond(t, ready, T, "2024-05-01T10:00:50Z"), cond(t, scheduled, T, "2024-05-01T10:00:00Z"))},
			},
			want: want{created: []float64{5}, state: sandboxState{FirstSandboxReady: 1714557605, LastSandboxReady: 1714557650, SandboxCreation: 5, HasSandboxCreation: true}},
		},
		{
			// After the upgrade, only the new type moves: a re-creation.
			name: "after a kubelet upgrade, a re-creation of the new type counts",
			snaps: []snapshot{
				{at, podWith(cond(t, hasNetwork, T, "2024-05-01T10:00:05Z"), cond(t, scheduled, T, "2024-05-01T10:00:00Z"))},
				{at, podWith(cond(t, hasNetwork, T, "2024-05-01T10:00:05Z"), cond(t, ready, T, "2024-05-01T10:00:50Z"), cond(t, scheduled, T, "2024-05-01T10:00:00Z"))},
				{at, podWith(cond(t, hasNetwork, T, "2024-05-01T10:00:05Z"), cond(t, ready, T, "2024-05-01T10:01:10Z"), cond(t, scheduled, T, "2024-05-01T10:00:00Z"))},
			},
			want: want{created: []float64{5}, recreations: 1, state: sandboxState{FirstSandboxReady: 1714557605, LastSandboxReady: 1714557670, SandboxCreation: 5, HasSandboxCreation: true, Recreations: 1}},
		},
		{
			name: "an older True than the last one seen is not a re-creation",
			snaps: []snapshot{
				{at, podWith(cond(t, ready, T, "2024-05-01T10:00:05Z"), cond(t, scheduled, T, "2024-05-01T10:00:00Z"))},
				{at, podWith(cond(t, ready, T, "2024-05-01T10:00:04Z"), cond(t, scheduled, T, "2024-05-01T10:00:00Z"))},
			},
			want: want{created: []float64{5}, state: sandboxState{FirstSandboxReady: 1714557605, LastSandboxReady: 1714557605, SandboxCreation: 5, HasSandboxCreation: true}},
		},
		{
			name: "re-creations seen without their False each count once",
			snaps: []snapshot{
				{at, podWith(cond(t, ready, T, "2024-05-01T10:00:05Z"), cond(t, scheduled, T, "2024-05-01T10:00:00Z"))},
				{at, podWith(cond(t, ready, T, "2024-05-01T10:30:00Z"), cond(t, scheduled, T, "2024-05-01T10:00:00Z"))},
				{at, podWith(cond(t, ready, T, "2024-05-01T10:30:00Z"), cond(t, scheduled, T, "2024-05-01T10:00:00Z"))},
				{at, podWith(cond(t, ready, T, "2024-05-01T11:00:00Z"), cond(t, scheduled, T, "2024-05-01T10:00:00Z"))},
			},
			want: want{created: []float64{5}, recreations: 2, state: sandboxState{FirstSandboxReady: 1714557605, LastSandboxReady: 1714561200, SandboxCreation: 5, HasSandboxCreation: true, Recreations: 2}},
		},
		{
			name:  "no sandbox condition at all",
			snaps: []snapshot{{at, podWith(cond(t, scheduled, T, "2024-05-01T10:00:00Z"))}},
			want:  want{},
		},
		{
			name:  "Unknown sandbox status is waiting, not an error",
			snaps: []snapshot{{at, podWith(cond(t, ready, corev1.ConditionUnknown, "2024-05-01T10:00:01Z"), cond(t, scheduled, T, "2024-05-01T10:00:00Z"))}},
			want:  want{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := run(t, &tt.cfg, tt.snaps)
			// Every skip counted is remembered, so that it is never counted
			// again.
			for _, sk := range tt.want.skips {
				tt.want.state.Skipped = tt.want.state.Skipped.With(sk)
			}
			assert.Equal(t, tt.want.created, got.created, "creations")
			assert.Equal(t, tt.want.recreations, got.recreations, "recreations")
			assert.Equal(t, tt.want.skips, got.skips, "skips")
			assert.Equal(t, tt.want.state, got.state, "state")
		})
	}
}

func TestStepDoesNotModifyPod(t *testing.T) {
	pod := podWith(cond(t, ready, T, "2024-05-01T10:00:05Z"), cond(t, scheduled, T, "2024-05-01T10:00:00Z"))
	before := pod.DeepCopyObject()
	Step(ts(t, "2024-05-01T10:00:06Z"), pod, Inputs{}, State{}, &Config{})
	assert.Equal(t, before, pod)
}

func TestNamesAreLabelValues(t *testing.T) {
	for r := Reason(0); r < numReasons; r++ {
		assert.Regexp(t, `^[a-z_]+$`, r.String())
	}
	for s := SLI(0); s < numSLIs; s++ {
		assert.Regexp(t, `^[a-z_]+$`, s.String())
	}
	// Every (SLI, reason) pair must fit the SkipSet bit field, with room
	// left for the next ones.
	assert.LessOrEqual(t, int(numSLIs), maxSLIs)
	assert.LessOrEqual(t, int(numReasons), maxReasons)
	assert.Equal(t, 16*16, len(SkipSet{})*64, "a SkipSet has room for 16 SLIs of 16 reasons")
}
