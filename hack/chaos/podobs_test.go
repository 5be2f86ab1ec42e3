package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// The per-pod look at a family that is off names the pod whose recorded
// samples no outcome allows, with its history, and passes the pod whose
// precise value lies within the watch's spread of the oracle's seconds.
func TestCheckPodObservations(t *testing.T) {
	pod := func(uid string) *history {
		h := build("runc", nil, step{0, sched(0)}, step{2.1, sandbox("True", 2)})
		h.UID, h.Name = types.UID(uid), "pod-"+uid
		return h
	}
	histories := map[types.UID]*history{"ok": pod("ok"), "slow": pod("slow"), "recreated": pod("recreated")}
	oc := config()
	verdicts := map[types.UID]*podVerdict{}
	for uid, h := range histories {
		v := oc.judge(h, watchingAll())
		verdicts[uid] = &v
	}
	// The lines as the exporter's text handler writes them
	// (pipeline.logRecorded).
	var logs bytes.Buffer
	// As the exporter builds the pipeline's logger (exporter/components.go).
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})).With("component", "pipeline")
	for _, r := range []struct {
		uid, family string
		value       float64
	}{
		{"ok", mCreation, 2.312},
		{"slow", mCreation, 5.2},
		{"recreated", mCreation, 2},
		{"recreated", mRecreations, 1},
	} {
		log.Debug("Recorded", "uid", r.uid, "family", r.family, "labels", "runc,none", "value", r.value)
	}
	log.Debug("Recorded", "uid", "ok", "family", mPhase, "labels", "", "value", 2)
	recorded := map[types.UID]map[string][]float64{}
	for _, line := range strings.Split(logs.String(), "\n") {
		addRecorded(recorded, line)
	}
	if got := recorded["ok"][mPhase]; len(got) != 1 || got[0] != 2 {
		t.Fatalf("a line with empty labels: %v", recorded["ok"])
	}

	got := checkPodObservations(recorded, []string{mCreation, mRecreations}, verdicts, histories)
	if len(got) != 2 {
		t.Fatalf("want the slow creation and the re-creation, got %d lines:\n%s", len(got), strings.Join(got, "\n"))
	}
	for i, want := range []string{
		mCreation + ": pod chaos-00/pod-slow slow recorded [5.2], expected one of [2];",
		mRecreations + ": pod chaos-00/pod-recreated recreated recorded [1], expected one of [];",
	} {
		if !strings.HasPrefix(got[i], want) {
			t.Errorf("line %d: %q does not start with %q", i, got[i], want)
		}
	}
	if !strings.Contains(got[0], "sandbox True@") {
		t.Errorf("the line does not carry the pod's history: %q", got[0])
	}
}
