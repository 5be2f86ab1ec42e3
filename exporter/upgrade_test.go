package exporter

import (
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/podslo/podslo/internal/testenv"
)

// The previous release, whose state this release must take over. Its
// records are format 1 (store/codec_v1.go).
const (
	previousVersion = "0.1.0"
	previousCommit  = "3b7944d1236f4f7ea1fd33c1712bc8ad427d6f2f"
)

// sliSeries scrapes url and returns the value of every series of the SLI
// families (histogram buckets, sums and counts included), by series text.
func sliSeries(t require.TestingT, url string) map[string]float64 {
	return testenv.SeriesValues(scrapeFamilies(t, url), func(name string, m *dto.Metric) bool {
		// The store's and the process's own metrics start again with each
		// process: not what an upgrade carries over. Per-pod series come
		// from the informer's replay.
		return strings.HasPrefix(name, "podslo_") && !strings.HasPrefix(name, "podslo_store_") && !strings.HasPrefix(name, "podslo_build") &&
			!strings.HasPrefix(name, "podslo_informer_") && !hasLabel(m, "uid")
	})
}

// timedOutLabel is the label 0.2.0 added to the pending sandboxes, in a
// SeriesValues key.
var timedOutLabel = regexp.MustCompile(`timed_out=(true|false),`)

// TestUpgradeFromPreviousRelease runs the previous release's binary on a
// real API server until its state holds pods at every stage, then this
// release's binary on the same state: it shows every series the previous
// one showed, at the same value (new series only at 0), and from then on
// counts each pod once, also the ones that were half-way at the upgrade.
func TestUpgradeFromPreviousRelease(t *testing.T) {
	env := testenv.Start(t)
	old := testenv.ReleaseBinary(t, previousVersion, previousCommit)
	bin := testenv.PodsloBinary(t)
	state := t.TempDir()
	c := env.Client
	const ns = "upgrade"
	testenv.CreateNamespace(t, c, ns, nil)
	base := time.Now().Add(-5 * time.Minute).Truncate(time.Second)
	pod := func(name string) *corev1.Pod {
		return testenv.CreatePod(t, c, ns, podSpec{name: name, team: "a"}.pod())
	}
	scheduled := condAt(corev1.PodScheduled, corev1.ConditionTrue, base)
	sandbox := func(after time.Duration) corev1.PodCondition {
		return condAt(corev1.PodReadyToStartContainers, corev1.ConditionTrue, base.Add(after))
	}

	prev := startProcess(t, old, "--kubeconfig", env.Kubeconfig, "--state-dir", state)
	a, b, half, leaving, bad := pod("a"), pod("b"), pod("half"), pod("leaving"), pod("bad")
	kubelet(t, c, a, scheduled, sandbox(1*time.Second))
	kubelet(t, c, b, scheduled, sandbox(2*time.Second))
	kubelet(t, c, leaving, scheduled, sandbox(3*time.Second))
	// Scheduled, its sandbox not ready yet when the upgrade comes.
	kubelet(t, c, half, scheduled)
	// A sandbox ready without PodScheduled: skipped once, with a reason.
	kubelet(t, c, bad, sandbox(1*time.Second))

	const creation = "podslo_sandbox_creation_duration_seconds"
	const skipped = "podslo_observations_skipped_total"
	classes := `runtime_class="none",storage_class="none"`
	creationHeader := "# HELP " + creation + " Time from PodScheduled to the first PodReadyToStartContainers=True of each pod (KEP-3085), observed once per pod UID.\n# TYPE " + creation + " histogram\n"
	// Release 0.1.0's bounds started at 0.5 s.
	eventuallyMetrics(t, prev.URL, creationHeader+histogramTextIn(classicBuckets[3:], creation, classes, 1, 2, 3), creation)
	eventuallyValue(t, prev.URL, skipped, map[string]string{"sli": "sandbox_creation", "reason": "no_scheduled_condition"}, 1)
	// A deletion requested before the upgrade, its sandbox gone after it:
	// the request time lives only in the previous release's record.
	applied := func(url string) float64 {
		return counterValue(t, url, "podslo_store_operations_total", map[string]string{"operation": "apply", "result": "success"})
	}
	before := applied(prev.URL)
	requested := deleteWithGrace(t, c, leaving, 30)
	require.EventuallyWithT(t, func(ct *assert.CollectT) { assert.Greater(ct, applied(prev.URL), before) }, 30*time.Second, 20*time.Millisecond,
		"the previous release recorded the deletion request")
	// Under this release's names (0.2.0 renamed some families), less
	// those a rename took out of sliSeries.
	carried := map[string]float64{}
	for k, v := range sliSeries(t, prev.URL) {
		if k = testenv.Renamed(k); !strings.HasPrefix(k, "podslo_informer_") {
			carried[k] = v
		}
	}
	require.NoError(t, prev.Cmd.Process.Signal(syscall.SIGTERM))
	<-prev.Done

	// What the previous release showed, this one shows, before anything
	// changes.
	next := startProcess(t, bin, "--kubeconfig", env.Kubeconfig, "--state-dir", state)
	got := sliSeries(t, next.URL)
	// Two gauges computed at scrape time changed: the pending sandboxes
	// gained timed_out (summed over it here: 0.1.0 had none), and the
	// pending terminations are new: the deletion requested before the
	// upgrade (leaving) is one.
	for k, v := range got {
		if strings.HasPrefix(k, "podslo_sandbox_creation_pending_pods{") {
			delete(got, k)
			got[timedOutLabel.ReplaceAllString(k, "")] += v
		}
	}
	terminating := 0.0
	for k, v := range got {
		if strings.HasPrefix(k, "podslo_terminations_pending_pods{") {
			terminating += v
			delete(got, k)
		}
	}
	assert.Equal(t, 1.0, terminating, "pending terminations after the upgrade")
	for k, v := range carried {
		assert.Equal(t, v, got[k], "series %s after the upgrade", k)
	}
	// podslo_observations_total is new: what the previous release observed
	// was measured in whole seconds, and counts so.
	histogramOf := map[string]string{
		"sandbox_creation": "podslo_sandbox_creation_duration_seconds", "termination": "podslo_termination_duration_seconds",
		"readiness": "podslo_readiness_duration_seconds", "startup_phase": "podslo_startup_phase_duration_seconds",
		"stabilization": "podslo_stabilization_duration_seconds",
	}
	for k, v := range got {
		if _, ok := carried[k]; ok {
			continue
		}
		if sli, ok := strings.CutPrefix(k, "podslo_observations_total{precision=second,sli="); ok {
			want := 0.0
			for ck, cv := range carried {
				if strings.HasPrefix(ck, histogramOf[strings.TrimSuffix(sli, "}")]+"{") && strings.HasSuffix(ck, "}_count") {
					want += cv
				}
			}
			assert.Equal(t, want, v, "series %s: the previous release's observations, in seconds", k)
			continue
		}
		assert.Zero(t, v, "series %s is new in this release and must start at 0", k)
	}

	// Now the half-way pods finish, and a's sandbox is re-created.
	kubelet(t, c, half, sandbox(4*time.Second))
	kubelet(t, c, leaving, condAt(corev1.PodReadyToStartContainers, corev1.ConditionFalse, requested.Add(3*time.Second)))
	kubelet(t, c, a, sandbox(4*time.Minute))

	const termination = "podslo_termination_duration_seconds"
	want := creationHeader + histogramText(creation, classes, 1, 2, 3, 4) +
		"# HELP " + termination + " Time from the deletion request (deletionTimestamp minus the grace period) to the sandbox condition turning False (KEP-3085 Story 5), observed once per pod UID.\n# TYPE " + termination + " histogram\n" +
		histogramText(termination, classes, 3)
	eventuallyMetrics(t, next.URL, want, creation, termination)
	eventuallyValue(t, next.URL, "podslo_sandbox_recreations_total", map[string]string{"runtime_class": "none"}, 1)
	check := func(url string) {
		t.Helper()
		require.NoError(t, testutil.ScrapeAndCompare(url+"/metrics", strings.NewReader(want), creation, termination))
		assert.Equal(t, 1.0, counterValue(t, url, "podslo_sandbox_recreations_total", map[string]string{"runtime_class": "none"}))
		assert.Equal(t, 1.0, counterValue(t, url, skipped, map[string]string{"sli": "sandbox_creation", "reason": "no_scheduled_condition"}), "the skip is not counted again")
	}
	check(next.URL)

	// And once more, now from this release's own records.
	next.Kill(t)
	again := startProcess(t, bin, "--kubeconfig", env.Kubeconfig, "--state-dir", state)
	check(again.URL)
}

func hasLabel(m *dto.Metric, name string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return true
		}
	}
	return false
}
