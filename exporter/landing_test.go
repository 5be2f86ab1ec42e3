package exporter

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/podslo/podslo/internal/classtable"
	"github.com/podslo/podslo/internal/serve"
	"github.com/podslo/podslo/internal/slostatus"
	"github.com/podslo/podslo/internal/testenv"
)

// renderedPage is what a reader sees of the landing page: the class table's
// cells and the links.
type renderedPage struct {
	title  string
	header []string
	rows   [][]string
	// links maps each link's text to its href.
	links map[string]string
	text  string
}

// parsePage reads a landing page, served or as a browser dumped its DOM.
func parsePage(t *testing.T, r io.Reader) renderedPage {
	t.Helper()
	raw, err := io.ReadAll(r)
	require.NoError(t, err)
	doc, err := html.Parse(bytes.NewReader(raw))
	require.NoError(t, err)
	p := renderedPage{links: map[string]string{}, text: textOf(doc)}
	for n := range doc.Descendants() {
		switch {
		case n.DataAtom == atom.Title && n.Parent.DataAtom == atom.Head:
			p.title = textOf(n)
		case n.DataAtom == atom.A:
			p.links[textOf(n)] = attr(n, "href")
		}
	}
	p.header, p.rows = testenv.HTMLTable(t, string(raw), "classes")
	return p
}

func textOf(n *html.Node) string {
	var b strings.Builder
	for d := range n.Descendants() {
		if d.Type == html.TextNode {
			b.WriteString(d.Data)
		}
	}
	return strings.Join(strings.Fields(b.String()), " ")
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

var wantHeader = []string{"label", "class", "count", "p50", "p90", "p99", "re-creations", "pending"}

// wantLinks are the landing page's links, relative to the page.
func wantLinks(dashboards string) map[string]string {
	return map[string]string{
		"Metrics": "metrics", "The sandbox creation table as JSON": "api/v1/classes", "The SLOs' windowed counts as JSON": "api/v1/slos", "Health": "healthz", "Readiness": "readyz",
		"Dashboards": dashboards,
	}
}

// rowsText renders rows for comparison: readable diffs, quantiles to the
// nanosecond, and NaN equal to NaN.
func rowsText(tb classtable.Table) []string {
	out := make([]string, 0, len(tb.Rows))
	for _, r := range tb.Rows {
		out = append(out, fmt.Sprintf("%s %s count=%d p50=%.9f p90=%.9f p99=%.9f recreations=%d pending=%d",
			r.Label, r.Class, r.Count, r.P50, r.P90, r.P99, r.Recreations, r.Pending))
	}
	return out
}

// landingServer serves table through the exporter's own mux, with a
// /metrics that says so.
func landingServer(t *testing.T, table classtable.Table, ready bool, dashboards string) *httptest.Server {
	return sloServer(t, table, slostatus.Report{}, ready, dashboards)
}

// sloServer is landingServer with an SLO report.
func sloServer(t *testing.T, table classtable.Table, report slostatus.Report, ready bool, dashboards string) *httptest.Server {
	t.Helper()
	metrics := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "metrics\n") })
	mux := serve.Mux(metrics, func() bool { return ready })
	page := &landing{
		table:      func() classtable.Table { return table },
		slos:       func() slostatus.Report { return report },
		ready:      func() bool { return ready },
		version:    "v1.2.3",
		dashboards: dashboards,
		log:        slog.New(slog.NewTextHandler(testenv.TestWriter{T: t}, nil)),
	}
	page.register(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, method, url string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	require.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(body)
}

var sampleTable = classtable.Table{Rows: []classtable.Row{
	{Label: classtable.RuntimeClassLabel, Class: "kata", Count: 3, P50: 25, P90: 3600, P99: 3600, Recreations: 2, Pending: 1},
	{Label: classtable.RuntimeClassLabel, Class: `<script>alert("x")</script>`, P50: math.NaN(), P90: math.NaN(), P99: math.NaN(), Pending: 1},
	{Label: classtable.StorageClassLabel, Class: "fast,slow", Count: 12, P50: 0.25, P90: 1.23, P99: 75.4},
}}

func TestLandingPage(t *testing.T) {
	srv := landingServer(t, sampleTable, true, DefaultDashboardsURL)

	resp, body := get(t, http.MethodGet, srv.URL+"/")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Equal(t, "text/html; charset=utf-8", resp.Header.Get("Content-Type"))
	assert.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	assert.Contains(t, body, `<meta http-equiv="refresh" content="10">`)
	assert.NotContains(t, body, "<script", "class names are escaped")
	assert.Contains(t, body, "&lt;script&gt;")

	p := parsePage(t, strings.NewReader(body))
	assert.Equal(t, "podslo exporter", p.title)
	assert.Contains(t, p.text, "Version v1.2.3.")
	assert.NotContains(t, p.text, "have not synced")
	assert.Equal(t, wantHeader, p.header)
	assert.Equal(t, [][]string{
		{"runtime_class", "kata", "3", "25s", "1h", "1h", "2", "1"},
		{"runtime_class", `<script>alert("x")</script>`, "0", "-", "-", "-", "0", "1"},
		{"storage_class", "fast,slow", "12", "250ms", "1.2s", "1m15s", "0", "0"},
	}, p.rows)
	assert.Equal(t, wantLinks(DefaultDashboardsURL), p.links)

	// Every relative link leads somewhere on the exporter.
	for text, href := range p.links {
		if href == DefaultDashboardsURL {
			continue
		}
		resp, body := get(t, http.MethodGet, srv.URL+"/"+href)
		assert.Equal(t, http.StatusOK, resp.StatusCode, "link %q to %s: %s", text, href, body)
	}
}

func TestLandingPageWhileSyncing(t *testing.T) {
	srv := landingServer(t, classtable.Table{Rows: []classtable.Row{}}, false, "/grafana/dashboards")
	_, body := get(t, http.MethodGet, srv.URL+"/")
	p := parsePage(t, strings.NewReader(body))
	assert.Contains(t, p.text, "The informer caches have not synced yet: the table is incomplete.")
	assert.Contains(t, p.text, "No sandbox creation observed and no pod pending yet.")
	assert.Equal(t, wantHeader, p.header)
	assert.Empty(t, p.rows)
	assert.Equal(t, "/grafana/dashboards", p.links["Dashboards"], "a relative dashboards URL is kept")
}

func TestClassesAPI(t *testing.T) {
	srv := landingServer(t, sampleTable, true, DefaultDashboardsURL)
	resp, body := get(t, http.MethodGet, srv.URL+"/api/v1/classes")
	require.Equal(t, http.StatusOK, resp.StatusCode, body)
	assert.Equal(t, "application/json", resp.Header.Get("Content-Type"))
	assert.Equal(t, "no-store", resp.Header.Get("Cache-Control"))
	assert.JSONEq(t, `{"rows": [
		{"label": "runtime_class", "class": "kata", "count": 3, "p50_seconds": 25, "p90_seconds": 3600, "p99_seconds": 3600, "recreations": 2, "pending": 1},
		{"label": "runtime_class", "class": "<script>alert(\"x\")</script>", "count": 0, "p50_seconds": null, "p90_seconds": null, "p99_seconds": null, "recreations": 0, "pending": 1},
		{"label": "storage_class", "class": "fast,slow", "count": 12, "p50_seconds": 0.25, "p90_seconds": 1.23, "p99_seconds": 75.4, "recreations": 0, "pending": 0}
	]}`, body)
	var back classtable.Table
	require.NoError(t, json.Unmarshal([]byte(body), &back))
	assert.Equal(t, rowsText(sampleTable), rowsText(back))
}

func TestLandingRoutes(t *testing.T) {
	srv := landingServer(t, sampleTable, true, DefaultDashboardsURL)
	_, page := get(t, http.MethodGet, srv.URL+"/")
	_, classes := get(t, http.MethodGet, srv.URL+"/api/v1/classes")
	for _, tc := range []struct {
		method, path string
		status       int
		contentType  string
		// length is the Content-Length, -1 when not checked.
		length int
	}{
		{http.MethodHead, "/", http.StatusOK, "text/html; charset=utf-8", len(page)},
		{http.MethodHead, "/api/v1/classes", http.StatusOK, "application/json", len(classes)},
		{http.MethodPost, "/", http.StatusMethodNotAllowed, "text/plain; charset=utf-8", -1},
		{http.MethodGet, "/index.html", http.StatusNotFound, "text/plain; charset=utf-8", -1},
		{http.MethodGet, "/api/v1/classes/kata", http.StatusNotFound, "text/plain; charset=utf-8", -1},
		{http.MethodGet, "/api/v1/", http.StatusNotFound, "text/plain; charset=utf-8", -1},
		{http.MethodGet, "/metrics", http.StatusOK, "text/plain; charset=utf-8", -1},
	} {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			resp, body := get(t, tc.method, srv.URL+tc.path)
			assert.Equal(t, tc.status, resp.StatusCode, body)
			assert.Equal(t, tc.contentType, resp.Header.Get("Content-Type"))
			if tc.length >= 0 {
				assert.Equal(t, int64(tc.length), resp.ContentLength)
				assert.Empty(t, body, "HEAD has no body")
			}
		})
	}
}
