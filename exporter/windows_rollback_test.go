package exporter

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/podslo/podslo/internal/slostatus"
	"github.com/podslo/podslo/internal/testenv"
)

// The code before the windowed counts (issue 37).
const (
	beforeWindowsVersion = "main-before-issue-37"
	beforeWindowsCommit  = "001aaabeb647346c19adb39d4a00d8d45d60c4f3"
)

// TestWindowsAcrossRollback hands a state with windowed counts to the code
// before them and back, as CHANGELOG.md says: that code starts on it,
// exposes exactly the series it had, and counts on; rolled forward, the
// windows hold what they held before the rollback (the rolled-back code
// wrote none), the cumulative series everything, and the windows date
// from the first start.
func TestWindowsAcrossRollback(t *testing.T) {
	env := testenv.Start(t)
	old := testenv.ReleaseBinary(t, beforeWindowsVersion, beforeWindowsCommit)
	bin := testenv.PodsloBinary(t)
	state := t.TempDir()
	c := env.Client
	const ns = "windows"
	testenv.CreateNamespace(t, c, ns, nil)

	base := time.Now().Add(-time.Minute).Truncate(time.Second)
	n := 0
	sandbox := func(url string) {
		t.Helper()
		n++
		p := testenv.CreatePod(t, c, ns, podSpec{name: fmt.Sprint("p", n)}.pod())
		kubelet(t, c, p, condAt(corev1.PodScheduled, corev1.ConditionTrue, base), condAt(corev1.PodReadyToStartContainers, corev1.ConditionTrue, base.Add(2*time.Second)))
		require.EventuallyWithT(t, func(ct *assert.CollectT) {
			count, _ := pullHistogram(ct, url, "podslo_sandbox_creation_duration_seconds", nil)
			assert.Equal(ct, uint64(n), count)
		}, 30*time.Second, 50*time.Millisecond, "pod %d's sandbox", n)
	}
	stop := func(p *testenv.Process) {
		t.Helper()
		require.NoError(t, p.Cmd.Process.Signal(syscall.SIGTERM))
		<-p.Done
	}
	// windowed is what /api/v1/slos says of the runtime class none's
	// sandbox creations over 30 days, and since when.
	windowed := func(url string) (float64, time.Time) {
		t.Helper()
		resp, err := http.Get(url + "/api/v1/slos")
		require.NoError(t, err)
		defer resp.Body.Close()
		var r slostatus.Report
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&r))
		require.Len(t, r.Sources, 1)
		for _, slo := range r.SLOs {
			if slo.Name == "sandbox_creation_latency" && slo.Label == "runtime_class" {
				for _, cl := range slo.Classes {
					if cl.Class == "none" {
						return cl.Windows["30d"].Total, r.Sources[0].Since
					}
				}
			}
		}
		return 0, r.Sources[0].Since
	}

	first := startProcess(t, bin, "--kubeconfig", env.Kubeconfig, "--state-dir", state)
	sandbox(first.URL)
	sandbox(first.URL)
	events, since := windowed(first.URL)
	require.Equal(t, 2.0, events)
	stop(first)

	prev := startProcess(t, old, "--kubeconfig", env.Kubeconfig, "--state-dir", state)
	count, _ := pullHistogram(t, prev.URL, "podslo_sandbox_creation_duration_seconds", nil)
	assert.Equal(t, uint64(2), count, "the code before the windows counts what was counted, once")
	assert.NotContains(t, scrapeText(t, prev.URL, "text/plain"), "@", "a window record is no series of its")
	sandbox(prev.URL)
	stop(prev)

	again := startProcess(t, bin, "--kubeconfig", env.Kubeconfig, "--state-dir", state)
	count, _ = pullHistogram(t, again.URL, "podslo_sandbox_creation_duration_seconds", nil)
	assert.Equal(t, uint64(3), count)
	events, sinceAgain := windowed(again.URL)
	assert.Equal(t, 2.0, events, "the windows hold what they held; the rolled-back code wrote none")
	assert.Equal(t, since, sinceAgain, "the windows date from the first start")
	sandbox(again.URL)
	events, _ = windowed(again.URL)
	assert.Equal(t, 3.0, events)
	body := scrapeText(t, again.URL, "text/plain")
	assert.False(t, strings.Contains(body, "@"), "no window record on /metrics")
}
