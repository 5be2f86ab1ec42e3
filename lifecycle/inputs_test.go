package lifecycle

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

// One Step with the pod and its held inputs does what the pod's step and
// then the inputs' fold did, in either order the watches deliver them, in
// one call: the same state and the same observations and skips.
func TestStepFoldsTheInputs(t *testing.T) {
	cfg := &Config{}
	const created, started = "2026-01-01T00:00:00Z", "2026-01-01T00:00:09Z"
	sched := cond(t, corev1.PodScheduled, corev1.ConditionTrue, created)
	now := ts(t, started).Add(time.Second)
	for name, events := range map[string][]PullEvent{
		"every image":     {pulled("a", 1500), pulled("b", 2250)},
		"one missing":     {pulled("a", 1500)},
		"a failed pull":   {{Container: "spec.containers{a}", Result: PullFailed}, pulled("a", 1500), pulled("b", 1)},
		"every one found": {{Container: "spec.containers{a}", Result: PullCached}, {Container: "spec.containers{b}", Result: PullCached}},
	} {
		t.Run(name, func(t *testing.T) {
			var pulls Pulls
			for _, e := range events {
				pulls.Add(e)
			}
			pod := received(t, running(t, created, started, 2, 0, sched), "2026-01-01T00:00:09.400Z")
			for _, in := range []Inputs{{Pulls: &pulls}, {Pulls: &pulls, UserError: true}} {
				apart, out := Step(now, pod, Inputs{UserError: in.UserError}, State{}, cfg)
				apart, more := Fold(now, Inputs{Pulls: &pulls}, 2, apart, cfg)
				out.Observations = append(out.Observations, more.Observations...)
				out.Skips = append(out.Skips, more.Skips...)

				one, oneOut := Step(now, pod, in, State{}, cfg)
				assert.Equal(t, apart, one)
				assert.Equal(t, out, oneOut)
				assert.Equal(t, in.UserError, one.UserError)
			}
		})
	}
}

// A held FailedMount mark decides between a timeout and an exclusion in
// every entry point, before the store has it.
func TestTheUserErrorInputExcludesATimeout(t *testing.T) {
	cfg := &Config{SandboxCreationTimeout: time.Minute}
	stuck := State{Scheduled: 100}
	now := time.Unix(100+120, 0)

	_, out := Timeout(now, Inputs{}, stuck, cfg)
	assert.Equal(t, []Observation{{Kind: SandboxTimedOut}}, out.Observations)
	next, out := Timeout(now, Inputs{UserError: true}, stuck, cfg)
	assert.Equal(t, []Observation{{Kind: SandboxExcluded}}, out.Observations)
	assert.True(t, next.UserError && next.Excluded && next.TimedOut)

	next, out = Fold(now, Inputs{UserError: true}, 0, stuck, cfg)
	assert.True(t, out.Empty())
	assert.Equal(t, MarkUserError(stuck), next)
	next, out = Fold(now, Inputs{}, 0, stuck, cfg)
	assert.True(t, out.Empty())
	assert.Equal(t, stuck, next, "no inputs, no change")
}

// Fold without the pod's containers counts a failed pull but completes
// nothing: the sum needs every container.
func TestFoldWithoutContainersCompletesNothing(t *testing.T) {
	var pulls Pulls
	pulls.Add(pulled("a", 100))
	pulls.Add(PullEvent{Container: "spec.containers{a}", Result: PullFailed})
	next, out := Fold(time.Unix(100, 0), Inputs{Pulls: &pulls}, 0, State{}, &Config{})
	assert.Equal(t, []Observation{{Kind: ImagePullFailedOnce}}, out.Observations)
	assert.False(t, next.Pulls.Has(PullsDone))
	next, out = Fold(time.Unix(100, 0), Inputs{Pulls: &pulls}, 1, next, &Config{})
	assert.True(t, next.Pulls.Has(PullsDone))
	assert.Len(t, observed(out, ImagesPulled), 1)
}
