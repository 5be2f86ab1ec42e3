package alerts

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// The chart's values change the SLOs its rules are generated for
// (monitoring.slos.<name>: objective, threshold, minEvents,
// classThresholds; monitoring.extraSLOs: SLOs made from one of slos.yaml).
// The exporter evaluates the same SLOs on its landing page: the chart
// hands it those values (--slos-values), and WithValues applies them as
// the chart's _monitoring.tpl does. TestChartValues holds the two equal.

// LoadFlags reads the SLOs the way the commands that take --slos-file and
// --slos-values do (the exporter, `podslo slo export`): specFile, or the
// slos.yaml this release ships when it is empty, with the chart values
// file valuesFile applied when it is not. Errors name the flag.
func LoadFlags(specFile, valuesFile string) (*Spec, error) {
	spec, err := Default()
	if specFile != "" {
		if spec, err = Load(specFile); err != nil {
			return nil, fmt.Errorf("--slos-file: %w", err)
		}
	}
	if err != nil || valuesFile == "" {
		return spec, err
	}
	raw, err := os.ReadFile(valuesFile)
	if err != nil {
		return nil, fmt.Errorf("--slos-values: %w", err)
	}
	if spec, err = spec.WithValues(raw); err != nil {
		return nil, fmt.Errorf("--slos-values %s: %w", valuesFile, err)
	}
	return spec, nil
}

// chartValues is the part of a values file WithValues reads.
type chartValues struct {
	Monitoring struct {
		SLOs      map[string]sloValues   `json:"slos"`
		ExtraSLOs map[string]extraValues `json:"extraSLOs"`
	} `json:"monitoring"`
}

// sloValues are the numbers a chart user sets of an SLO.
type sloValues struct {
	Objective       *float64                     `json:"objective,omitempty"`
	Threshold       *string                      `json:"threshold,omitempty"`
	MinEvents       *int                         `json:"minEvents,omitempty"`
	ClassThresholds map[string]map[string]string `json:"classThresholds,omitempty"`
}

// extraValues is one extra SLO.
type extraValues struct {
	From     string   `json:"from"`
	Alert    string   `json:"alert"`
	Title    string   `json:"title"`
	Matchers []string `json:"matchers"`
	sloValues
}

// WithValues returns the spec with a chart values file's monitoring.slos
// and monitoring.extraSLOs applied, validated. Every other value is
// ignored: it concerns the rules' Prometheus, not what an SLO is. An SLO
// the values name but the spec lacks, or a field the chart does not have,
// is an error.
func (s *Spec) WithValues(raw []byte) (*Spec, error) {
	js, err := utilyaml.ToJSON(raw)
	if err != nil {
		return nil, err
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(js, &all); err != nil {
		return nil, err
	}
	var v chartValues
	if m, ok := all["monitoring"]; ok {
		var mon map[string]json.RawMessage
		if err := json.Unmarshal(m, &mon); err != nil {
			return nil, fmt.Errorf("monitoring: %w", err)
		}
		// Only the SLOs' keys, each strictly: a misspelt field must not
		// silently keep the default.
		picked, _ := json.Marshal(map[string]json.RawMessage{"slos": mon["slos"], "extraSLOs": mon["extraSLOs"]})
		dec := json.NewDecoder(bytes.NewReader([]byte(`{"monitoring":` + string(picked) + `}`)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("monitoring.slos or monitoring.extraSLOs: %w", err)
		}
	}
	out := *s
	out.SLOs = make([]SLO, len(s.SLOs))
	for i := range s.SLOs {
		out.SLOs[i] = s.SLOs[i].clone()
	}
	byName := func(name string) int {
		return slices.IndexFunc(out.SLOs, func(slo SLO) bool { return slo.Name == name })
	}
	for _, name := range slices.Sorted(maps.Keys(v.Monitoring.SLOs)) {
		i := byName(name)
		if i < 0 {
			return nil, fmt.Errorf("monitoring.slos.%s: slos.yaml has no SLO of that name", name)
		}
		if err := v.Monitoring.SLOs[name].apply(&out.SLOs[i]); err != nil {
			return nil, fmt.Errorf("monitoring.slos.%s: %w", name, err)
		}
	}
	// Each extra SLO follows the SLO it is made from, in name order, as
	// the chart's rule groups have them.
	base := slices.Clone(out.SLOs)
	made := map[string]int{}
	for _, name := range slices.Sorted(maps.Keys(v.Monitoring.ExtraSLOs)) {
		x := v.Monitoring.ExtraSLOs[name]
		from := slices.IndexFunc(base, func(slo SLO) bool { return slo.Name == x.From })
		if from < 0 {
			return nil, fmt.Errorf("monitoring.extraSLOs.%s.from: %q is not an SLO of slos.yaml", name, x.From)
		}
		slo := base[from].clone()
		slo.Runbook = cmp.Or(slo.Runbook, slo.Alert)
		slo.Name, slo.Alert, slo.Title, slo.Matchers = name, x.Alert, x.Title, x.Matchers
		if err := x.apply(&slo); err != nil {
			return nil, fmt.Errorf("monitoring.extraSLOs.%s: %w", name, err)
		}
		out.SLOs = slices.Insert(out.SLOs, byName(x.From)+1+made[x.From], slo)
		made[x.From]++
	}
	if err := out.Validate(); err != nil {
		return nil, err
	}
	return &out, nil
}

func (v sloValues) apply(slo *SLO) error {
	if slo.Latency == nil && (v.Threshold != nil || v.ClassThresholds != nil) {
		return fmt.Errorf("%s counts successes and failures: it has no threshold", slo.Name)
	}
	if v.Objective != nil {
		slo.Objective = *v.Objective
	}
	if v.MinEvents != nil {
		slo.MinEvents = *v.MinEvents
	}
	if slo.Latency != nil {
		if v.Threshold != nil {
			slo.Latency.Threshold = *v.Threshold
		}
		if v.ClassThresholds != nil {
			slo.Latency.ClassThresholds = v.ClassThresholds
		}
	}
	return nil
}

// clone copies slo deeply enough that changing the copy's numbers leaves
// slo alone.
func (slo SLO) clone() SLO {
	c := slo
	if slo.Latency != nil {
		l := *slo.Latency
		c.Latency = &l
	}
	c.Matchers = slices.Clone(slo.Matchers)
	c.GroupBy = slices.Clone(slo.GroupBy)
	return c
}
