package main

import (
	"strings"
	"testing"
)

// The per-pod start-up may lie above its whole seconds' room by as much as
// the run's own watch received its update late, and a second more, not
// beyond.
func TestPerPodStartupMayComeAsLateAsTheWatch(t *testing.T) {
	startup := 2.688
	for _, tc := range []struct {
		got  float64
		seen float64
		ok   bool
	}{
		{got: 3.9, seen: 2.9, ok: true},  // within watchSpread
		{got: 4.4, seen: 3.9, ok: true},  // late, as the run's watch was
		{got: 4.4, seen: 2.9, ok: false}, // later than the run's watch allows
		{got: 1.0, seen: 2.9, ok: false}, // early
	} {
		fin := podFinal{Alive: true, Startup: &startup, StartupSeen: tc.seen}
		got := &exposition{PerPod: map[string]map[string]float64{"u1": {mPodStartup: tc.got}}}
		pc := checkPods(map[string]*podVerdict{"u1": {Final: fin}}, map[string]string{"u1": "ns/p"}, got)
		wrong := strings.Join(pc.Wrong, "; ")
		if ok := !strings.Contains(wrong, mPodStartup); ok != tc.ok {
			t.Errorf("start-up %v with the run's watch at %v: ok %v, want %v (%s)", tc.got, tc.seen, ok, tc.ok, wrong)
		}
	}
}
