package store

import "sync/atomic"

// Op is a kind of store operation, as counted in Stats.
type Op int

const (
	OpApply Op = iota
	OpLoad
	OpGC
	numOps
)

func (o Op) String() string {
	return [...]string{"apply", "load", "gc"}[o]
}

// Ops lists every Op, for exposition.
var Ops = []Op{OpApply, OpLoad, OpGC}

// Stats counts what the store did since Open.
type Stats struct {
	ok, failed [numOps]atomic.Uint64
	// Recoveries counts corrupt state directories moved aside at Open.
	Recoveries atomic.Uint64
}

func (s *Stats) count(op Op, ok bool) {
	if ok {
		s.ok[op].Add(1)
	} else {
		s.failed[op].Add(1)
	}
}

// Succeeded returns the number of successful operations of a kind.
func (s *Stats) Succeeded(op Op) uint64 { return s.ok[op].Load() }

// Failed returns the number of failed operations of a kind.
func (s *Stats) Failed(op Op) uint64 { return s.failed[op].Load() }

// Stats returns the store's counters.
func (s *Store) Stats() *Stats { return &s.stats }
