package slostatus

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/model"

	"github.com/podslo/podslo/alerts"
)

// FromPrometheus reads a Report off a Prometheus (or anything that answers
// its query API, such as Thanos) that runs podslo's recording rules for
// spec: each SLO's recorded error ratios over every window and its events
// over the alerts' long windows and its own, per cluster and class. It
// reads what the rules recorded, nothing else: a class's latency
// distribution and its days are not recorded, so they are left out, and a
// window is what Prometheus' increase() gives (its events extrapolated).
func FromPrometheus(ctx context.Context, client *http.Client, base string, spec *alerts.Spec, now time.Time) (Report, error) {
	rep := Report{Generated: now, Sources: []Source{{Scope: "the clusters of the Prometheus", URL: base}}}
	for i := range spec.SLOs {
		slo := &spec.SLOs[i]
		for _, label := range slo.GroupBy {
			s, err := prometheusSLO(ctx, client, base, spec, slo, label, now)
			if err != nil {
				return Report{}, err
			}
			rep.SLOs = append(rep.SLOs, s)
		}
	}
	return rep, nil
}

func prometheusSLO(ctx context.Context, client *http.Client, base string, spec *alerts.Spec, slo *alerts.SLO, label string, now time.Time) (SLO, error) {
	window := model.Duration(slo.WindowDuration()).String()
	s := SLO{
		Name: slo.Name, Title: slo.Title, Alert: slo.Alert, Events: slo.Events,
		Objective: slo.Objective, Window: window, Label: label, MinEvents: slo.MinEvents,
		Classes: []Class{}, spec: slo,
	}
	if slo.Latency != nil {
		s.Threshold = slo.ThresholdText()
	}
	// One query per SLO and label: every window's ratio and events.
	prefix := spec.Level(label) + ":podslo_" + slo.Name + "_"
	series, err := query(ctx, client, base, fmt.Sprintf(`{__name__=~%q}`, regexp.QuoteMeta(prefix)+"(errors:ratio_rate|events:increase).+"), now)
	if err != nil {
		return SLO{}, fmt.Errorf("slo %s: %w", slo.Name, err)
	}
	type key struct{ cluster, class string }
	classes := map[key]*Class{}
	for _, sr := range series {
		name := strings.TrimPrefix(sr.Metric["__name__"], prefix)
		kind, w, ok := strings.Cut(name, ":")
		if !ok {
			continue
		}
		k := key{sr.Metric[spec.Config.ClusterLabel], sr.Metric[label]}
		c := classes[k]
		if c == nil {
			c = &Class{Class: k.class, Cluster: k.cluster, Windows: map[string]Counts{}, Ratios: map[string]float64{}}
			if slo.Latency != nil {
				c.ThresholdSeconds = slo.ThresholdFor(map[string]string{label: k.class})
			}
			classes[k] = c
		}
		switch {
		case kind == "errors" && strings.HasPrefix(w, "ratio_rate"):
			c.Ratios[strings.TrimPrefix(w, "ratio_rate")] = sr.Value
		case kind == "events" && strings.HasPrefix(w, "increase"):
			n := c.Windows[strings.TrimPrefix(w, "increase")]
			n.Total = sr.Value
			c.Windows[strings.TrimPrefix(w, "increase")] = n
		}
	}
	for _, c := range classes {
		// Where both are recorded, the window's counts: events, and the
		// good ones the ratio leaves.
		for w, n := range c.Windows {
			if r, ok := c.Ratios[w]; ok && n.Total > 0 {
				n.Good = n.Total * (1 - r)
				c.Windows[w] = n
				delete(c.Ratios, w)
			}
		}
		s.Classes = append(s.Classes, *c)
	}
	slices.SortFunc(s.Classes, func(a, b Class) int {
		if a.Cluster != b.Cluster {
			return strings.Compare(a.Cluster, b.Cluster)
		}
		return strings.Compare(a.Class, b.Class)
	})
	return s, nil
}

// sample is one series of an instant query's answer.
type sample struct {
	Metric map[string]string
	Value  float64
}

// query runs an instant query at now.
func query(ctx context.Context, client *http.Client, base, q string, now time.Time) ([]sample, error) {
	u := strings.TrimSuffix(base, "/") + "/api/v1/query?" + url.Values{"query": {q}, "time": {strconv.FormatInt(now.Unix(), 10)}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", base, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("query %s: %w", base, err)
	}
	var answer struct {
		Status, Error string
		Data          struct {
			ResultType string
			Result     []struct {
				Metric map[string]string
				Value  [2]json.RawMessage
			}
		}
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return nil, fmt.Errorf("query %s: %s: %w", base, resp.Status, err)
	}
	if answer.Status != "success" {
		return nil, fmt.Errorf("query %s: %s: %s", base, resp.Status, answer.Error)
	}
	if answer.Data.ResultType != "vector" {
		return nil, fmt.Errorf("query %s: a %s, not a vector", base, answer.Data.ResultType)
	}
	out := make([]sample, 0, len(answer.Data.Result))
	for _, r := range answer.Data.Result {
		var text string
		if err := json.Unmarshal(r.Value[1], &text); err != nil {
			return nil, fmt.Errorf("query %s: a sample value: %w", base, err)
		}
		v, err := strconv.ParseFloat(text, 64)
		if err != nil {
			return nil, fmt.Errorf("query %s: a sample value: %w", base, err)
		}
		out = append(out, sample{Metric: r.Metric, Value: v})
	}
	return out, nil
}
