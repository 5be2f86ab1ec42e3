package exporter

import (
	"bytes"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"html/template"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"

	"github.com/podslo/podslo/internal/classtable"
	"github.com/podslo/podslo/internal/slostatus"
)

//go:embed landing.html
var landingHTML string

// landingCSP allows the page its one style element, by hash, and nothing
// else.
var landingCSP = func() string {
	m := regexp.MustCompile(`(?s)<style>(.*?)</style>`).FindStringSubmatch(landingHTML)
	sum := sha256.Sum256([]byte(m[1]))
	return "default-src 'none'; style-src 'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
}()

// landingTemplate escapes every value, class names included: they come from
// the cluster's objects, not from podslo.
var landingTemplate = template.Must(template.New("landing").
	Funcs(template.FuncMap{"seconds": classtable.FormatSeconds}).
	Parse(landingHTML))

// landing serves what a person opening the exporter's address sees, in the
// manner of Prometheus exporters' landing pages, and the same per-class
// table as JSON for `podslo demo` and other clients.
type landing struct {
	table      func() classtable.Table
	slos       func() slostatus.Report
	ready      func() bool
	version    string
	dashboards string
	// policies is the NetworkPolicy section; nil leaves it out.
	policies func() policyTable
	log      *slog.Logger
}

// register adds / and /api/v1/classes to mux. A GET pattern also serves
// HEAD; "/{$}" matches "/" alone, so that every other path stays a 404.
func (l *landing) register(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", l.page)
	mux.HandleFunc("GET /api/v1/classes", l.classes)
	mux.HandleFunc("GET /api/v1/slos", l.sloReport)
}

type landingData struct {
	Version       string
	Ready         bool
	Rows          []classtable.Row
	DashboardsURL string
	Policies      policyTable
	SLOs          sloPage
}

func (l *landing) page(w http.ResponseWriter, r *http.Request) {
	// Rendered whole before anything is sent, so that a template error is a
	// 500 and not half a page.
	var buf bytes.Buffer
	data := landingData{
		Version:       l.version,
		Ready:         l.ready(),
		Rows:          l.table().Rows,
		DashboardsURL: l.dashboards,
		SLOs:          newSLOPage(l.slos()),
	}
	if l.policies != nil {
		data.Policies = l.policies()
	}
	err := landingTemplate.Execute(&buf, data)
	if err != nil {
		l.log.Error("Rendering the landing page failed", "err", err)
		http.Error(w, "rendering the landing page failed", http.StatusInternalServerError)
		return
	}
	// Nothing but the page's own style runs or loads: no script, no
	// outside asset, no frame; the charts are inline SVG.
	w.Header().Set("Content-Security-Policy", landingCSP)
	respond(w, r, "text/html; charset=utf-8", buf.Bytes())
}

// sloReport serves the windowed counts behind the SLO table, as counts, so
// that `podslo report` can add up several exporters' before evaluating.
func (l *landing) sloReport(w http.ResponseWriter, r *http.Request) {
	l.json(w, r, "SLO report", l.slos())
}

func (l *landing) classes(w http.ResponseWriter, r *http.Request) {
	l.json(w, r, "class table", l.table())
}

// json serves v, named what in the error it may log and answer.
func (l *landing) json(w http.ResponseWriter, r *http.Request, what string, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		l.log.Error("Encoding a JSON answer failed", "what", what, "err", err)
		http.Error(w, "encoding the "+what+" failed", http.StatusInternalServerError)
		return
	}
	respond(w, r, "application/json", append(body, '\n'))
}

func respond(w http.ResponseWriter, r *http.Request, contentType string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	// The table is live: a cached copy would show old numbers as current.
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(body)
}
