package main

import (
	"fmt"
	"math"
	"regexp"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// The exporter logs each sandbox creation timeout and each exclusion once it
// is recorded (pipeline.logTimeouts). These counters name no pod in their
// series, so when one is off the logs are where the run finds the pod: it
// compares, pod by pod, what the exporter logged with what the oracle
// allows.
var podCountLogs = map[string]string{
	"Sandbox creation timed out":                       mTimeouts,
	"Sandbox creation left out of the SLI: user error": mExcluded,
}

var uidRE = regexp.MustCompile(` uid=(\S+)`)

// countLogged adds the pods named by one exporter log line to counted
// (family → UID → times logged).
func countLogged(counted map[string]map[types.UID]int, line string) {
	for msg, family := range podCountLogs {
		if !strings.Contains(line, `msg="`+msg+`"`) {
			continue
		}
		m := uidRE.FindStringSubmatch(line)
		if m == nil {
			return
		}
		if counted[family] == nil {
			counted[family] = map[types.UID]int{}
		}
		counted[family][types.UID(m[1])]++
		return
	}
}

// checkPodCounts lists the pods whose logged timeouts or exclusions fall
// outside what the oracle allows for them: logged more often than its most
// (doubled), or less than its least (lost, or killed between the write and
// the log line). Each line carries what is needed to judge it by hand: the
// pod's revisions as the recorder saw them.
func checkPodCounts(counted map[string]map[types.UID]int, verdicts map[types.UID]*podVerdict, histories map[types.UID]*history, o *oracleConfig) []string {
	var out []string
	for _, family := range []string{mTimeouts, mExcluded} {
		uids := map[types.UID]bool{}
		for uid := range counted[family] {
			uids[uid] = true
		}
		for uid, v := range verdicts {
			for _, oc := range v.Outcomes {
				if familyTotal(oc, family) > 0 {
					uids[uid] = true
				}
			}
		}
		for uid := range uids {
			logged := counted[family][uid]
			v, h := verdicts[uid], histories[uid]
			if v == nil || h == nil {
				out = append(out, fmt.Sprintf("%s: pod %s logged %d, unknown to the recorder", family, uid, logged))
				continue
			}
			lo, hi := math.Inf(1), math.Inf(-1)
			for _, oc := range v.Outcomes {
				n := familyTotal(oc, family)
				lo, hi = math.Min(lo, n), math.Max(hi, n)
			}
			if len(v.Outcomes) == 0 {
				lo, hi = 0, 0
			}
			if len(v.Loose) > 0 {
				// As expect does: states the exporter may have missed
				// allow anything from nothing to the ideal outcome.
				lo, hi = 0, math.Max(hi, familyTotal(v.Ideal, family))
			}
			var what string
			switch {
			case float64(logged) > hi:
				what = "doubled"
			case float64(logged) < lo:
				what = "lost (or killed before the log line)"
			default:
				continue
			}
			out = append(out, fmt.Sprintf("%s: %s pod %s/%s %s: logged %d, expected %s; uncertain %v, loose %v, user error %v; %s",
				family, what, h.Namespace, h.Name, uid, logged, bounds{lo, hi}, v.Uncertain, v.Loose, o.UserError[uid], describeHistory(h)))
		}
	}
	sort.Strings(out)
	return out
}

// familyTotal is an outcome's count over every series of a counter family.
func familyTotal(oc outcome, family string) float64 {
	var n float64
	for k, c := range oc.Count {
		if name, _ := splitSeries(k); name == family {
			n += c
		}
	}
	return n
}

// describeHistory is a pod's story in one line: creation, each revision's
// arrival with what changed, and its removal.
func describeHistory(h *history) string {
	var b strings.Builder
	fmt.Fprintf(&b, "created %s", unix(h.Created))
	for i := range h.Revs {
		r := &h.Revs[i]
		fmt.Fprintf(&b, "; rev %d at %s:", r.Rev, r.At.UTC().Format("15:04:05.000"))
		if r.Scheduled.Status != "" {
			fmt.Fprintf(&b, " scheduled %s@%s", r.Scheduled.Status, unix(r.Scheduled.Time))
		}
		if r.Sandbox.Status != "" {
			fmt.Fprintf(&b, " sandbox %s@%s", r.Sandbox.Status, unix(r.Sandbox.Time))
		}
		if r.Ran != 0 || r.Restarts != 0 {
			fmt.Fprintf(&b, " containers ran from %s restarts %d", unix(r.Ran), r.Restarts)
		}
		if r.Deletion != 0 {
			fmt.Fprintf(&b, " deletion %s grace %d", unix(r.Deletion), r.Grace)
		}
	}
	if !h.Removed.IsZero() {
		fmt.Fprintf(&b, "; removed at %s", h.Removed.UTC().Format("15:04:05.000"))
	}
	return b.String()
}

func unix(s int64) string {
	if s == 0 {
		return "0"
	}
	return time.Unix(s, 0).UTC().Format("15:04:05")
}

// describeTimeline is what the exporter could see, for a failure's log:
// each process and each outage.
func describeTimeline(insts []instance, outages []outageRecord) []string {
	f := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format("15:04:05.000")
	}
	var out []string
	for _, in := range insts {
		out = append(out, fmt.Sprintf("exporter %d: start %s, ready %s, exit %s, killed %v", in.N, f(in.Start), f(in.Ready), f(in.Exit), in.Killed))
	}
	for _, o := range outages {
		out = append(out, fmt.Sprintf("outage: stop %s, API ready %s, exporter watches again %s", f(o.Stop), f(o.APIReady), f(o.WatchBack)))
	}
	return out
}
