package main

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestReadRevisionRan: the earliest start any container, init container or
// last state shows, the states a kubelet writes only after a ready sandbox.
func TestReadRevisionRan(t *testing.T) {
	ts := func(s int64) metav1.Time { return metav1.NewTime(time.Unix(t0+s, 0)) }
	for _, tc := range []struct {
		name   string
		status corev1.PodStatus
		want   int64
	}{
		{"waiting", corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}}}, 0},
		{"running", corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: ts(5)}}}}}, t0 + 5},
		{"terminated, as kwok's termination writes it", corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{StartedAt: ts(-40), FinishedAt: ts(1)}}}}}, t0 - 40},
		{"a last state older than the running one", corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: ts(10)}},
			LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{StartedAt: ts(2), FinishedAt: ts(10)}},
		}}}, t0 + 2},
		{"an init container", corev1.PodStatus{
			InitContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{StartedAt: ts(3), FinishedAt: ts(3)}}}},
			ContainerStatuses:     []corev1.ContainerStatus{{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "PodInitializing"}}}},
		}, t0 + 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := readRevision(&corev1.Pod{Status: tc.status}).Ran; got != tc.want {
				t.Errorf("Ran = %d, want %d", got, tc.want)
			}
		})
	}
}
