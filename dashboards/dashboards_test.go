package dashboards

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podslo/podslo/alerts"
	"github.com/podslo/podslo/internal/testenv"
)

// The parts of the classic dashboard JSON the checks read.
type dashboardJSON struct {
	UID        string      `json:"uid"`
	Title      string      `json:"title"`
	Panels     []panelJSON `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panelJSON struct {
	ID          int    `json:"id"`
	Type        string `json:"type"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Datasource  *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	FieldConfig struct {
		Defaults struct {
			Unit string `json:"unit"`
		} `json:"defaults"`
	} `json:"fieldConfig"`
	Targets []struct {
		Expr  string `json:"expr"`
		RefID string `json:"refId"`
	} `json:"targets"`
	Panels []panelJSON `json:"panels"`
}

func loadSpec(t *testing.T) *alerts.Spec {
	t.Helper()
	spec, err := alerts.Load("../alerts/slos.yaml")
	require.NoError(t, err)
	return spec
}

func loadDashboards(t *testing.T) map[string]dashboardJSON {
	t.Helper()
	files, err := filepath.Glob("dashboards_out/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	out := map[string]dashboardJSON{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		var d dashboardJSON
		require.NoError(t, json.Unmarshal(raw, &d), f)
		out[filepath.Base(f)] = d
	}
	return out
}

// panels flattens rows, collapsed or not.
func panels(ps []panelJSON) []panelJSON {
	var out []panelJSON
	for _, p := range ps {
		if p.Type == "row" {
			out = append(out, panels(p.Panels)...)
			continue
		}
		out = append(out, p)
	}
	return out
}

// TestGeneratedDashboardsAreUpToDate makes CI fail when the generator or
// slos.yaml changed but dashboards_out/ was not regenerated.
func TestGeneratedDashboardsAreUpToDate(t *testing.T) {
	want, err := Generate(loadSpec(t))
	require.NoError(t, err)
	files, err := filepath.Glob("dashboards_out/*.json")
	require.NoError(t, err)
	var got []string
	for _, f := range files {
		got = append(got, filepath.Base(f))
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		if !bytes.Equal(want[filepath.Base(f)], data) {
			t.Errorf("%s is stale: run `go generate ./dashboards` (make mixin) and commit the result", f)
		}
	}
	var names []string
	for name := range want {
		names = append(names, name)
	}
	slices.Sort(names)
	assert.Equal(t, names, got, "dashboards_out/ must hold exactly the generated dashboards")
}

func TestStableUIDsAndTitles(t *testing.T) {
	titles := map[string]string{}
	for file, d := range loadDashboards(t) {
		assert.Equal(t, d.UID+".json", file)
		titles[d.UID] = d.Title
	}
	assert.Equal(t, map[string]string{
		SLOOverviewUID:          "podslo / SLO overview",
		PodStartupUID:           "podslo / Pod start-up",
		TerminationReadinessUID: "podslo / Termination and readiness",
		AgentUID:                "podslo / Agent",
	}, titles)
}

var (
	// stringLiteral is a PromQL double-quoted string, with its escapes.
	stringLiteral = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	rangeSelector = regexp.MustCompile(`\[[^\]]*\]`)
	grafanaVar    = regexp.MustCompile(`\$\{?(\w+)\}?`)
)

// TestPanels: every panel has a description, a unit, the datasource
// variable and at least one query; every range in a query is
// $__rate_interval, so that rate() always spans enough scrapes at any zoom;
// Grafana variables appear only inside label matchers.
func TestPanels(t *testing.T) {
	for file, d := range loadDashboards(t) {
		for _, p := range panels(d.Panels) {
			where := fmt.Sprintf("%s: panel %d %q", file, p.ID, p.Title)
			assert.NotEmpty(t, p.Description, "%s: no description", where)
			assert.NotEmpty(t, p.FieldConfig.Defaults.Unit, "%s: no unit", where)
			if assert.NotNil(t, p.Datasource, "%s: no datasource", where) {
				assert.Equal(t, "${datasource}", p.Datasource.UID, where)
			}
			assert.NotEmpty(t, p.Targets, "%s: no query", where)
			for _, tg := range p.Targets {
				code := stringLiteral.ReplaceAllString(tg.Expr, `""`)
				for _, r := range rangeSelector.FindAllString(code, -1) {
					assert.Equal(t, "[$__rate_interval]", r, "%s, query %s: %s", where, tg.RefID, tg.Expr)
				}
				for _, m := range grafanaVar.FindAllString(rangeSelector.ReplaceAllString(code, ""), -1) {
					t.Errorf("%s, query %s: %s outside a label matcher", where, tg.RefID, m)
				}
			}
		}
	}
}

// TestVariablesAreUsed: every variable appears in a query, a panel's
// datasource or another variable's query.
func TestVariablesAreUsed(t *testing.T) {
	for file, d := range loadDashboards(t) {
		var uses []string
		for _, p := range panels(d.Panels) {
			if p.Datasource != nil {
				uses = append(uses, p.Datasource.UID)
			}
			for _, tg := range p.Targets {
				uses = append(uses, tg.Expr)
			}
		}
		var names []string
		for _, v := range d.Templating.List {
			names = append(names, v.Name)
			if q, ok := v.Query.(string); ok {
				uses = append(uses, q)
			}
		}
		assert.Equal(t, []string{"datasource", "cluster", "runtime_class", "storage_class"}, names, file)
		used := map[string]bool{}
		for _, u := range uses {
			for _, m := range grafanaVar.FindAllStringSubmatch(u, -1) {
				used[m[1]] = true
			}
		}
		for _, name := range names {
			assert.True(t, used[name], "%s: variable %s is not used", file, name)
		}
	}
}

// TestAlertLinks: every dashboard_url of the alerts opens a generated
// dashboard and sets only variables it has.
func TestAlertLinks(t *testing.T) {
	spec := loadSpec(t)
	vars := map[string][]string{}
	for _, d := range loadDashboards(t) {
		for _, v := range d.Templating.List {
			vars[d.UID] = append(vars[d.UID], v.Name)
		}
	}
	prefix := spec.Config.GrafanaURL + "/d/"
	for _, g := range spec.Alerts().Groups {
		for _, r := range g.Rules {
			link := r.Annotations["dashboard_url"]
			require.True(t, strings.HasPrefix(link, prefix), "%s: %s", r.Alert, link)
			uid, query, _ := strings.Cut(strings.TrimPrefix(link, prefix), "?")
			require.Contains(t, vars, uid, "%s links to an unknown dashboard", r.Alert)
			params, err := url.ParseQuery(query)
			require.NoError(t, err)
			for p := range params {
				assert.Contains(t, vars[uid], strings.TrimPrefix(p, "var-"), "%s: %s", r.Alert, link)
			}
		}
	}
}

// grafanaValues stand in for Grafana's variables so that Prometheus can
// parse the queries: the ranges become durations, anything else (inside a
// label matcher) a regexp.
var grafanaValues = map[string]string{"__rate_interval": "5m", "__interval": "1m", "__range": "1h"}

func substitute(expr string) string {
	return grafanaVar.ReplaceAllStringFunc(expr, func(m string) string {
		if v, ok := grafanaValues[grafanaVar.FindStringSubmatch(m)[1]]; ok {
			return v
		}
		return ".*"
	})
}

var labelValues = regexp.MustCompile(`^label_values\((.*),\s*\w+\)$`)

// TestQueriesParse hands every query, and the series selector of every
// label_values() variable, to Prometheus' own parser: promtool checks them
// as the expressions of a rule file.
func TestQueriesParse(t *testing.T) {
	checkQueriesParse(t, loadDashboards(t))
}

func checkQueriesParse(t *testing.T, dashboards map[string]dashboardJSON) {
	t.Helper()
	var b strings.Builder
	b.WriteString("groups:\n")
	n := 0
	add := func(expr string) {
		n++
		fmt.Fprintf(&b, "      - record: dashboard_query_%d\n        expr: %q\n", n, substitute(expr))
	}
	names := map[int]string{}
	for file, d := range dashboards {
		fmt.Fprintf(&b, "  - name: %q\n    rules:\n", file)
		for _, p := range panels(d.Panels) {
			for _, tg := range p.Targets {
				add(tg.Expr)
				names[n] = fmt.Sprintf("%s panel %d %q query %s", file, p.ID, p.Title, tg.RefID)
			}
		}
		for _, v := range d.Templating.List {
			if q, ok := v.Query.(string); ok && v.Type == "query" {
				m := labelValues.FindStringSubmatch(q)
				require.NotNil(t, m, "%s: variable %s: %s", file, v.Name, q)
				add(m[1])
				names[n] = fmt.Sprintf("%s variable %s", file, v.Name)
			}
		}
	}
	rules := filepath.Join(t.TempDir(), "dashboard_queries.yaml")
	require.NoError(t, os.WriteFile(rules, []byte(b.String()), 0o644))
	out, err := exec.Command(testenv.Promtool(t), "check", "rules", rules).CombinedOutput()
	if err != nil {
		// promtool names the failing rule dashboard_query_N.
		for i, name := range names {
			if bytes.Contains(out, []byte(fmt.Sprintf("dashboard_query_%d\"", i))) {
				t.Errorf("does not parse: %s", name)
			}
		}
		t.Fatalf("promtool check rules:\n%s", out)
	}
	assert.Contains(t, string(out), fmt.Sprintf("SUCCESS: %d rules found", n))
}
