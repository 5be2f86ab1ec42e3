package lifecycle

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestPersistedEnumValues pins the values the store persists (a skip's SLI
// and Reason, a phase's bit). A value may be appended here with its
// constant; none may change, or every stored record would change meaning.
func TestPersistedEnumValues(t *testing.T) {
	slis := map[SLI]uint8{SandboxCreation: 0, Termination: 1, Readiness: 2, StartupPhase: 3, Stabilization: 4, ImagePull: 5, PodStartup: 6}
	reasons := map[Reason]uint8{TooOld: 0, NegativeDuration: 1, NoScheduledCondition: 2, InvalidCondition: 3,
		Vanished: 4, TerminatedBeforeDelete: 5, NoContainerStarted: 6, RecreatedBeforeSeen: 7, ImagePullFailed: 8, NotSchedulable: 9, PullsUnknown: 10, RestartedBeforeSeen: 11}
	phases := map[Phase]uint8{PhaseScheduling: 0, PhaseSandbox: 1, PhaseInit: 2, PhaseContainers: 3, PhaseReadiness: 4, PhaseTotal: 5}
	for v, want := range slis {
		assert.Equal(t, want, uint8(v), "SLI %s", v)
	}
	for v, want := range reasons {
		assert.Equal(t, want, uint8(v), "Reason %s", v)
	}
	for v, want := range phases {
		assert.Equal(t, want, uint8(v), "Phase %s", v)
	}
	assert.Len(t, slis, int(numSLIs), "a new SLI gets its value here")
	assert.Len(t, reasons, int(numReasons), "a new Reason gets its value here")
	assert.Len(t, phases, int(numPhases), "a new Phase gets its value here")
}

func TestSkipSetAll(t *testing.T) {
	var m SkipSet
	want := []Skip{{SandboxCreation, NoContainerStarted}, {Readiness, TooOld}, {Stabilization, NoContainerStarted}}
	for _, s := range want {
		m = m.With(s)
	}
	assert.Equal(t, want, m.All())
	assert.Empty(t, SkipSet{}.All())
	assert.False(t, Skip{SLI: numSLIs}.Known())
	assert.False(t, Skip{Reason: numReasons}.Known())
	assert.True(t, Skip{Stabilization, NoContainerStarted}.Known())
	assert.False(t, numPhases.Known())

	// The room: the 16th SLI's 16th reason has a bit of its own, which no
	// other skip shares; a skip past the room has none.
	last := Skip{SLI: maxSLIs - 1, Reason: maxReasons - 1}
	m = SkipSet{}.With(last)
	assert.True(t, m.Has(last))
	assert.Equal(t, []Skip{last}, m.All())
	for _, s := range Skips() {
		assert.False(t, m.Has(s), "%v", s)
		assert.False(t, SkipSet{}.With(s).Has(last), "%v", s)
	}
	assert.Equal(t, SkipSet{}, SkipSet{}.With(Skip{SLI: maxSLIs}).With(Skip{Reason: maxReasons}))
	assert.True(t, SkipSet{}.Empty())
	assert.False(t, m.Empty())
}

func TestSeconds32(t *testing.T) {
	assert.Equal(t, int32(5), Seconds32(5))
	assert.Equal(t, int32(-5), Seconds32(-5))
	assert.Equal(t, int32(1<<31-1), Seconds32(1<<40), "held at the limit, not wrapped")
	assert.Equal(t, int32(-1<<31), Seconds32(-1<<40))
}
