package exporter

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/version"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podslo/podslo/alerts"
	"github.com/podslo/podslo/internal/classtable"
	"github.com/podslo/podslo/internal/testenv"
	"github.com/podslo/podslo/lifecycle"
)

// TestLandingPageOnRealAPIServer creates pods of three runtime classes with
// known sandbox creation latencies, checks /api/v1/classes exactly, and then
// the landing page as headless Chromium renders it.
func TestLandingPageOnRealAPIServer(t *testing.T) {
	env := testenv.Start(t)
	c := env.Client
	ctx := context.Background()
	const ns = "landing"
	testenv.CreateNamespace(t, c, ns, nil)
	for _, name := range []string{"runc", "kata", "gvisor"} {
		_, err := c.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Handler: name}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	const dashboards = "https://grafana.example.com/dashboards/f/podslo/"
	// The release build stamps the version (make build); a test binary has none.
	saved := version.Version
	t.Cleanup(func() { version.Version = saved })
	version.Version = "0.0.0-landing"
	// kata-4000 was scheduled more than the default max age (1h) before the
	// exporter first sees it, which would make it a too_old skip.
	url := startExporter(t, Options{Kubeconfig: env.Kubeconfig, StateDir: t.TempDir(), DashboardsURL: dashboards, MaxObservationAge: 2 * time.Hour})

	// Every sandbox becomes ready at base, after every pod below is
	// created; a latency of s seconds is a PodScheduled s seconds earlier.
	base := time.Now().Add(30 * time.Second).Truncate(time.Second)
	sandbox := func(status corev1.ConditionStatus, at time.Time) corev1.PodCondition {
		return condAt(corev1.PodReadyToStartContainers, status, at)
	}
	// truth records every sandbox creation the test makes: the SLO table
	// must say what follows from it.
	var truth []creation
	observed := func(s podSpec, seconds int) *corev1.Pod {
		storage := "none"
		for _, class := range s.ephemeral {
			storage = class
		}
		truth = append(truth, creation{runtime: s.runtimeClass, storage: storage, seconds: float64(seconds)})
		p := testenv.CreatePod(t, c, ns, s.pod())
		kubelet(t, c, p, condAt(corev1.PodScheduled, corev1.ConditionTrue, base.Add(-time.Duration(seconds)*time.Second)), sandbox(corev1.ConditionTrue, base))
		return p
	}
	pending := func(s podSpec) {
		p := testenv.CreatePod(t, c, ns, s.pod())
		kubelet(t, c, p, condAt(corev1.PodScheduled, corev1.ConditionTrue, base), sandbox(corev1.ConditionFalse, base))
	}

	crashy := observed(podSpec{name: "runc-1", runtimeClass: "runc"}, 1)
	observed(podSpec{name: "runc-2", runtimeClass: "runc"}, 2)
	observed(podSpec{name: "runc-3", runtimeClass: "runc"}, 3)
	observed(podSpec{name: "runc-4", runtimeClass: "runc"}, 4)
	// An ephemeral volume's class is its template's until the claim exists.
	observed(podSpec{name: "kata-slow", runtimeClass: "kata", ephemeral: map[string]string{"scratch": "slow"}}, 10)
	observed(podSpec{name: "kata-25", runtimeClass: "kata"}, 25)
	// Beyond the last bucket bound, 3600s: in the +Inf bucket.
	observed(podSpec{name: "kata-4000", runtimeClass: "kata"}, 4000)
	pending(podSpec{name: "runc-pending", runtimeClass: "runc"})
	pending(podSpec{name: "gvisor-pending", runtimeClass: "gvisor"})

	// runc-1's first readiness must be recorded before its sandbox is lost
	// and re-created, as a node crash would do.
	eventuallyValue(t, url, "podslo_pod_sandbox_creation_seconds", map[string]string{"pod": "runc-1"}, 1)
	kubelet(t, c, crashy, sandbox(corev1.ConditionFalse, base.Add(60*time.Second)))
	kubelet(t, c, crashy, sandbox(corev1.ConditionTrue, base.Add(65*time.Second)))

	// Kubelet buckets …, 1, 2, 3, 4, …, 8, 10, 20, 30, …, 3600, +Inf.
	// runc 1, 2, 3, 4: ranks 2, 3.6, 3.96. kata 10, 25, 4000: rank 1.5 is
	// half-way through (20, 30]; 2.7 and 2.97 only the +Inf bucket reaches.
	// none 1, 2, 3, 4, 25, 4000: rank 3 tops (2, 3]; 5.4 and 5.94 are in
	// +Inf. slow 10: ranks 0.5, 0.9, 0.99 in (8, 10].
	want := []string{
		"runtime_class gvisor count=0 p50=NaN p90=NaN p99=NaN recreations=0 pending=1",
		"runtime_class kata count=3 p50=25.000000000 p90=3600.000000000 p99=3600.000000000 recreations=0 pending=0",
		"runtime_class runc count=4 p50=2.000000000 p90=3.600000000 p99=3.960000000 recreations=1 pending=1",
		"storage_class none count=6 p50=3.000000000 p90=3600.000000000 p99=3600.000000000 recreations=1 pending=2",
		"storage_class slow count=1 p50=9.000000000 p90=9.800000000 p99=9.980000000 recreations=0 pending=0",
	}
	var got []string
	require.Eventually(t, func() bool {
		// Not get: require must not stop the test from this goroutine.
		resp, err := http.Get(url + "/api/v1/classes")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var table classtable.Table
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" ||
			json.NewDecoder(resp.Body).Decode(&table) != nil {
			return false
		}
		got = rowsText(table)
		return assert.ObjectsAreEqual(want, got)
	}, 30*time.Second, 50*time.Millisecond, "last /api/v1/classes:\n%s", strings.Join(got, "\n"))

	t.Run("the landing page in Chromium", func(t *testing.T) {
		p := parsePage(t, strings.NewReader(testenv.DumpDOM(t, url+"/")))
		assert.Equal(t, "podslo exporter", p.title)
		assert.Contains(t, p.text, "Version 0.0.0-landing.")
		assert.NotContains(t, p.text, "have not synced", "the exporter is ready")
		assert.Equal(t, wantHeader, p.header)
		assert.Equal(t, [][]string{
			{"runtime_class", "gvisor", "0", "-", "-", "-", "0", "1"},
			{"runtime_class", "kata", "3", "25s", "1h", "1h", "0", "0"},
			{"runtime_class", "runc", "4", "2s", "3.6s", "4s", "1", "1"},
			{"storage_class", "none", "6", "3s", "1h", "1h", "1", "2"},
			{"storage_class", "slow", "1", "9s", "9.8s", "10s", "0", "0"},
		}, p.rows)
		assert.Equal(t, wantLinks(dashboards), p.links)

		// The SLO table as the browser laid it out, against what the
		// test's own pods make of the SLOs the release ships.
		_, rows := testenv.HTMLTable(t, testenv.DumpDOM(t, url+"/"), "slos")
		got := map[string]string{}
		for _, r := range rows {
			got[r[0]+" "+r[1]] = strings.Join([]string{r[3], r[4], r[5]}, " ")
		}
		assert.Equal(t, expectedSLOs(t, truth), got)

		t.Run("podslo report", func(t *testing.T) {
			// The command, built, against the running exporter: the same
			// numbers, and exit status 2, since classes are breached.
			cmd := exec.Command(testenv.PodsloBinary(t), "report", "--url", url, "-o", "json")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var exit *exec.ExitError
			require.ErrorAs(t, err, &exit, "stderr: %s", stderr.String())
			assert.Equal(t, 2, exit.ExitCode(), "breached: %s", stderr.String())
			var report struct {
				Breached bool
				Statuses []struct {
					Title, Label, Class    string
					Events                 uint64
					Attainment, BudgetLeft float64
				}
			}
			require.NoError(t, json.Unmarshal(stdout.Bytes(), &report), stdout.String())
			assert.True(t, report.Breached)
			fromReport := map[string]string{}
			for _, st := range report.Statuses {
				fromReport[st.Title+" "+st.Label+" "+st.Class] = fmt.Sprintf("%.2f%% %d %.2f%%", st.Attainment, st.Events, st.BudgetLeft)
			}
			assert.Equal(t, expectedSLOs(t, truth), fromReport)
		})
	})
}

// creation is one sandbox creation a test made, and its latency.
type creation struct {
	runtime, storage string
	seconds          float64
}

// expectedSLOs computes, from the creations alone, the attainment, events
// and budget left of every sandbox creation SLO (latency and success) of
// the release's slos.yaml, per class, as "title label class" → "attainment events budget".
func expectedSLOs(t *testing.T, truth []creation) map[string]string {
	t.Helper()
	spec, err := alerts.Default()
	require.NoError(t, err)
	want := map[string]string{}
	for i := range spec.SLOs {
		slo := &spec.SLOs[i]
		creations := slo.Latency != nil && slo.Latency.Histogram == "podslo_sandbox_creation_duration_seconds"
		success := slo.Success != nil && slo.Success.Successes == "podslo_sandbox_creation_duration_seconds_count"
		if !creations && !success {
			continue
		}
		matchers, err := slo.ParsedMatchers()
		require.NoError(t, err)
		for _, label := range slo.GroupBy {
			type sums struct{ good, total int }
			by := map[string]*sums{}
			for _, c := range truth {
				labels := map[string]string{"runtime_class": c.runtime, "storage_class": c.storage}
				if !slices.ContainsFunc(matchers, func(m alerts.Matcher) bool { return !m.Matches(labels) }) {
					s := by[labels[label]]
					if s == nil {
						s = &sums{}
						by[labels[label]] = s
					}
					switch {
					case creations:
						s.total++
						if c.seconds <= slo.ThresholdFor(labels) {
							s.good++
						}
					default:
						// A creation, and a timeout too when it took longer
						// than --sandbox-creation-timeout.
						s.total++
						s.good++
						if c.seconds > lifecycle.DefaultSandboxCreationTimeout.Seconds() {
							s.total++
						}
					}
				}
			}
			for class, s := range by {
				attainment := 100 * float64(s.good) / float64(s.total)
				budget := 100 * (1 - (1-attainment/100)/(1-slo.Objective/100))
				want[slo.Title+" "+label+" "+class] = fmt.Sprintf("%.2f%% %d %.2f%%", attainment, s.total, budget)
			}
		}
	}
	return want
}
