package cmd

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podslo/podslo/internal/slostatus"
	"github.com/podslo/podslo/store"
)

var update = flag.Bool("update", false, "rewrite the report's golden files")

// shard serves one exporter's /api/v1/slos.
func shard(t *testing.T, r slostatus.Report) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.URL.Path != "/prefix/api/v1/slos" {
			http.NotFound(w, req)
			return
		}
		_ = json.NewEncoder(w).Encode(r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/prefix/"
}

// shardReports are two shards of one cluster: kata's slow sandboxes of
// the last hour are split between them, and only their sum reaches the 20
// events an alert needs.
func shardReports() (a, b slostatus.Report) {
	at := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	class := func(name string, total, good, recent float64, slow int, precise uint64) slostatus.Class {
		windows := map[string]slostatus.Counts{}
		for _, w := range []string{"5m", "30m", "1h", "2h", "6h", "1d", "3d"} {
			windows[w] = slostatus.Counts{Total: recent}
		}
		windows["30d"] = slostatus.Counts{Good: good, Total: total}
		days := make([]slostatus.Counts, 30)
		days[10] = slostatus.Counts{Good: good, Total: good}
		days[29] = slostatus.Counts{Total: total - good}
		dist := make([]uint64, len(store.Buckets)+1)
		dist[1] = uint64(good)
		dist[slow] += uint64(total - good)
		return slostatus.Class{Class: name, ThresholdSeconds: 5, Windows: windows, Days: days, Distribution: dist, Precise: precise}
	}
	slo := func(classes ...slostatus.Class) slostatus.SLO {
		return slostatus.SLO{
			Name: "sandbox_creation_latency", Title: "Sandbox creation latency", Alert: "PodsloSandboxCreationLatencyBudgetBurn",
			Events: "sandbox creations", Objective: 99, Window: "30d", Label: "runtime_class", Threshold: "5s", MinEvents: 20,
			Bounds: store.Buckets, Classes: classes,
		}
	}
	a = slostatus.Report{Generated: at, Sources: []slostatus.Source{{Scope: "shard 0 of 2 (0-based)", Partial: true, Since: at.Add(-40 * 24 * time.Hour)}},
		SLOs: []slostatus.SLO{slo(class("kata", 60, 48, 12, 10, 0), class("runc", 500, 500, 0, 10, 500))}}
	b = slostatus.Report{Generated: at.Add(-time.Second), Sources: []slostatus.Source{{Scope: "shard 1 of 2 (0-based)", Partial: true, Since: at.Add(-12 * 24 * time.Hour)}},
		SLOs: []slostatus.SLO{slo(class("kata", 40, 30, 10, 10, 0))}}
	return a, b
}

func runReport(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRoot(&bytes.Buffer{}, nil)
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs(append([]string{"report"}, args...))
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

// TestReportGolden adds two shards' reports up and prints them in each
// format: kata's 22 slow sandboxes of the last hour (12 + 10) page, which
// neither shard's would alone, and the report exits with 2.
func TestReportGolden(t *testing.T) {
	a, b := shardReports()
	urlA, urlB := shard(t, a), shard(t, b)
	for _, format := range []string{"table", "markdown", "json"} {
		t.Run(format, func(t *testing.T) {
			out, err := runReport(t, "--url", urlA, "--url", urlB, "-o", format)
			require.Error(t, err)
			assert.Equal(t, BreachedExitCode, ExitCode(err))
			assert.EqualError(t, err, "1 SLO and class pair has spent its error budget")
			// The servers' ports change from run to run.
			out = string(bytes.ReplaceAll(bytes.ReplaceAll([]byte(out), []byte(urlA), []byte("http://shard-0/prefix/")), []byte(urlB), []byte("http://shard-1/prefix/")))
			golden := filepath.Join("testdata", "report", format+".golden")
			if *update {
				require.NoError(t, os.MkdirAll(filepath.Dir(golden), 0o755))
				require.NoError(t, os.WriteFile(golden, []byte(out), 0o644))
			}
			want, err := os.ReadFile(golden)
			require.NoError(t, err)
			assert.Equal(t, string(want), out)
		})
	}
}

func TestReportOfOneShardIsNotBreachedByTheOther(t *testing.T) {
	_, b := shardReports()
	b.SLOs[0].Classes[0].Windows["30d"] = slostatus.Counts{Good: 40, Total: 40}
	out, err := runReport(t, "--url", shard(t, b), "-o", "json")
	require.NoError(t, err, "no budget spent: exit 0")
	assert.Equal(t, 0, ExitCode(err))
	var got struct {
		Breached bool
		Statuses []struct {
			Class      string
			BudgetLeft *float64
			Firing     []string
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	assert.False(t, got.Breached)
	require.Len(t, got.Statuses, 1)
	assert.Equal(t, 100.0, *got.Statuses[0].BudgetLeft)
	assert.Empty(t, got.Statuses[0].Firing, "10 events: under minEvents")
}

func TestReportErrors(t *testing.T) {
	a, _ := shardReports()
	other := a
	other.SLOs = []slostatus.SLO{a.SLOs[0]}
	other.SLOs[0].Objective = 95
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("{not json")) }))
	t.Cleanup(broken.Close)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no url", nil, "give the exporters' addresses with --url"},
		{"bad output", []string{"--url", shard(t, a), "-o", "yaml"}, `--output "yaml": want table, json or markdown`},
		{"not a url", []string{"--url", "127.0.0.1:8080"}, `--url "127.0.0.1:8080": want an http or https URL`},
		{"not found", []string{"--url", shard(t, a) + "other"}, "404 Not Found"},
		{"not json", []string{"--url", broken.URL}, "read the SLOs of " + broken.URL},
		{"other spec", []string{"--url", shard(t, a), "--url", shard(t, other)}, "the reports disagree"},
		{"missing password", []string{"--url", shard(t, a), "--username", "u", "--password-file", filepath.Join(t.TempDir(), "none")}, "--password-file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runReport(t, tc.args...)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
			assert.Equal(t, 1, ExitCode(err), "a failed report is not a breach")
		})
	}
}

// fakePrometheus answers instant queries as a Prometheus that runs
// podslo's rules for two clusters: prod's kata sandboxes missed 5s in 30
// of 1000 over 30 days and 12 of 20 in the last hour; staging's runc none.
func fakePrometheus(t *testing.T) string {
	t.Helper()
	type series struct {
		cluster, class, window, kind string
		value                        float64
	}
	data := []series{
		{"prod", "kata", "1h", "events:increase", 20}, {"prod", "kata", "1h", "errors:ratio_rate", 0.6},
		{"prod", "kata", "5m", "errors:ratio_rate", 0.5},
		{"prod", "kata", "30d", "events:increase", 1000}, {"prod", "kata", "30d", "errors:ratio_rate", 0.03},
		{"staging", "runc", "30d", "events:increase", 400.5}, {"staging", "runc", "30d", "errors:ratio_rate", 0},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query().Get("query")
		var result []map[string]any
		if strings.Contains(q, `cluster_runtime_class:podslo_sandbox_creation_latency_`) {
			for _, d := range data {
				result = append(result, map[string]any{
					"metric": map[string]string{"__name__": "cluster_runtime_class:podslo_sandbox_creation_latency_" + d.kind + d.window, "cluster": d.cluster, "runtime_class": d.class},
					"value":  []any{1, fmt.Sprint(d.value)},
				})
			}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"status": "success", "data": map[string]any{"resultType": "vector", "result": result}})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestReportFromPrometheus(t *testing.T) {
	out, err := runReport(t, "--prometheus-url", fakePrometheus(t), "-o", "json")
	require.Error(t, err)
	assert.Equal(t, BreachedExitCode, ExitCode(err))
	var got struct {
		Statuses []struct {
			Slo, Label, Class, Cluster string
			Events, Good               float64
			BudgetLeft                 *float64
			Firing                     []string
		}
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	var rows []string
	for _, s := range got.Statuses {
		if s.Slo == "sandbox_creation_latency" && s.Label == "runtime_class" {
			rows = append(rows, fmt.Sprintf("%s/%s events=%v good=%v budget=%.1f firing=%v", s.Cluster, s.Class, s.Events, s.Good, *s.BudgetLeft, s.Firing))
		}
	}
	// prod kata: 3% bad against 1% allowed over 30d: -200% left; the 1h/5m
	// pair burns 60 and 50 times, over 14.4, with 20 events: it pages.
	assert.Equal(t, []string{
		"prod/kata events=1000 good=970 budget=-200.0 firing=[critical 1h/5m]",
		"staging/runc events=400.5 good=400.5 budget=100.0 firing=[]",
	}, rows)

	table, err := runReport(t, "--prometheus-url", fakePrometheus(t))
	require.Error(t, err)
	assert.Contains(t, table, "runtime_class kata (cluster prod)")
	assert.Contains(t, table, "400.5")

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--url", "http://x", "--prometheus-url", "http://y"}, "give one or the other"},
		{[]string{"--url", "http://x", "--slos-file", "f"}, "go with --prometheus-url"},
		{[]string{"--prometheus-url", "y:9090"}, "want an http or https URL"},
	} {
		_, err := runReport(t, tc.args...)
		assert.ErrorContains(t, err, tc.want)
		assert.Equal(t, 1, ExitCode(err))
	}
}
