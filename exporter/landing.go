package exporter

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"html/template"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/podslo/podslo/internal/classtable"
)

//go:embed landing.html
var landingHTML string

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
}

type landingData struct {
	Version       string
	Ready         bool
	Rows          []classtable.Row
	DashboardsURL string
	Policies      policyTable
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
	respond(w, r, "text/html; charset=utf-8", buf.Bytes())
}

func (l *landing) classes(w http.ResponseWriter, r *http.Request) {
	body, err := json.Marshal(l.table())
	if err != nil {
		l.log.Error("Encoding the class table failed", "err", err)
		http.Error(w, "encoding the class table failed", http.StatusInternalServerError)
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
