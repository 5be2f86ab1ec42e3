package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/podslo/podslo/hack/harness"
)

// Results is the JSON the run writes.
type Results struct {
	Started       time.Time        `json:"started"`
	Finished      time.Time        `json:"finished"`
	Command       []string         `json:"command"`
	Machine       harness.Machine  `json:"machine"`
	Versions      harness.Versions `json:"versions"`
	Options       *Options         `json:"options"`
	Plan          []fault          `json:"plan"`
	Faults        *faults          `json:"faults"`
	GrowSeconds   float64          `json:"growSeconds"`
	SettleSeconds float64          `json:"settleSeconds"`
	Workload      driverStats      `json:"workload"`
	Instances     []instance       `json:"instances"`
	Restarts      RestartResult    `json:"restarts"`
	// PodsSeen is every pod UID the recorder saw; LivePods those alive at
	// the end.
	PodsSeen int `json:"podsSeen"`
	// UncertainPods had a state the run cannot tell whether the exporter
	// saw (by reason); LoosePods a creation-side state it may have missed.
	UncertainPods map[string]int `json:"uncertainPods"`
	LoosePods     map[string]int `json:"loosePods"`
	// Unjudged lists those pods with their reasons, and UnjudgedHistories
	// what the recorder saw of them.
	Unjudged []string `json:"unjudged,omitempty"`
	// Contradictions are the pods whose history the real kubelet cannot
	// have written (oracle.go, contradiction): a fault of deploy/kwok's,
	// which fails the run without charging podslo or the oracle.
	Contradictions    []string        `json:"contradictions,omitempty"`
	UnjudgedHistories []*history      `json:"unjudgedHistories,omitempty"`
	Families          []*FamilyResult `json:"families"`
	PodCheck          *PodCheck       `json:"podCheck"`
	ExporterLog       LogResult       `json:"exporterLog"`
	Timeline          *timeline       `json:"timeline"`
	// What the oracle needs besides the histories and the final scrape, to
	// judge a kept run again (--rejudge): when the comparison was made, the
	// claims' classes, the user-error pods and the pods' Pulled events.
	End        time.Time              `json:"end"`
	ClaimClass map[string]string      `json:"claimClass"`
	UserErrors []types.UID            `json:"userErrors"`
	Pulls      map[types.UID]podPulls `json:"pulls"`
	Failures   []string               `json:"failures,omitempty"`
	// PodCounts are the pods whose logged timeouts or exclusions the
	// oracle does not allow: where to look when those counters are off.
	PodCounts []string `json:"podCounts,omitempty"`
	// PodObservations are, for each family that is off, the pods whose
	// recorded samples (the exporter's debug log) match none of the
	// oracle's outcomes (see podobs.go).
	PodObservations []string `json:"podObservations,omitempty"`
}

// RestartResult is the time from each exporter start to its first 200 on
// /readyz.
type RestartResult struct {
	// AfterKill: starts after a SIGKILL; AfterCrash: after the exporter
	// died by itself; NeverReady: processes that died before /readyz.
	AfterKill  Stats    `json:"afterKill"`
	AfterCrash Stats    `json:"afterCrash"`
	Crashes    int      `json:"crashes"`
	NeverReady int      `json:"neverReady"`
	Fatal      []string `json:"fatal,omitempty"` // distinct crash causes
}

type Stats struct {
	N      int     `json:"n"`
	Min    float64 `json:"min"`
	Median float64 `json:"median"`
	Max    float64 `json:"max"`
}

func stats(v []float64) Stats {
	if len(v) == 0 {
		return Stats{}
	}
	s := slices.Clone(v)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Stats{N: len(s), Min: s[0], Median: m, Max: s[len(s)-1]}
}

// LogResult is what the exporter's logs show of the faults.
type LogResult struct {
	// TooOld counts "too old resource version" (410 Gone) lines: watches
	// that had to relist.
	TooOld int `json:"tooOld"`
	// Errors are distinct error messages, with how often each came.
	Errors map[string]int `json:"errors,omitempty"`
	// Counted is, for the timeout and exclusion counters, how often the
	// exporter logged each pod as counted (see podcounts.go).
	Counted map[string]map[types.UID]int `json:"counted,omitempty"`
	// Recorded is every sample the exporter logged as recorded into an
	// aggregated family: UID → family → values (see podobs.go).
	Recorded map[types.UID]map[string][]float64 `json:"recorded,omitempty"`
}

// judgeRun builds the expectation from the histories and the timeline (the
// run's Instances, Faults and End must be set) and compares it with the
// final scrape.
func judgeRun(res *Results, histories map[types.UID]*history, got *exposition) {
	res.Restarts = restarts(res.Instances)
	// A second judgement (--rejudge) replaces the first's verdicts.
	res.Failures = slices.DeleteFunc(res.Failures, func(f string) bool { return !strings.HasPrefix(f, "did not settle") })
	var outages []outageRecord
	if res.Faults != nil {
		outages = res.Faults.Outages
	}
	tl := buildTimeline(res.Instances, outages)
	res.Timeline = tl
	buckets := got.Buckets
	if buckets == nil {
		res.Failures = append(res.Failures, "no "+mCreation+" series to read the buckets from")
	}
	userError := map[types.UID]bool{}
	for _, uid := range res.UserErrors {
		userError[uid] = true
	}
	oc := &oracleConfig{Timeout: res.Options.SandboxTimeout, ClaimClass: res.ClaimClass, UserError: userError, Buckets: buckets, End: res.End, Pulls: res.Pulls}
	res.PodsSeen = len(histories)
	verdicts := map[types.UID]*podVerdict{}
	byUID := map[string]*podVerdict{}
	names := map[string]string{}
	res.UncertainPods, res.LoosePods = map[string]int{}, map[string]int{}
	res.Unjudged, res.UnjudgedHistories, res.Contradictions = nil, nil, nil
	for uid, h := range histories {
		v := oc.judge(h, tl)
		verdicts[uid] = &v
		byUID[string(uid)] = &v
		names[string(uid)] = h.Namespace + "/" + h.Name
		for _, u := range v.Uncertain {
			res.UncertainPods[u]++
		}
		for _, l := range v.Loose {
			res.LoosePods[l]++
		}
		if v.Contradiction != "" {
			res.Contradictions = append(res.Contradictions, fmt.Sprintf("%s/%s %s: %s; %s", h.Namespace, h.Name, uid, v.Contradiction, describeHistory(h)))
		}
		if len(v.Uncertain)+len(v.Loose) > 0 {
			res.Unjudged = append(res.Unjudged, fmt.Sprintf("%s/%s %s: uncertain %v, loose %v", h.Namespace, h.Name, uid, v.Uncertain, v.Loose))
			if len(res.UnjudgedHistories) < 100 {
				res.UnjudgedHistories = append(res.UnjudgedHistories, h)
			}
		}
	}
	sort.Strings(res.Unjudged)
	sort.Strings(res.Contradictions)
	if n := len(res.Contradictions); n > 0 {
		res.Failures = append(res.Failures, fmt.Sprintf("deploy/kwok wrote %d pod(s) a kubelet cannot (a container started while no sandbox was ever ready), first %s",
			n, res.Contradictions[0]))
	}
	exp := oc.expect(verdicts)
	res.Families = compare(exp, got)
	res.PodCheck = checkPods(byUID, names, got)
	for _, fam := range res.Families {
		if !fam.ok() {
			res.Failures = append(res.Failures, fmt.Sprintf("%s: lost %s, doubled %s, %d sums and %d buckets off",
				fam.Family, fmtNum(fam.Lost), fmtNum(fam.Doubled), fam.SumMismatches, fam.BucketMismatches))
		}
	}
	if !res.PodCheck.ok() {
		res.Failures = append(res.Failures, fmt.Sprintf("per-pod series: %d of pods that no longer exist, %d wrong, %d pending gauges off",
			len(res.PodCheck.Stale), len(res.PodCheck.Wrong), len(res.PodCheck.Pending)))
	}
	res.PodCounts = checkPodCounts(res.ExporterLog.Counted, verdicts, histories, oc)
	var off []string
	for _, fam := range res.Families {
		if !fam.ok() {
			off = append(off, fam.Family)
		}
	}
	res.PodObservations = checkPodObservations(res.ExporterLog.Recorded, off, verdicts, histories)
}

func restarts(insts []instance) RestartResult {
	var r RestartResult
	var afterKill, afterCrash []float64
	fatal := map[string]bool{}
	for i, in := range insts {
		if in.Ready.IsZero() && !in.Exit.IsZero() {
			r.NeverReady++
		}
		if !in.Exit.IsZero() && !in.Killed && i < len(insts)-1 {
			r.Crashes++
			if in.Fatal != "" && !fatal[in.Fatal] {
				fatal[in.Fatal] = true
				r.Fatal = append(r.Fatal, in.Fatal)
			}
		}
		if i == 0 || in.Ready.IsZero() {
			continue
		}
		sec := in.Ready.Sub(in.Start).Seconds()
		if insts[i-1].Killed {
			afterKill = append(afterKill, sec)
		} else {
			afterCrash = append(afterCrash, sec)
		}
	}
	r.AfterKill, r.AfterCrash = stats(afterKill), stats(afterCrash)
	return r
}

// analyseLogs counts the exporter's relists after 410 Gone and its
// distinct error messages.
func analyseLogs(dir string) LogResult {
	lr := LogResult{Errors: map[string]int{}, Counted: map[string]map[types.UID]int{}, Recorded: map[types.UID]map[string][]float64{}}
	files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, f := range files {
		lr.TooOld += len(grepLog(f, "too old resource version"))
		for _, line := range grepLog(f, "level=ERROR", "fatal error:", "podslo:") {
			lr.Errors[errorKey(line)]++
		}
		for msg := range podCountLogs {
			for _, line := range grepLog(f, msg) {
				countLogged(lr.Counted, line)
			}
		}
		for _, line := range grepLog(f, "msg=Recorded ") {
			addRecorded(lr.Recorded, line)
		}
	}
	return lr
}

// errorKey is a log line without its time and per-pod details.
func errorKey(line string) string {
	if i := strings.Index(line, "msg="); i >= 0 {
		line = line[i:]
		if j := strings.Index(line, " pod="); j >= 0 {
			line = line[:j]
		}
		if j := strings.Index(line, " uid="); j >= 0 {
			line = line[:j]
		}
	}
	if len(line) > 200 {
		line = line[:200]
	}
	return line
}

func (r *Results) write(out, markdown string) error {
	for _, p := range []string{out, markdown} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, b, 0o644); err != nil {
		return err
	}
	return os.WriteFile(markdown, []byte(r.markdown()), 0o644)
}

func (r *Results) markdown() string {
	var b strings.Builder
	o := r.Options
	fmt.Fprintf(&b, "# Chaos run %s\n\n", r.Started.Format(time.RFC3339))
	fmt.Fprintf(&b, "`%s` at podslo %s, Kubernetes %s, kwok %s; %d CPUs, %.1f GiB.\n\n",
		strings.Join(r.Command, " "), r.Versions.Podslo, r.Versions.Kubernetes, r.Versions.Kwok, r.Machine.CPUs, float64(r.Machine.MemBytes)/(1<<30))
	verdict := "**0 lost, 0 doubled: every series matches.**"
	if len(r.Failures) > 0 {
		verdict = "**Mismatches:** " + strings.Join(r.Failures, "; ")
	}
	fmt.Fprintf(&b, "%s\n\n", verdict)
	for _, p := range r.PodCounts {
		fmt.Fprintf(&b, "- Pod counted off: %s\n", p)
	}
	for _, p := range r.PodObservations {
		fmt.Fprintf(&b, "- Pod recorded off: %s\n", p)
	}
	if len(r.PodCounts)+len(r.PodObservations) > 0 {
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "- Pods: %d alive, %d seen in all; created %d (%d crash, %d crash-looping in their sandbox, %d with a readiness flap, %d stuck, %d user-error, %d with an init container, %d with three containers, %d with a failed image pull first), deleted %d (%d forced), %d names used again.\n",
		o.Pods, r.PodsSeen, r.Workload.Created, r.Workload.Crash, r.Workload.CrashLoop, r.Workload.Flap, r.Workload.Stuck, r.Workload.UserError, r.Workload.Init, r.Workload.Multi, r.Workload.PullsFailed, r.Workload.Deleted, r.Workload.ForceDeleted, r.Workload.SameNameAgain)
	if f := r.Faults; f != nil {
		fmt.Fprintf(&b, "- Faults: %d kills survived", len(f.Kills))
		for _, out := range f.Outages {
			fmt.Fprintf(&b, "; kube-apiserver down %.0f s (a watch from before the stop: %s; the exporter handled pod events again %.1f s after the API server's return, %.0f of them in its first 5 s for %d pods; %s, %s)",
				out.APIReady.Sub(out.Stop).Seconds(), out.StaleWatch, out.WatchBack.Sub(out.APIReady).Seconds(), out.EventsAtReturn, out.LivePods,
				loggedAt("it logged the API server unreachable", out.Unreachable, out.Stopping, "the stop began"),
				loggedAt("reachable again", out.Reachable, out.APIReady, "its return"))
		}
		fmt.Fprintf(&b, "; %d etcd compactions", len(f.Compactions))
		for _, d := range f.DiskFull {
			fmt.Fprintf(&b, "; state filesystem full for %.0f s", d.Freed.Sub(d.Start).Seconds())
		}
		fmt.Fprintf(&b, "; %d pods force-deleted and re-created under their names before the relist.\n", f.Replaced)
	}
	rs := r.Restarts
	fmt.Fprintf(&b, "- Start to /readyz: after a kill %s; after a crash %s; %d crashes, %d processes never ready.\n",
		rs.AfterKill, rs.AfterCrash, rs.Crashes, rs.NeverReady)
	for _, f := range rs.Fatal {
		fmt.Fprintf(&b, "  - crash: `%s`\n", f)
	}
	fmt.Fprintf(&b, "- 410 Gone relists in the exporter's logs: %d.\n", r.ExporterLog.TooOld)
	fmt.Fprintf(&b, "- Pods the run cannot judge exactly: uncertain %v, loose %v.\n", r.UncertainPods, r.LoosePods)
	for _, u := range head(r.Unjudged, 20) {
		fmt.Fprintf(&b, "  - %s\n", u)
	}
	b.WriteString("\n")
	b.WriteString("| Family | Observations compared | Lost | Doubled | Sums off | Buckets off | Uncertain | Unobservable |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, f := range r.Families {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %d | %d | %s | %s |\n", f.Family, fmtNum(f.Compared), fmtNum(f.Lost), fmtNum(f.Doubled),
			f.SumMismatches, f.BucketMismatches, fmtNum(f.Uncertain), fmtNum(f.Unobservable))
	}
	if pc := r.PodCheck; pc != nil {
		fmt.Fprintf(&b, "\nPer-pod series: %d live pods; %d pods with series that no longer exist, %d with wrong series; %d pending gauges off.\n",
			pc.LivePods, len(pc.Stale), len(pc.Wrong), len(pc.Pending))
	}
	var details []string
	for _, f := range r.Families {
		details = append(details, f.Details...)
	}
	if r.PodCheck != nil {
		details = append(details, r.PodCheck.Pending...)
		details = append(details, head(r.PodCheck.Stale, 20)...)
		details = append(details, head(r.PodCheck.Wrong, 20)...)
	}
	if len(details) > 0 {
		b.WriteString("\n## Mismatches\n\n")
		for _, d := range details {
			fmt.Fprintf(&b, "- `%s`\n", d)
		}
	}
	if len(r.ExporterLog.Errors) > 0 {
		b.WriteString("\n## Exporter errors logged\n\n")
		keys := make([]string, 0, len(r.ExporterLog.Errors))
		for k := range r.ExporterLog.Errors {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(&b, "- %d× `%s`\n", r.ExporterLog.Errors[k], k)
		}
	}
	return b.String()
}

func (s Stats) String() string {
	if s.N == 0 {
		return "none"
	}
	return fmt.Sprintf("min %.2f s, median %.2f s, max %.2f s (%d)", s.Min, s.Median, s.Max, s.N)
}

func head(s []string, n int) []string {
	if len(s) <= n {
		return s
	}
	return append(slices.Clone(s[:n]), fmt.Sprintf("… and %d more", len(s)-n))
}

// loggedAt says when a log line came, relative to a moment of the run.
func loggedAt(what string, at, from time.Time, fromName string) string {
	if at.IsZero() {
		return what + ": never"
	}
	return fmt.Sprintf("%s %.1f s after %s", what, at.Sub(from).Seconds(), fromName)
}
