package main

import (
	"slices"
	"time"
)

// span is a half-open time interval [From, To); a zero To is open-ended.
type span struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to,omitzero"`
}

func (s span) end() time.Time {
	if s.To.IsZero() {
		return time.Unix(1<<40, 0)
	}
	return s.To
}

// overlaps reports whether [a, b] meets s.
func (s span) overlaps(a, b time.Time) bool { return !b.Before(s.From) && a.Before(s.end()) }

// within reports whether [a, b] lies inside s.
func (s span) within(a, b time.Time) bool { return !a.Before(s.From) && b.Before(s.end()) }

// timeline is what the exporter could see, built from the supervisor's
// record of its processes and from the outage. The ground truth asks it,
// for each state a pod went through, whether the exporter surely saw it,
// surely did not, or may have.
type timeline struct {
	// Watching: the exporter had synced (/readyz) and its pod watch was
	// live, up to processingMargin before the process died.
	Watching []span `json:"watching"`
	// Blind: no exporter process ran, or kube-apiserver was down.
	Blind []span `json:"blind"`
	// Snapshots: the exporter listed the pods somewhere within each span
	// (between a process start and its /readyz, or between the API
	// server's return and the first sign that the exporter watches again):
	// a state that lasted the whole span was in the list.
	Snapshots []span `json:"snapshots"`
	// Lists are the Snapshots in which a new exporter process listed the
	// pods (its start to its /readyz); an outage's snapshot may be a
	// resumed watch instead.
	Lists []span `json:"lists"`
	// Checking: the exporter surely ran its timeout check every
	// checkInterval with its watches current: from /readyz to its death,
	// less the stretches it logged holding the check (the watches not
	// current) and the outages.
	Checking []span `json:"checking"`
	// MayCheck: a timeout check may have counted a pod: from /readyz to
	// the process's exit, less the stretches in which it surely held.
	MayCheck []span `json:"mayCheck"`
}

// processingMargin is how long before a SIGKILL an event may have arrived
// without being handled; checkInterval the exporter's timeout check period.
const (
	processingMargin = time.Second
	checkInterval    = 5 * time.Second
)

// seen reports whether a state that held from a to b (inclusive) was surely
// seen by the exporter.
func (t *timeline) seen(a, b time.Time) bool {
	for _, s := range t.Watching {
		if s.overlaps(a, b) {
			return true
		}
	}
	for _, s := range t.Snapshots {
		if !s.From.Before(a) && !b.Before(s.end()) {
			return true
		}
	}
	return false
}

// watchedAt reports whether a change made at at reached the exporter as a
// watch event: its watch was live then.
func (t *timeline) watchedAt(at time.Time) bool {
	for _, s := range t.Watching {
		if s.overlaps(at, at) {
			return true
		}
	}
	return false
}

// surelyListed reports whether a change made at at, while no watch was
// live, can have reached the exporter only by a new process's list: the
// first span after it in which the exporter could see anything is one.
func (t *timeline) surelyListed(at time.Time) bool {
	var first time.Time
	listed := false
	consider := func(spans []span, isList bool) {
		for _, s := range spans {
			if !s.To.IsZero() && !s.To.After(at) {
				continue
			}
			from := s.From
			if from.Before(at) {
				from = at
			}
			if first.IsZero() || from.Before(first) || (from.Equal(first) && !isList) {
				first, listed = from, isList
			}
		}
	}
	consider(t.Lists, true)
	consider(t.Watching, false)
	// An outage's snapshots only: the Lists are among the Snapshots too.
	consider(slices.DeleteFunc(slices.Clone(t.Snapshots), func(s span) bool { return slices.Contains(t.Lists, s) }), false)
	return listed
}

// unseen reports whether a state that held from a to b was surely never
// seen: it began and ended within one blind span.
func (t *timeline) unseen(a, b time.Time) bool {
	for _, s := range t.Blind {
		if s.within(a, b) {
			return true
		}
	}
	return false
}

// visibility of one state.
type visibility int

const (
	visSeen visibility = iota
	visUnseen
	visUncertain
)

func (t *timeline) visibility(a, b time.Time) visibility {
	switch {
	case t.seen(a, b):
		return visSeen
	case t.unseen(a, b):
		return visUnseen
	}
	return visUncertain
}

// checkedBetween reports whether a timeout check surely ran at some instant
// in [a, b): the exporter was checking over a stretch of it longer than the
// check period, or became ready (and checked at once) inside it.
func (t *timeline) checkedBetween(a, b time.Time) bool {
	for _, s := range t.Checking {
		from, to := maxTime(s.From, a), minTime(s.end(), b)
		if !to.After(from) {
			continue
		}
		if !s.From.Before(a) || to.Sub(from) > checkInterval+processingMargin {
			return true
		}
	}
	return false
}

// mayCheckBetween reports whether a timeout check may have counted a pod
// in [a, b).
func (t *timeline) mayCheckBetween(a, b time.Time) bool {
	if !a.Before(b) {
		return false
	}
	for _, s := range t.MayCheck {
		if s.From.Before(b) && a.Before(s.end()) {
			return true
		}
	}
	return false
}

// seenBy is the earliest time by which the exporter surely knew of a change
// made at at: at once if it was watching then, else by the end of the
// snapshot under way or the next one. It is the far future if nothing
// surely saw it.
func (t *timeline) seenBy(at time.Time) time.Time {
	for _, s := range t.Watching {
		if !at.Before(s.From) && at.Before(s.end()) {
			return at.Add(processingMargin)
		}
	}
	// A change during a snapshot span is in the list, or comes on the
	// watch that follows it; a change before one is in its list.
	best := time.Unix(1<<40, 0)
	for _, s := range t.Snapshots {
		if s.end().Before(at) {
			continue
		}
		by := s.end()
		if !at.Before(s.From) {
			by = by.Add(processingMargin)
		}
		if by.Before(best) {
			best = by
		}
	}
	return best
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// instance is one exporter process, as the supervisor saw it.
type instance struct {
	N     int       `json:"n"`
	Start time.Time `json:"start"`
	// Ready is the first 200 from /readyz; zero if it never came.
	Ready time.Time `json:"ready,omitzero"`
	// Exit is when the process ended; zero if it still runs.
	Exit time.Time `json:"exit,omitzero"`
	// Killed: the run SIGKILLed it; otherwise it exited by itself (a
	// crash) or was stopped at the end.
	Killed bool   `json:"killed,omitempty"`
	Status string `json:"status,omitempty"` // how it exited
	// Fatal is the first line of a Go fatal error or panic in its log.
	Fatal string `json:"fatal,omitempty"`
	// Held are the stretches its log shows the timeout check holding,
	// from "Holding sandbox creation timeouts" to "... current again"
	// (open while it never said so).
	Held []span `json:"held,omitempty"`
}

// outage is kube-apiserver's stop, as the run made it.
type outageRecord struct {
	// Stopping is when the stop began, Stop when kube-apiserver was gone:
	// an exporter may notice the server going before the stop returns.
	Stopping time.Time `json:"stopping"`
	Stop     time.Time `json:"stop"`
	// APIReady is the first /readyz of the new kube-apiserver.
	APIReady time.Time `json:"apiReady"`
	// WatchBack is when the exporter first handled a pod event after
	// the API server's return: its pod watch was live again by then.
	WatchBack time.Time `json:"watchBack"`
	// StaleWatch is what a watch of the pods from the last resource
	// version before the stop got from the new API server: "410 Gone"
	// when the compaction (and the new watch cache) make every watcher
	// relist.
	StaleWatch string `json:"staleWatch"`
	// EventsAtReturn is how many pod events the exporter handled from
	// the API server's return to 5 s after WatchBack, and LivePods how
	// many pods existed then: a relist handles every pod again.
	EventsAtReturn float64 `json:"eventsAtReturn"`
	LivePods       int     `json:"livePods"`
	// Unreachable and Reachable are the times of the exporter's first
	// "API server unreachable" and "API server reachable again" log lines
	// after the stop; zero if it logged none.
	Unreachable time.Time `json:"unreachable"`
	Reachable   time.Time `json:"reachable"`
}

// buildTimeline derives what the exporter could see from its processes and
// the outages.
func buildTimeline(insts []instance, outages []outageRecord) *timeline {
	t := &timeline{}
	var prevExit time.Time
	for i, in := range insts {
		if i == 0 {
			t.Blind = append(t.Blind, span{From: time.Unix(0, 0), To: in.Start})
		} else if !prevExit.IsZero() {
			t.Blind = append(t.Blind, span{From: prevExit, To: in.Start})
		}
		prevExit = in.Exit
		if in.Ready.IsZero() {
			continue
		}
		t.Snapshots = append(t.Snapshots, span{From: in.Start, To: in.Ready})
		t.Lists = append(t.Lists, span{From: in.Start, To: in.Ready})
		// A check counts until the SIGKILL; none counts from the check
		// after the last current one (at most a period before the hold was
		// logged) until the log says the watches are current again, and
		// the check that says so counts at once.
		var notCounting, notSure []span
		for _, h := range in.Held {
			notCounting = append(notCounting, span{From: h.From.Add(-checkInterval), To: h.To})
			notSure = append(notSure, span{From: h.From.Add(-checkInterval - processingMargin), To: h.To})
		}
		t.MayCheck = append(t.MayCheck, cut([]span{{From: in.Ready, To: in.Exit}}, notCounting)...)
		watch := span{From: in.Ready}
		if !in.Exit.IsZero() {
			watch.To = in.Exit.Add(-processingMargin)
			if !watch.To.After(watch.From) {
				continue
			}
		}
		t.Checking = append(t.Checking, cut(subtract(watch, outages), notSure)...)
		t.Watching = append(t.Watching, subtract(watch, outages)...)
	}
	for _, o := range outages {
		t.Blind = append(t.Blind, span{From: o.Stop, To: o.APIReady})
		t.Snapshots = append(t.Snapshots, span{From: o.APIReady, To: o.WatchBack})
	}
	return t
}

// cut removes the spans holes from the spans ws.
func cut(ws []span, holes []span) []span {
	out := ws
	for _, h := range holes {
		var next []span
		for _, s := range out {
			if !h.overlaps(s.From, s.end()) {
				next = append(next, s)
				continue
			}
			if s.From.Before(h.From) {
				next = append(next, span{From: s.From, To: h.From})
			}
			if h.end().Before(s.end()) {
				next = append(next, span{From: h.end(), To: s.To})
			}
		}
		out = next
	}
	return out
}

// subtract removes from w each outage's stretch during which the exporter's
// watch may have been down: from processingMargin before the stop to the
// proof that it watches again.
func subtract(w span, outages []outageRecord) []span {
	holes := make([]span, 0, len(outages))
	for _, o := range outages {
		holes = append(holes, span{From: o.Stop.Add(-processingMargin), To: o.WatchBack})
	}
	return cut([]span{w}, holes)
}
