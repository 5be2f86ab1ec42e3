package main

import (
	"reflect"
	"testing"
	"time"
)

func TestFirstFatal(t *testing.T) {
	got := firstFatal("testdata/sigbus.log")
	want := "fatal error: fault [signal SIGBUS: bus error code=0x2] in github.com/dgraph-io/badger/v4.(*logFile).zeroNextEntry"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// The stretches the exporter held its timeout check come from its log,
// under the messages of this version and of the one before; the last one
// is open: the process died holding.
func TestHeldChecks(t *testing.T) {
	ts := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, "2026-11-26T"+s+"Z")
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	got := heldChecks("testdata/held.log")
	want := []span{{From: ts("09:00:00.010"), To: ts("09:00:05.020")}, {From: ts("09:01:00.500"), To: ts("09:01:30.700")}, {From: ts("09:02:00")}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %v\nwant %v", got, want)
	}
}

// The timeline's check spans: a check may count until the process dies,
// surely counts only away from the holds it logged, and counts nothing
// from a period before a hold to its end.
func TestTimelineChecks(t *testing.T) {
	tl := buildTimeline([]instance{{N: 1, Start: at(0), Ready: at(10), Exit: at(100), Killed: true,
		Held: []span{{From: at(10), To: at(15)}, {From: at(50), To: at(60)}}}}, nil)
	for _, tc := range []struct {
		from, to    float64
		may, surely bool
	}{
		{10, 15, false, false},   // held from the start
		{15, 16, true, true},     // the check that ends a hold counts at once
		{16, 40, true, true},     // current, longer than a period
		{45.5, 60, false, false}, // the period before a hold, and the hold
		{44, 45, true, false},    // may be the last current check, not surely
		{99.5, 100, true, false}, // the second before the SIGKILL
		{100, 110, false, false}, // dead
	} {
		if got := tl.mayCheckBetween(at(tc.from), at(tc.to)); got != tc.may {
			t.Errorf("may check in [%v, %v): %v, want %v", tc.from, tc.to, got, tc.may)
		}
		if got := tl.checkedBetween(at(tc.from), at(tc.to)); got != tc.surely {
			t.Errorf("surely checked in [%v, %v): %v, want %v", tc.from, tc.to, got, tc.surely)
		}
	}
}
