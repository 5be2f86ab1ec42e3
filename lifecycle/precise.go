package lifecycle

import "time"

// Condition times have one-second precision, which cannot tell a 100 ms
// sandbox from a 900 ms one. While podslo's pod watch is current (open,
// settled, no list in flight), the update that first shows a transition
// reaches podslo within the watch's delay of it, so its receive time
// (Pod.Received) is the transition's time to the millisecond, on one clock,
// podslo's. An SLI whose two ends both have such a time is measured in
// milliseconds; any other in seconds, as before (Observation.Precise).

// DefaultWatchTolerance is the default of Config.WatchTolerance.
const DefaultWatchTolerance = 250 * time.Millisecond

// maxWatchTolerance keeps every Precise offset within an int16.
const maxWatchTolerance = 999 * time.Millisecond

// Precise is a transition's watch receive time, in milliseconds from the
// start of the transition's one-second time, plus preciseBias so that the
// zero value means "known to the second only". The receive time may lie
// before that second (the kubelet's clock ahead of podslo's) or after it
// (the watch's delay), by up to the watch tolerance, so the offset may be
// negative or over 1000. An int16 offset, not a Unix time in milliseconds:
// the state of 100k pods is held in memory, and three int64s would move
// every pod's record into a larger allocation class.
type Precise int16

// preciseBias is more than the largest tolerance, so that every valid
// offset plus it is positive.
const preciseBias = 1000

// At is the receive time in Unix milliseconds, given the transition's
// time in Unix seconds; false when it is known to the second only.
func (p Precise) At(second int64) (int64, bool) {
	if p == 0 {
		return 0, false
	}
	return second*1000 + int64(p) - preciseBias, true
}

// precise is the receive time of the pod's update as the time of a
// transition at second, when it can be: the watch was current when it
// arrived (Received is set) and it lies within second, give or take the
// tolerance. Otherwise the update is not when the transition happened (it
// came from a list, or is a later update of a pod whose transition podslo
// saw earlier or never), and 0 says the transition is known to the second.
func (c *stepper) precise(second int64) Precise {
	r := c.pod.Received
	if r == 0 || second == 0 {
		return 0
	}
	tol := c.cfg.watchTolerance().Milliseconds()
	offset := r - second*1000
	if offset < -tol || offset >= 1000+tol {
		return 0
	}
	return Precise(offset + preciseBias)
}

func (c *Config) watchTolerance() time.Duration {
	if c.WatchTolerance <= 0 {
		return DefaultWatchTolerance
	}
	return min(c.WatchTolerance, maxWatchTolerance)
}

// span is one end of a measurement: its time in Unix seconds, and its
// receive time in milliseconds when precise.
type span struct {
	start, end           int64
	startMs, endMs       int64
	startExact, endExact bool
}

// between is a measurement from start to end, in seconds, with the
// receive times of each end where they are precise.
func between(start int64, ps Precise, end int64, pe Precise) span {
	s := span{start: start, end: end}
	s.startMs, s.startExact = ps.At(start)
	s.endMs, s.endExact = pe.At(end)
	return s
}

// millis is the measured duration in milliseconds: exact when both ends
// are precise and in order (true), else whole seconds.
func (s span) millis() (int64, bool) {
	if s.startExact && s.endExact && s.endMs >= s.startMs {
		return s.endMs - s.startMs, true
	}
	return (s.end - s.start) * 1000, false
}
