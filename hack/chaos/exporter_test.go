package main

import "testing"

func TestFirstFatal(t *testing.T) {
	got := firstFatal("testdata/sigbus.log")
	want := "fatal error: fault [signal SIGBUS: bus error code=0x2] in github.com/dgraph-io/badger/v4.(*logFile).zeroNextEntry"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}
