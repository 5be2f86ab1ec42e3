package realnode_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/apimachinery/pkg/types"
)

// TestFreshStateAfterRecreations is issue 26's defect 1 on the real
// kubelet: podslo starts with an empty state (a new install, a lost PVC)
// after the pods' sandboxes were re-created. What it sees then is a
// re-created sandbox, not the first one: it must record no creation and no
// timeout, and count the skip once per pod; a re-creation it sees happen is
// counted.
func TestFreshStateAfterRecreations(t *testing.T) {
	began := time.Now()
	s := startSuite(t)
	names := []string{"crashed-0", "crashed-1", "crashed-2"}
	var uids []types.UID
	for _, name := range names {
		uids = append(uids, s.createPod(name).UID)
	}
	s.waitRunning(uids...)
	for _, uid := range uids {
		s.killSandbox(uid)
	}
	for _, uid := range uids {
		p := s.tr.get(uid)
		t.Logf("%s: scheduled %v, sandbox ready %v, restarts %d, container started %v", p.name,
			p.scheduled.Format(time.TimeOnly), times(p.sandboxReady), p.restarts, p.started.Format(time.TimeOnly))
	}

	url := s.startExporter(t.TempDir())
	const skip = "podslo_observations_skipped_total"
	// Ready means every pod was handled: no waiting for the result.
	fams := scrape(t, url)
	count, sum := histogramTotal(fams["podslo_sandbox_creation_duration_seconds"])
	assert.Zero(t, count, "creations recorded from re-created sandboxes (sum %v s)", sum)
	assert.Zero(t, counterTotal(fams["podslo_sandbox_creation_timeouts_total"]), "false creation timeouts")
	assert.Zero(t, counterTotal(fams["podslo_sandbox_recreations_total"]), "re-creations podslo never saw")
	skipped := counterBy(fams[skip], "sli", "reason")
	t.Logf("skipped on first sight: %v", skipped)
	assert.Equal(t, float64(len(names)), skipped["sandbox_creation,recreated_before_seen"], "skips: %v", skipped)
	// Nor is the start-up after scheduling observed: the kubelet keeps
	// Ready True from before the crash (older than the restarted
	// container's start), and the readiness and the phases are skipped as
	// recreated_before_seen, before their times are compared.
	count, sum = histogramTotal(fams["podslo_readiness_duration_seconds"])
	assert.Zero(t, count, "readiness observed from a re-created sandbox (sum %v s)", sum)
	// Only scheduling, which ends before any sandbox, is observed, and
	// exactly as the pods show it.
	var scheduling float64
	for _, uid := range uids {
		p := s.tr.get(uid)
		scheduling += p.scheduled.Sub(p.created).Seconds()
	}
	phaseCount, phaseSum := histogramBy(fams["podslo_startup_phase_duration_seconds"], "phase")
	assert.Equal(t, map[string]uint64{"scheduling": uint64(len(names))}, phaseCount, "start-up phases observed (sums %v)", phaseSum)
	assert.Equal(t, scheduling, phaseSum["scheduling"], "scheduling phase")
	readinessSkips := 0.0
	for key, v := range skipped {
		if strings.HasPrefix(key, "readiness,") {
			readinessSkips += v
		}
	}
	assert.Equal(t, float64(len(names)), readinessSkips, "readiness skips: %v", skipped)
	assert.Equal(t, float64(len(names)), skipped["readiness,recreated_before_seen"], "skips: %v", skipped)
	assert.Equal(t, float64(len(names)), skipped["startup_phase,recreated_before_seen"], "skips: %v", skipped)
	assert.Zero(t, skipped["readiness,negative_duration"]+skipped["startup_phase,negative_duration"], "skips: %v", skipped)

	// A re-creation podslo sees is counted, once.
	s.killSandbox(uids[0])
	wantRuns := uint64(0)
	for _, uid := range uids {
		wantRuns += uint64(len(s.tr.get(uid).sandboxReady))
	}
	assert.EventuallyWithT(t, func(ct *assert.CollectT) {
		fams := scrape(ct, url)
		assert.Equal(ct, map[string]float64{"none": 1}, counterByClass(fams["podslo_sandbox_recreations_total"]))
		count, _ := histogramTotal(fams["podslo_sandbox_creation_duration_seconds"])
		assert.Zero(ct, count)
		assert.Zero(ct, counterTotal(fams["podslo_sandbox_creation_timeouts_total"]))
		assert.Equal(ct, float64(len(names)), counterBy(fams[skip], "sli", "reason")["sandbox_creation,recreated_before_seen"])
		// Each sandbox the pods' conditions show is one the kubelet ran.
		assert.Equal(ct, wantRuns, kubeletSandboxRuns(ct, s.node))
	}, 30*time.Second, 100*time.Millisecond, "after a re-creation podslo saw")
	t.Logf("kubelet run_podsandbox %d = sandboxes in the pods' conditions %d; test body done after %v",
		kubeletSandboxRuns(t, s.node), wantRuns, time.Since(began).Round(time.Millisecond))
}

func times(ts []time.Time) []string {
	var out []string
	for _, at := range ts {
		out = append(out, at.Format(time.TimeOnly))
	}
	return out
}
