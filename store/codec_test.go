package store

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podslo/podslo/lifecycle"
)

func TestStateRoundTrip(t *testing.T) {
	full := lifecycle.State{
		Scheduled: 1700000000, FirstSandboxReady: 1700000003, LastSandboxReady: 1700007200, SandboxCreation: 3, HasSandboxCreation: true,
		Recreations: 2, TimedOut: true, UserError: true, Excluded: true,
		DeletionRequested: 1700009000, Termination: 12, HasTermination: true, TerminationDone: true,
		FirstReady: 1700000010, Readiness: 4, HasReadiness: true,
		FirstStable: 1700000040, Stabilization: 30, HasStabilization: true, StableSeen: true, Stable: true, StabilityLost: 1700005000, StabilityLosses: 3,
		Phases:  lifecycle.PhaseSet(0).With(lifecycle.PhaseSandbox).With(lifecycle.PhaseTotal),
		Skipped: lifecycle.SkipSet(0).With(lifecycle.Skip{SLI: lifecycle.Termination, Reason: lifecycle.Vanished}).With(lifecycle.Skip{SLI: lifecycle.Stabilization, Reason: lifecycle.NoContainerStarted}),
	}
	for _, st := range []lifecycle.State{
		{},
		full,
		// Ready without PodScheduled: times before and equal to the base.
		{FirstSandboxReady: 1700000000, LastSandboxReady: 1700000000},
		{Scheduled: 1700000000, FirstSandboxReady: 1700000000, LastSandboxReady: 1699999990},
	} {
		b := encodeState(st)
		got, err := decodeState(b)
		require.NoError(t, err)
		assert.Equal(t, st, got)
	}
	assert.LessOrEqual(t, len(encodeState(full)), 48, "a full record stays small")
}

func TestDecodeRejectsTruncatedAndTrailing(t *testing.T) {
	b := encodeState(lifecycle.State{Scheduled: 1700000000, FirstSandboxReady: 1700000003})
	for i := range b {
		_, err := decodeState(b[:i])
		assert.ErrorIs(t, err, errDecode, "truncated at %d", i)
	}
	_, err := decodeState(append(b, 0))
	assert.ErrorIs(t, err, errDecode, "trailing byte")
}
