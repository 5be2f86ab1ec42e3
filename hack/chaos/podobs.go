package main

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// The exporter, run at debug level, logs every sample it records into an
// aggregated family with its pod's UID (pipeline.logRecorded). When a
// family disagrees with the ground truth, its series name no pod; these
// lines are where the run finds the pod: it compares, pod by pod, what the
// exporter recorded with the oracle's outcomes.

// The pipeline's logger carries its component (component=pipeline)
// between the message and the line's own attributes.
var recordedRE = regexp.MustCompile(`msg=Recorded .*?\buid=(\S+) family=(\S+) labels=(?:"[^"]*"|\S*) value=(\S+)`)

// addRecorded adds the sample of one exporter log line to recorded (UID →
// family → values; a counter's increments).
func addRecorded(recorded map[types.UID]map[string][]float64, line string) {
	m := recordedRE.FindStringSubmatch(line)
	if m == nil {
		return
	}
	v, err := strconv.ParseFloat(m[3], 64)
	if err != nil {
		return
	}
	uid := types.UID(m[1])
	if recorded[uid] == nil {
		recorded[uid] = map[string][]float64{}
	}
	recorded[uid][m[2]] = append(recorded[uid][m[2]], v)
}

// outcomeValues is what an outcome adds to one family: a histogram's
// values, sorted, or a counter's increments as one total.
func outcomeValues(oc outcome, family string) []float64 {
	if slices.Contains(histograms, family) {
		var vs []float64
		for k, obs := range oc.Observe {
			if familyOf(k) == family {
				vs = append(vs, obs...)
			}
		}
		slices.Sort(vs)
		return vs
	}
	if n := familyTotal(oc, family); n != 0 {
		return []float64{n}
	}
	return nil
}

// sameValues reports whether the exporter's values of a family match an
// outcome's: as many, each within watchSpread (the exporter's precise
// observations against the oracle's whole seconds).
func sameValues(got, want []float64, histogram bool) bool {
	if !histogram {
		var n float64
		for _, v := range got {
			n += v
		}
		return len(want) == 0 && n == 0 || len(want) == 1 && n == want[0]
	}
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if math.Abs(got[i]-want[i]) > watchSpread {
			return false
		}
	}
	return true
}

// maxPodsOff bounds the pods listed per family: the first few tell the story.
const maxPodsOff = 5

// checkPodObservations lists, for each family that is off, the pods whose
// recorded samples match none of the oracle's outcomes for them, with the
// pod's history. A kill between a write and its log line shows as a sample
// missing here: these lines are where to look, the families are the
// verdict.
func checkPodObservations(recorded map[types.UID]map[string][]float64, families []string, verdicts map[types.UID]*podVerdict, histories map[types.UID]*history) []string {
	var out []string
	for _, family := range families {
		histogram := slices.Contains(histograms, family)
		var lines []string
		uids := map[types.UID]bool{}
		for uid := range verdicts {
			uids[uid] = true
		}
		for uid := range recorded {
			uids[uid] = true
		}
		for uid := range uids {
			got := slices.Clone(recorded[uid][family])
			slices.Sort(got)
			v, h := verdicts[uid], histories[uid]
			if v == nil || h == nil {
				if len(got) > 0 {
					lines = append(lines, fmt.Sprintf("%s: pod %s recorded %v, unknown to the recorder", family, uid, got))
				}
				continue
			}
			match := false
			var wants []string
			for _, oc := range append(slices.Clone(v.Outcomes), v.Ideal) {
				want := outcomeValues(oc, family)
				match = match || sameValues(got, want, histogram)
				if w := fmt.Sprint(want); !slices.Contains(wants, w) {
					wants = append(wants, w)
				}
			}
			if match {
				continue
			}
			lines = append(lines, fmt.Sprintf("%s: pod %s/%s %s recorded %v, expected one of %s; uncertain %v, loose %v; %s",
				family, h.Namespace, h.Name, uid, got, strings.Join(wants, " "), v.Uncertain, v.Loose, describeHistory(h)))
		}
		sort.Strings(lines)
		if len(lines) > maxPodsOff {
			lines = append(lines[:maxPodsOff], fmt.Sprintf("%s: %d more pods", family, len(lines)-maxPodsOff))
		}
		out = append(out, lines...)
	}
	return out
}
