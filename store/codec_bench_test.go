package store

import (
	"testing"

	"github.com/podslo/podslo/lifecycle"
)

// benchState is a pod's state as the exporter writes it for a started
// pod with one skip: fullState, the record every transition writes.
func benchState() lifecycle.State {
	s := fullState()
	s.Skipped = s.Skipped.With(lifecycle.Skip{SLI: lifecycle.Termination, Reason: lifecycle.Vanished})
	return s
}

// BenchmarkEncodeState is the pod record's share of a transition's write.
func BenchmarkEncodeState(b *testing.B) {
	s := benchState()
	b.ReportAllocs()
	for range b.N {
		if len(encodeState(s)) == 0 {
			b.Fatal("empty record")
		}
	}
}

// BenchmarkLoadPodRecord is a pod record's share of a start-up's load:
// decoded into the pod the store keeps (loadRecord).
func BenchmarkLoadPodRecord(b *testing.B) {
	s := benchState()
	rec := encodeState(s)
	b.ReportAllocs()
	for range b.N {
		p := &pod{}
		if err := decodeStateInto(rec, &p.state); err != nil || p.state != s {
			b.Fatalf("decoded %+v, %v", p.state, err)
		}
	}
}
