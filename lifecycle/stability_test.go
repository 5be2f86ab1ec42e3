package lifecycle

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

const stableT = DefaultStableConditionType

func TestStability(t *testing.T) {
	sched := cond(t, scheduled, T, "2024-05-01T10:00:00Z")
	sandbox := cond(t, ready, T, "2024-05-01T10:00:01Z")
	readyAt := cond(t, podReady, T, "2024-05-01T10:00:05Z")
	tests := []struct {
		name      string
		at        []string
		pods      [][]Condition
		stabilize []float64
		lost      int
		skips     []Skip
		stable    bool
		seen      bool
	}{
		{
			name: "stable 30s after Ready (minReadySeconds 30)",
			at:   []string{"2024-05-01T10:00:06Z", "2024-05-01T10:00:36Z"},
			pods: [][]Condition{
				{sched, sandbox, readyAt, cond(t, stableT, F, "2024-05-01T10:00:05Z")},
				{sched, sandbox, readyAt, cond(t, stableT, T, "2024-05-01T10:00:35Z")},
			},
			stabilize: []float64{30},
			stable:    true, seen: true,
		},
		{
			name: "lost twice, the second while podslo missed the True in between",
			at:   []string{"2024-05-01T10:00:36Z", "2024-05-01T10:05:00Z", "2024-05-01T10:05:01Z", "2024-05-01T10:20:00Z"},
			pods: [][]Condition{
				{sched, sandbox, readyAt, cond(t, stableT, T, "2024-05-01T10:00:35Z")},
				{sched, sandbox, readyAt, cond(t, stableT, F, "2024-05-01T10:04:59Z")},
				{sched, sandbox, readyAt, cond(t, stableT, F, "2024-05-01T10:04:59Z")},
				{sched, sandbox, readyAt, cond(t, stableT, F, "2024-05-01T10:19:00Z")},
			},
			stabilize: []float64{30},
			lost:      2,
			seen:      true,
		},
		{
			name: "lost in the same second it became stable",
			at:   []string{"2024-05-01T10:00:36Z", "2024-05-01T10:00:36Z", "2024-05-01T10:00:37Z"},
			pods: [][]Condition{
				{sched, sandbox, readyAt, cond(t, stableT, T, "2024-05-01T10:00:35Z")},
				{sched, sandbox, readyAt, cond(t, stableT, F, "2024-05-01T10:00:35Z")},
				{sched, sandbox, readyAt, cond(t, stableT, F, "2024-05-01T10:00:35Z")},
			},
			stabilize: []float64{30},
			lost:      1,
			seen:      true,
		},
		{
			name: "False before ever being stable is not a loss",
			at:   []string{"2024-05-01T10:00:06Z", "2024-05-01T10:00:20Z"},
			pods: [][]Condition{
				{sched, sandbox, readyAt, cond(t, stableT, F, "2024-05-01T10:00:05Z")},
				{sched, sandbox, readyAt, cond(t, stableT, F, "2024-05-01T10:00:19Z")},
			},
			seen: true,
		},
		{
			name:   "Stable before Ready by the clocks",
			at:     []string{"2024-05-01T10:00:06Z"},
			pods:   [][]Condition{{sched, sandbox, readyAt, cond(t, stableT, T, "2024-05-01T10:00:04Z")}},
			skips:  []Skip{{Stabilization, NegativeDuration}},
			stable: true, seen: true,
		},
		{
			name: "no agent on the node: nothing",
			at:   []string{"2024-05-01T10:00:06Z"},
			pods: [][]Condition{{sched, sandbox, readyAt}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var (
				st        State
				stabilize []float64
				lost      int
				skips     []Skip
			)
			for i, conds := range tt.pods {
				p := podWith(conds...)
				p.ContainersStarted = ts(t, "2024-05-01T10:00:03Z").Unix()
				next, out := Step(ts(t, tt.at[i]), p, Inputs{}, st, &Config{})
				for _, o := range out.Observations {
					switch o.Kind {
					case Stabilized:
						stabilize = append(stabilize, o.Seconds)
					case StabilityLost:
						lost++
					}
				}
				for _, s := range out.Skips {
					if s.SLI == Stabilization {
						skips = append(skips, s)
					}
				}
				st = next
			}
			assert.Equal(t, tt.stabilize, stabilize)
			assert.Equal(t, tt.lost, lost)
			assert.Equal(t, tt.skips, skips)
			assert.Equal(t, tt.stable, st.Stable)
			assert.Equal(t, tt.seen, st.StableSeen)
			assert.Equal(t, uint32(tt.lost), st.StabilityLosses)
		})
	}
}
