package main

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// FamilyResult is the comparison of one metric family.
type FamilyResult struct {
	Family string `json:"family"`
	// Compared is the observations (histograms: the expected _count;
	// counters: the expected value) the oracle is certain of, summed over
	// the family's series.
	Compared float64 `json:"compared"`
	// Lost is how far exported counts fall below the least expected;
	// Doubled how far they exceed the most expected.
	Lost    float64 `json:"lost"`
	Doubled float64 `json:"doubled"`
	// SumMismatches and BucketMismatches count histogram series whose _sum
	// or a cumulative bucket is outside its expected range.
	SumMismatches    int `json:"sumMismatches,omitempty"`
	BucketMismatches int `json:"bucketMismatches,omitempty"`
	// Uncertain is the width of the expected range of the counts: pods
	// whose outcome the run could not pin down.
	Uncertain float64 `json:"uncertain,omitempty"`
	// Unobservable is what happened but the exporter could not see by any
	// means: every revision showing it came and went while it was down or
	// its watch was (a pod deleted then, a sandbox re-created then).
	// Neither lost nor doubled; the docs say how each such case counts.
	Unobservable float64 `json:"unobservable,omitempty"`
	// Details are the mismatching series.
	Details []string `json:"details,omitempty"`
}

func (f *FamilyResult) ok() bool {
	return f.Lost == 0 && f.Doubled == 0 && f.SumMismatches == 0 && f.BucketMismatches == 0
}

// compare judges every aggregated series of the exposition against the
// expectation.
func compare(exp *expectation, got *exposition) []*FamilyResult {
	byFamily := map[string]*FamilyResult{}
	fam := func(name string) *FamilyResult {
		if byFamily[name] == nil {
			byFamily[name] = &FamilyResult{Family: name}
		}
		return byFamily[name]
	}
	for _, name := range append(append([]string{}, histograms...), counters...) {
		fam(name).Compared = exp.Observations[name]
	}
	keys := map[string]bool{}
	for k := range exp.Series {
		keys[k] = true
	}
	for k := range got.Series {
		if name, _ := splitSeries(k); name != mPending {
			keys[k] = true
		}
	}
	sorted := make([]string, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Strings(sorted)
	for _, k := range sorted {
		b := exp.Series[k]
		v := got.Series[k]
		name, _ := splitSeries(k)
		f := fam(familyOf(k))
		outside := v < b.Lo || v > b.Hi
		if strings.HasSuffix(name, "_sum") {
			// Sums of milliseconds (a 0.312 s pull) are added in another
			// order than the exporter's: allow their rounding.
			eps := 1e-9 * math.Max(1, math.Abs(b.Hi))
			outside = v < b.Lo-eps || v > b.Hi+eps
		}
		isCount := strings.HasSuffix(name, "_count") || !slices.Contains(histograms, f.Family)
		switch {
		case isCount:
			f.Uncertain += b.Hi - b.Lo
			if ideal := exp.Ideal[k]; ideal > b.Hi {
				f.Unobservable += ideal - b.Hi
			}
			if v < b.Lo {
				f.Lost += b.Lo - v
			}
			if v > b.Hi {
				f.Doubled += v - b.Hi
			}
		case strings.HasSuffix(name, "_sum") && outside:
			f.SumMismatches++
		case strings.HasSuffix(name, "_bucket") && outside:
			f.BucketMismatches++
		}
		if outside {
			f.Details = append(f.Details, fmt.Sprintf("%s = %s, expected %s", k, fmtNum(v), b))
		}
	}
	out := make([]*FamilyResult, 0, len(byFamily))
	for _, f := range byFamily {
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return familyOrder(out[i].Family) < familyOrder(out[j].Family) })
	return out
}

func familyOrder(name string) int {
	all := append(append([]string{}, histograms...), counters...)
	if i := slices.Index(all, name); i >= 0 {
		return i
	}
	return len(all)
}

func (b bounds) String() string {
	if b.Lo == b.Hi {
		return fmtNum(b.Lo)
	}
	return "[" + fmtNum(b.Lo) + ", " + fmtNum(b.Hi) + "]"
}

func fmtNum(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(v, 'f', -1, 64)
}

// PodCheck is the comparison of the per-pod series with the live pods.
type PodCheck struct {
	// LivePods is the pods that exist at the end.
	LivePods int `json:"livePods"`
	// Stale lists pod UIDs with per-pod series that no longer exist.
	Stale []string `json:"stale,omitempty"`
	// Wrong lists live pods whose per-pod series disagree with their
	// history.
	Wrong []string `json:"wrong,omitempty"`
	// Pending compares podslo_sandbox_creation_pending_pods.
	Pending []string `json:"pending,omitempty"`
}

func (p *PodCheck) ok() bool { return len(p.Stale) == 0 && len(p.Wrong) == 0 && len(p.Pending) == 0 }

// checkPods compares the per-pod series and the pending gauge with the live
// pods' expected final state, where what the exporter saw leaves one.
func checkPods(verdicts map[string]*podVerdict, names map[string]string, got *exposition) *PodCheck {
	pc := &PodCheck{}
	// pending counts the pods surely pending, maybe those a contradiction
	// leaves open (podslo reads it as a sandbox ready and lost).
	pending, maybe := map[string]float64{}, map[string]float64{}
	for uid, v := range verdicts {
		fin := v.Final
		if !fin.Alive {
			if _, ok := got.PerPod[uid]; ok {
				pc.Stale = append(pc.Stale, names[uid]+" "+uid)
			}
			continue
		}
		pc.LivePods++
		if fin.Pending {
			k := seriesKey(mPending, map[string]string{"runtime_class": fin.Labels.Runtime, "storage_class": fin.Labels.Storage,
				"user_error": strconv.FormatBool(fin.UserError)})
			if v.Contradiction != "" {
				maybe[k]++
			} else {
				pending[k]++
			}
		}
		if v.FinalUncertain {
			continue
		}
		series := got.PerPod[uid]
		var problems []string
		want := func(family string, exp *int64) {
			v, ok := series[family]
			switch {
			case exp == nil && ok:
				problems = append(problems, fmt.Sprintf("%s=%s, expected none", family, fmtNum(v)))
			case exp != nil && !ok:
				problems = append(problems, fmt.Sprintf("%s missing, expected %d", family, *exp))
			case exp != nil && v != float64(*exp):
				problems = append(problems, fmt.Sprintf("%s=%s, expected %d", family, fmtNum(v), *exp))
			}
		}
		want(mPodRecreated, fin.Recreations)
		wantNear := func(family string, exp *float64, room float64) {
			v, ok := series[family]
			switch {
			case exp == nil && ok:
				problems = append(problems, fmt.Sprintf("%s=%s, expected none", family, fmtNum(v)))
			case exp != nil && !ok:
				problems = append(problems, fmt.Sprintf("%s missing, expected %s", family, fmtNum(*exp)))
			case exp != nil && (v < *exp-room || v > *exp+room):
				problems = append(problems, fmt.Sprintf("%s=%s, expected %s ± %s", family, fmtNum(v), fmtNum(*exp), fmtNum(room)))
			}
		}
		// The per-pod series have their observation's precision: in
		// milliseconds, within watchSpread of the whole seconds.
		seconds := func(v *int64) *float64 {
			if v == nil {
				return nil
			}
			f := float64(*v)
			return &f
		}
		wantNear(mPodCreation, seconds(fin.Creation), watchSpread)
		wantNear(mPodReadiness, seconds(fin.Readiness), watchSpread)
		wantNear(mPodPull, fin.Pull, 0)
		wantNear(mPodPullSize, fin.PullSize, 0)
		// The start-up's end is the exporter's watch receive time however
		// late the update came (docs/metrics.md): up to watchSpread above
		// the whole seconds, or up to a second after the run's own watch
		// received it on a loaded machine.
		if v, ok := series[mPodStartup]; !ok || fin.Startup == nil || v <= *fin.Startup+watchSpread || v > fin.StartupSeen+lateReceive {
			wantNear(mPodStartup, fin.Startup, watchSpread)
		}
		if _, ok := series[mPodPending]; ok != fin.Pending {
			problems = append(problems, fmt.Sprintf("%s present=%v, expected %v", mPodPending, ok, fin.Pending))
		}
		if len(problems) > 0 {
			pc.Wrong = append(pc.Wrong, names[uid]+" "+uid+": "+strings.Join(problems, "; "))
		}
	}
	for uid := range got.PerPod {
		if _, ok := verdicts[uid]; !ok {
			pc.Stale = append(pc.Stale, "unknown pod "+uid)
		}
	}
	keys := map[string]bool{}
	for k := range pending {
		keys[k] = true
	}
	for k := range maybe {
		keys[k] = true
	}
	for k := range got.Series {
		if name, _ := splitSeries(k); name == mPending {
			keys[k] = true
		}
	}
	for k := range keys {
		if v := got.Series[k]; v < pending[k] || v > pending[k]+maybe[k] {
			want := fmtNum(pending[k])
			if maybe[k] > 0 {
				want = fmt.Sprintf("%s to %s", want, fmtNum(pending[k]+maybe[k]))
			}
			pc.Pending = append(pc.Pending, fmt.Sprintf("%s = %s, expected %s", k, fmtNum(v), want))
		}
	}
	sort.Strings(pc.Stale)
	sort.Strings(pc.Wrong)
	sort.Strings(pc.Pending)
	return pc
}

// lateReceive is how much later, in seconds, than the run's own watch the
// exporter's may receive an update: both are clients of one API server on
// a loaded machine, and each stamps an update as it comes off its watch.
const lateReceive = 1.0
