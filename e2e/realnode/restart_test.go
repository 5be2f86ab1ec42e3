package realnode_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podslo/podslo/internal/testenv"
)

// TestExporterSIGKILLedOnARealNode kills podslo's exporter process without
// warning while pods start, and starts it again on the same state while
// the kubelet re-creates a sandbox and removes a pod: nothing observed is
// lost or counted twice, and the sandboxes podslo counts are the ones the
// kubelet ran.
func TestExporterSIGKILLedOnARealNode(t *testing.T) {
	bin := testenv.PodsloBinary(t)
	began := time.Now()
	s := startSuite(t)
	state := t.TempDir()
	args := []string{"--kubeconfig", s.node.Kubeconfig, "--state-dir", state, "--watch-time-tolerance", watchTolerance.String()}
	first := testenv.StartExporterProcess(t, bin, args...)
	waitCurrent(t, first.URL)

	uids := map[string]types.UID{}
	for _, name := range []string{"before-0", "before-1"} {
		uids[name] = s.createPod(name).UID
	}
	s.waitRunning(uids["before-0"], uids["before-1"])
	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		count, _ := histogramTotal(scrape(ct, first.URL)["podslo_sandbox_creation_duration_seconds"])
		assert.Equal(ct, uint64(2), count)
	}, 30*time.Second, 100*time.Millisecond, "podslo never saw the first pods' sandboxes")

	// Killed mid-way: while two more pods start.
	for _, name := range []string{"during-0", "during-1"} {
		uids[name] = s.createPod(name).UID
	}
	s.tr.act("", "SIGKILL podslo")
	first.Kill(t)
	// While it is down: a sandbox is re-created and a pod is removed.
	s.waitRunning(uids["during-0"], uids["during-1"])
	s.killSandbox(uids["before-0"])
	s.deletePod("before-1", 30)
	require.Eventually(t, func() bool { return s.tr.get(uids["before-1"]).deleted }, time.Minute, 100*time.Millisecond)

	count, sum, recreations, ready := s.tr.creations()
	require.Equal(t, len(uids), ready)
	require.Equal(t, map[string]int{"none": 1}, recreations)
	// podslo saw the first pods' ends while current: milliseconds. The
	// others' sandboxes became ready while it was down, and it saw them
	// in the restarted exporter's list: whole seconds.
	want := 0.0
	for name, uid := range uids {
		p := s.tr.get(uid)
		if strings.HasPrefix(name, "before-") {
			d, ok := p.between(seenScheduled, seenSandboxReady)
			require.True(t, ok, name)
			want += d
		} else {
			want += p.sandboxReady[0].Sub(p.scheduled).Seconds()
		}
	}
	check := func(t *testing.T, url string) {
		// Ready means every live pod was handled and a deleted one's state
		// dropped: exact now, not eventually.
		fams := scrape(t, url)
		gotCount, gotSum := histogramByClass(fams["podslo_sandbox_creation_duration_seconds"])
		assert.Equal(t, count, gotCount, "creations")
		assert.InDelta(t, want, gotSum["none"], 2*msTolerance, "creation seconds")
		precision := counterBy(fams["podslo_observations_total"], "sli", "precision")
		assert.Equal(t, map[string]float64{"sandbox_creation,millisecond": 2, "sandbox_creation,second": 2}, only(precision, "sandbox_creation,"))
		assert.Equal(t, map[string]float64{"none": 1}, counterByClass(fams["podslo_sandbox_recreations_total"]), "re-creations")
		assert.Zero(t, counterTotal(fams["podslo_sandbox_creation_timeouts_total"]), "timeouts")
		// The pod removed while podslo was down: its termination could not
		// be seen.
		skipped := counterBy(fams["podslo_observations_skipped_total"], "sli", "reason")
		assert.Equal(t, map[string]float64{"termination,vanished": 1}, only(skipped, "termination,"), "skips %v", skipped)
		terminations, _ := histogramTotal(fams["podslo_termination_duration_seconds"])
		assert.Zero(t, terminations, "terminations")
		// Every sandbox the kubelet ran is a creation or a re-creation.
		assert.Equal(t, gotCount["none"]+1, kubeletSandboxRuns(t, s.node), "the kubelet's run_podsandbox")
	}
	for run := 2; run <= 3; run++ {
		t.Run(fmt.Sprintf("run %d", run), func(t *testing.T) {
			p := testenv.StartExporterProcess(t, bin, args...)
			check(t, p.URL)
			s.tr.act("", "SIGKILL podslo")
			p.Kill(t)
		})
	}

	// And it goes on counting.
	last := testenv.StartExporterProcess(t, bin, args...)
	s.killSandbox(uids["during-0"])
	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		fams := scrape(ct, last.URL)
		assert.Equal(ct, map[string]float64{"none": 2}, counterByClass(fams["podslo_sandbox_recreations_total"]))
		gotCount, _ := histogramByClass(fams["podslo_sandbox_creation_duration_seconds"])
		assert.Equal(ct, count, gotCount)
		assert.Equal(ct, count["none"]+2, kubeletSandboxRuns(ct, s.node))
	}, 30*time.Second, 100*time.Millisecond, "after the restarts")
	t.Logf("creations %v (sum %v s, podslo's %v s), re-creations 2, kubelet run_podsandbox %d; test body done after %v",
		count, sum, want, kubeletSandboxRuns(t, s.node), time.Since(began).Round(time.Millisecond))
}
