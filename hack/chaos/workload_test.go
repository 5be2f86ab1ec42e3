package main

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// TestPullsAnnotation checks what kwok is told of a pod's planned pulls:
// the init containers' "including waiting" sums with the kubelet's
// back-off after a failed attempt, the containers' apart, and a container
// whose first pull failed named, its pull apart, so that kwok starts no
// container before the pulls podslo takes off its start-up.
func TestPullsAnnotation(t *testing.T) {
	pulls := []plannedPull{
		{FieldPath: "spec.initContainers{init}", Ms: 100, WaitMs: 400},
		{FieldPath: "spec.initContainers{migrate}", Ms: 100, WaitMs: 300, FailFirst: true},
		{FieldPath: "spec.containers{app}", Cached: true},
		{FieldPath: "spec.containers{proxy}", Ms: 1000, WaitMs: 1200, FailFirst: true},
		{FieldPath: "spec.containers{logs}", Ms: 50, WaitMs: 51},
	}
	if got := pullsAnnotation(pulls); got != "10700,51,1200" {
		t.Errorf("pullsAnnotation = %q, want 10700,51,1200", got)
	}
	if got := backoffAnnotation(pulls); got != "proxy" {
		t.Errorf("backoffAnnotation = %q, want proxy", got)
	}
	if got := pullsAnnotation(nil); got != "0,0,0" {
		t.Errorf("pullsAnnotation(nil) = %q, want 0,0,0", got)
	}
	if got := backoffAnnotation(nil); got != "" {
		t.Errorf("backoffAnnotation(nil) = %q, want none", got)
	}

	// Every pod kind the run draws, its init containers told from its
	// containers by the pod's spec.
	rng := rand.New(rand.NewPCG(1, 2))
	for _, k := range []podKind{{Init: true}, {Multi: true}, {Init: true, Multi: true}} {
		pod := newPod(7, k, 20*time.Second)
		pl := planPulls(rng, pod)
		if len(pl) != len(pod.Spec.InitContainers)+len(pod.Spec.Containers) {
			t.Fatalf("%+v: %d pulls planned for %d init containers and %d containers", k, len(pl), len(pod.Spec.InitContainers), len(pod.Spec.Containers))
		}
		var init, containers, late int64
		for i, p := range pl {
			if i < len(pod.Spec.InitContainers) {
				if want := "spec.initContainers{" + pod.Spec.InitContainers[i].Name + "}"; p.FieldPath != want {
					t.Errorf("pull %d: fieldPath %q, want %q", i, p.FieldPath, want)
				}
				init += p.WaitMs
				if p.FailFirst {
					init += 10_000
				}
			} else if p.FailFirst {
				late += p.WaitMs
			} else {
				containers += p.WaitMs
			}
		}
		if got, want := pullsAnnotation(pl), fmt.Sprintf("%d,%d,%d", init, containers, late); got != want {
			t.Errorf("%+v: pullsAnnotation = %q, want %q", k, got, want)
		}
	}
}
