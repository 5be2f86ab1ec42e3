package slostatus

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/podslo/podslo/alerts"
	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/sli"
	"github.com/podslo/podslo/store"
)

// BenchmarkFromStoreMonth is one read of the SLO view (the landing page,
// /api/v1/slos) after 30 days of 10k pods replaced daily over 3 × 3
// classes: the store's read lock is held while it reads the slots, so it
// is also how long writes wait behind a page view.
func BenchmarkFromStoreMonth(b *testing.B) {
	start := time.Date(2026, 10, 30, 0, 0, 0, 0, time.UTC)
	c := &clock{t: start}
	spec, err := alerts.Default()
	if err != nil {
		b.Fatal(err)
	}
	ev, err := New(spec, nil)
	if err != nil {
		b.Fatal(err)
	}
	st, err := store.Open(store.Options{Dir: store.InMemory, Now: c.now, WindowFamilies: ev.Families()})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	rng := rand.New(rand.NewPCG(1, 2))
	runtimes, storages := []string{"none", "runc", "kata"}, []string{"none", "fast", "slow"}
	families := []string{creation, sli.MustByStore("termination").ID(nil), sli.MustByStore("readiness").ID(nil)}
	for step := range 30 * 24 * 12 {
		c.t = start.Add(time.Duration(step) * store.FineSlot)
		change := store.Change{UID: "bench", State: lifecycle.State{FirstSandboxReady: int64(step + 1)}}
		for range 35 {
			labels := []string{runtimes[rng.IntN(3)], storages[rng.IntN(3)]}
			for _, f := range families {
				change.Observe = append(change.Observe, store.Sample{Family: f, Labels: labels, Value: 2 * math.Exp(rng.NormFloat64())})
			}
		}
		if err := st.Apply(change); err != nil {
			b.Fatal(err)
		}
		if step%12 == 11 {
			if err := st.CompactWindows(c.t); err != nil {
				b.Fatal(err)
			}
		}
	}
	now := c.t
	b.ResetTimer()
	for range b.N {
		rep := ev.FromStore(st, now, Source{})
		if len(rep.SLOs) == 0 {
			b.Fatal("no SLO")
		}
	}
}
