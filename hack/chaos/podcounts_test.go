package main

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// The per-pod check names the pod the exporter counted twice, or counted
// where no sight of its history allows it, and passes one counted as
// allowed.
func TestCheckPodCounts(t *testing.T) {
	stuck := func(uid string) *history {
		h := build("runc", nil, step{0, sched(0)}, step{0.1, sandbox("False", 0)})
		h.UID, h.Name = types.UID(uid), "pod-"+uid
		return h
	}
	early := stuck("early") // deleted well before its timeout
	early.Revs = append(early.Revs, early.Revs[1])
	deletion(30, 30)(&early.Revs[2])
	early.Revs[2].At = at(30)
	early.Removed = at(31)
	histories := map[types.UID]*history{"once": stuck("once"), "twice": stuck("twice"), "early": early}
	oc := config()
	verdicts := map[types.UID]*podVerdict{}
	for uid, h := range histories {
		v := oc.judge(h, watchingAll())
		verdicts[uid] = &v
	}
	counted := map[string]map[types.UID]int{}
	for _, line := range []string{
		`time=x level=INFO msg="Sandbox creation timed out" pod=chaos-00/pod-once uid=once`,
		`time=x level=INFO msg="Sandbox creation timed out" pod=chaos-00/pod-twice uid=twice`,
		`time=x level=INFO msg="Sandbox creation timed out" pod=chaos-00/pod-twice uid=twice`,
		`time=x level=INFO msg="Sandbox creation timed out" pod=chaos-00/pod-early uid=early`,
		`time=x level=INFO msg="Pipeline synced" podsDeletedWhileDown=0`,
	} {
		countLogged(counted, line)
	}
	got := checkPodCounts(counted, verdicts, histories, oc)
	if len(got) != 2 {
		t.Fatalf("want the pods counted twice and counted early, got %d lines:\n%s", len(got), strings.Join(got, "\n"))
	}
	for i, want := range []string{"doubled pod chaos-00/pod-early early: logged 1, expected 0;", "doubled pod chaos-00/pod-twice twice: logged 2, expected 1;"} {
		if !strings.Contains(got[i], want) {
			t.Errorf("line %d: %q does not say %q", i, got[i], want)
		}
	}
	if !strings.Contains(got[0], "grace 30; removed at") {
		t.Errorf("the line does not carry the pod's history: %q", got[0])
	}
}
