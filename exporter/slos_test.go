package exporter

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"

	"github.com/podslo/podslo/internal/classtable"
	"github.com/podslo/podslo/internal/slostatus"
	"github.com/podslo/podslo/internal/testenv"
	"github.com/podslo/podslo/store"
)

var wantSLOHeader = []string{"SLO", "class", "objective", "attainment", "events", "budget left",
	"burn 1h", "burn 6h", "burn 1d", "burn 3d", "alerts firing", "budget over the window", "latency"}

// sampleReport is what /api/v1/slos of a sharded exporter could serve: a
// class named to break out of the markup, whose 30 slow sandboxes of the
// last hour page, and a success SLO without events.
func sampleReport() slostatus.Report {
	days := func(last slostatus.Counts) []slostatus.Counts {
		d := make([]slostatus.Counts, 30)
		d[20] = slostatus.Counts{Good: 40, Total: 40}
		d[29] = last
		return d
	}
	dist := make([]uint64, len(store.Buckets)+1)
	dist[2], dist[10] = 40, 30 // 0.25s and 8s
	return slostatus.Report{
		Generated: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC),
		Sources:   []slostatus.Source{{Scope: "shard 1 of 3 (0-based)", Partial: true, Since: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}},
		SLOs: []slostatus.SLO{{
			Name: "sandbox_creation_latency", Title: "Sandbox creation latency", Alert: "PodsloSandboxCreationLatencyBudgetBurn",
			Objective: 99, Window: "30d", Label: "runtime_class", Threshold: "5s", MinEvents: 20, Bounds: store.Buckets,
			Classes: []slostatus.Class{{
				Class: `<script>alert("x")</script>`, ThresholdSeconds: 5,
				Windows: map[string]slostatus.Counts{"5m": {Total: 30}, "30m": {Total: 30}, "1h": {Total: 30}, "2h": {Total: 30}, "6h": {Total: 30}, "1d": {Total: 30}, "3d": {Total: 30}, "30d": {Good: 40, Total: 70}},
				Days:    days(slostatus.Counts{Total: 30}), Distribution: dist, Precise: 40,
			}},
		}, {
			Name: "sandbox_creation_success", Title: "Sandbox creation success", Objective: 99.5, Window: "30d", Label: "runtime_class", MinEvents: 40,
			Classes: []slostatus.Class{{Class: "runc", Windows: map[string]slostatus.Counts{"30d": {}}, Days: make([]slostatus.Counts, 30)}},
		}},
	}
}

func TestLandingSLOs(t *testing.T) {
	srv := sloServer(t, classtable.Table{}, sampleReport(), true, DefaultDashboardsURL)
	resp, body := get(t, http.MethodGet, srv.URL+"/")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)

	csp := resp.Header.Get("Content-Security-Policy")
	assert.Contains(t, csp, "default-src 'none'")
	assert.Regexp(t, `style-src 'sha256-[A-Za-z0-9+/=]+'`, csp)
	assert.NotContains(t, body, "<script", "class names are escaped")
	assert.NotContains(t, body, " style=", "a style attribute would break under the CSP")

	header, rows := testenv.HTMLTable(t, body, "slos")
	doc, err := html.Parse(strings.NewReader(body))
	require.NoError(t, err)
	assert.Equal(t, wantSLOHeader, header)
	require.Len(t, rows, 2)
	// 30 bad of 70 against 1% allowed: 1 - (30/70)/0.01 = -4185.71%; every
	// event of the last hour was bad: burn 100 over each window.
	assert.Equal(t, []string{"Sandbox creation latency", `runtime_class <script>alert("x")</script>`, "99.00% in 30d", "57.14%", "70", "-4185.71%",
		"100.00", "100.00", "100.00", "100.00", "page 1h/5m, 6h/30m; ticket 1d/2h, 3d/6h", "",
		"threshold 5s; p50 in (100ms, 250ms], p99 in (6s, 8s]; 40 of 70 measured in ms"}, rows[0])
	assert.Equal(t, []string{"Sandbox creation success", "runtime_class runc", "99.50% in 30d", "-", "0", "-",
		"-", "-", "-", "-", "none", "", ""}, rows[1], "no events: nothing to say, last")

	// The charts: the budget line starts on day 21 and ends overspent; 2
	// bars, the good one left of the threshold.
	var polylines, good, bad []*html.Node
	for n := range doc.Descendants() {
		switch {
		case n.Data == "polyline":
			polylines = append(polylines, n)
		case n.Data == "rect" && attr(n, "class") == "good":
			good = append(good, n)
		case n.Data == "rect" && attr(n, "class") == "bad":
			bad = append(bad, n)
		}
	}
	require.Len(t, polylines, 1)
	assert.Equal(t, "102.3,3 107.3,3 112.2,3 117.2,3 122.2,3 127.1,3 132.1,3 137.1,3 142,3 147,25", attr(polylines[0], "points"),
		"100% from day 21 (top), below -100% on day 30 (bottom)")
	assert.Len(t, good, 1)
	assert.Len(t, bad, 1)

	text := textOf(doc)
	assert.Contains(t, text, "1 SLO and class pair has spent its error budget.")
	assert.Contains(t, text, "This exporter watches shard 1 of 3 (0-based), not every pod")
	assert.Contains(t, text, "counted by this exporter since 2026-11-01T00:00:00Z")
	for _, d := range slostatus.Definitions {
		assert.Contains(t, body, html.EscapeString(d), "every definition is on the page")
	}
}

func TestSLOsAPIServesCounts(t *testing.T) {
	srv := sloServer(t, classtable.Table{}, sampleReport(), true, DefaultDashboardsURL)
	resp, body := get(t, http.MethodGet, srv.URL+"/api/v1/slos")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	var back slostatus.Report
	require.NoError(t, json.Unmarshal([]byte(body), &back))
	assert.Equal(t, sampleReport(), back)
}
