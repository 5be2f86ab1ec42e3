package realnode_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
)

// TestTerminationsOnARealNode deletes pods the ways a cluster does and
// compares podslo's termination SLI with what the pods show: a container
// that exits on SIGTERM, one whose preStop hook takes 2 s, one that ignores it and is SIGKILLed by the
// kubelet at the end of a short grace (issue 26, defect 2), one deleted a
// second time with a shorter grace, and a force deletion.
func TestTerminationsOnARealNode(t *testing.T) {
	began := time.Now()
	s := startSuite(t)
	url := s.startExporter(t.TempDir())
	uids := map[string]types.UID{
		"prompt":    s.createPod("prompt").UID,
		"prestop":   s.createPod("prestop", withPreStop(2*time.Second)).UID,
		"shortened": s.createPod("shortened", ignoringSIGTERM(10)).UID,
		"forced":    s.createPod("forced").UID,
	}
	var killed []string
	killBatch := func(batch int) []string {
		var names []string
		for i := range 3 {
			name := fmt.Sprintf("killed-%d-%d", batch, i)
			uids[name] = s.createPod(name, ignoringSIGTERM(2)).UID
			names = append(names, name)
		}
		killed = append(killed, names...)
		return names
	}
	// A pod that ignores SIGTERM is killed, and its sandbox goes, in the
	// second of its deletionTimestamp when the kubelet kills it before that
	// second ends: the case one-second condition times cannot put after
	// deletionTimestamp (defect 2). The kubelet's SIGKILL came 2 to 4 s
	// after the request, varying from pod to pod, and between none and
	// three of three pods deleted at the start, a third and two thirds into
	// a second met that case. So batches of three are deleted until one did.
	deleteBatch := func(names []string) {
		for i, name := range names {
			from := time.Duration(i) * time.Second / time.Duration(len(names))
			require.Eventually(t, func() bool {
				ns := time.Duration(time.Now().Nanosecond())
				return ns >= from && ns < from+50*time.Millisecond
			}, 2*time.Second, time.Millisecond)
			s.deletePod(name, 2)
		}
	}
	waitRemoved := func(names ...string) {
		if !assertEventually(t, func() bool {
			for _, name := range names {
				if !s.tr.get(uids[name]).deleted {
					return false
				}
			}
			return true
		}, time.Minute) {
			t.Fatalf("not every pod of %v was removed", names)
		}
	}
	sameSecond := func() (n int) {
		for _, name := range killed {
			if p := s.tr.get(uids[name]); !p.sandboxGone.IsZero() && p.sandboxGone.Equal(p.deadline) {
				n++
			}
		}
		return n
	}

	batch := killBatch(0)
	var all []string
	for name := range uids {
		all = append(all, name)
	}
	var allUIDs []types.UID
	for _, uid := range uids {
		allUIDs = append(allUIDs, uid)
	}
	s.waitRunning(allUIDs...)

	deleteBatch(batch)
	s.deletePod("prompt", 30)
	s.deletePod("prestop", 30)
	s.deletePod("shortened", 10)
	s.deletePod("forced", 0)
	// The second delete must fall in a later second than the first, or
	// the kept first request could not be told from the second.
	first := time.Now()
	require.Eventually(t, func() bool { return !s.tr.get(uids["shortened"]).requested.IsZero() }, 10*time.Second, 10*time.Millisecond)
	require.Eventually(t, func() bool { return time.Now().After(first.Add(1500 * time.Millisecond)) }, 3*time.Second, 10*time.Millisecond)
	s.deletePod("shortened", 2)
	// The kubelet removes each pod once its sandbox is gone.
	waitRemoved(all...)
	for b := 1; b < 5 && sameSecond() == 0; b++ {
		batch := killBatch(b)
		var batchUIDs []types.UID
		for _, name := range batch {
			batchUIDs = append(batchUIDs, uids[name])
		}
		s.waitRunning(batchUIDs...)
		deleteBatch(batch)
		waitRemoved(batch...)
	}

	// The truth: the termination of each pod whose sandbox False the watch
	// saw, from the first request; over grace when the sandbox went away
	// after the first request's grace period, which the kubelet keeps
	// (the shortened pod: killed at the first grace's end), or a container
	// was SIGKILLed.
	var (
		count, overGrace, vanished int
		sum, sumMs                 float64
	)
	for name, uid := range uids {
		p := s.tr.get(uid)
		t.Logf("%s: requested %s, grace until %s, sandbox False %s, SIGKILLed %v at %s", name, p.requested.Format(time.TimeOnly),
			p.deadline.Format(time.TimeOnly), p.sandboxGone.Format(time.TimeOnly), p.killed, p.finished.Format(time.TimeOnly))
		if p.sandboxGone.IsZero() {
			vanished++
			continue
		}
		count++
		sum += p.sandboxGone.Sub(p.requested).Seconds()
		d, ok := p.between(seenRequested, seenGone)
		require.True(t, ok, name)
		sumMs += d
		if p.sandboxGone.After(p.deadline) || p.killed {
			overGrace++
		}
	}
	// What the pods were built to do.
	assert.Equal(t, len(uids)-1, count, "terminations the watch saw")
	assert.Equal(t, 1, vanished, "the force-deleted pod shows no sandbox False")
	prestop := s.tr.get(uids["prestop"])
	assert.GreaterOrEqual(t, prestop.sandboxGone.Sub(prestop.requested), time.Second, "the preStop hook did not delay the termination")
	assert.Equal(t, len(killed)+1, overGrace, "pods SIGKILLed at the end of their grace")
	for _, name := range append(killed, "shortened") {
		assert.True(t, s.tr.get(uids[name]).killed, "%s: no exit code 137", name)
	}
	// Defect 2's case: the sandbox's False in the second of the
	// deletionTimestamp. The kubelet 1.36 with containerd 1.6 met it for 29
	// of 40 such pods; the kubelet 1.37 with containerd 2 kills later
	// (docs/compatibility.md), so it may not occur here: the unit tests of
	// lifecycle hold it, and this test records how late the kills came.
	var late []string
	for _, name := range killed {
		p := s.tr.get(uids[name])
		late = append(late, p.sandboxGone.Sub(p.deadline).Round(time.Millisecond).String())
	}
	t.Logf("SIGKILLed pods whose sandbox went in their deletionTimestamp's second: %d of %d; sandbox False after the deletionTimestamp by %s",
		sameSecond(), len(killed), strings.Join(late, ", "))

	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		fams := scrape(ct, url)
		gotCount, gotSum := histogramTotal(fams["podslo_termination_duration_seconds"])
		assert.Equal(ct, uint64(count), gotCount, "terminations")
		// In milliseconds: podslo's watch was current for every end.
		assert.InDelta(ct, sumMs, gotSum, msTolerance*float64(count), "termination seconds")
		precision := counterBy(fams["podslo_observations_total"], "sli", "precision")
		assert.Equal(ct, float64(count), precision["termination,millisecond"])
		assert.Zero(ct, precision["termination,second"])
		assert.Equal(ct, float64(overGrace), counterTotal(fams["podslo_terminations_over_grace_total"]), "over grace")
		skipped := counterBy(fams["podslo_observations_skipped_total"], "sli", "reason")
		assert.Equal(ct, map[string]float64{"termination,vanished": float64(vanished)}, only(skipped, "termination,"))
	}, 30*time.Second, 100*time.Millisecond, "podslo's terminations differ from the pods'")
	t.Logf("terminations, the truth: count %d, sum %v s (%.3f s by the test's watch), over grace %d, vanished %d; test body done after %v",
		count, sum, sumMs, overGrace, vanished, time.Since(began).Round(time.Millisecond))
}

// only keeps the entries whose key starts with prefix.
func only(m map[string]float64, prefix string) map[string]float64 {
	out := map[string]float64{}
	for k, v := range m {
		if len(k) >= len(prefix) && k[:len(prefix)] == prefix {
			out[k] = v
		}
	}
	return out
}
