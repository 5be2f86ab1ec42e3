package agent

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/podslo/podslo/internal/testenv"
)

// startAgent runs the agent in this process until the test ends and
// returns the base URL of its HTTP server, once /readyz says ready.
func startAgent(t testing.TB, opts Options, with ...Option) string {
	t.Helper()
	url := "http://" + runAgent(t, opts, with...)
	testenv.WaitReady(t, url, "agent")
	return url
}

// runAgent runs the agent in this process until the test ends and returns
// the address it listens on.
func runAgent(t testing.TB, opts Options, with ...Option) string {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = testenv.Logger(t)
	}
	return testenv.RunComponent(t, "agent", func(lis net.Listener) (testenv.Component, error) {
		return New(opts, append(with, WithListener(lis))...)
	})
}

func createNode(t *testing.T, c kubernetes.Interface, name string) {
	t.Helper()
	testenv.CreateNode(t, c, name)
}

// kubeletStatus is the part of a pod's status the kubelet writes and these
// tests drive.
type kubeletStatus struct {
	ready      bool
	readySince time.Time
	restarts   int32
	// terminatedAt, when set, is the previous container's end, which the
	// kubelet records on a restart.
	terminatedAt time.Time
}

// kubelet patches pod status as the kubelet's status manager does: a
// strategic merge patch on the status subresource, merged by condition type
// and container name. Beside Ready it sets a third party's condition, which
// the agent must leave alone as well. It returns the conditions the API
// server holds after the patch.
func kubelet(t *testing.T, c kubernetes.Interface, pod *corev1.Pod, s kubeletStatus) []corev1.PodCondition {
	t.Helper()
	status := corev1.ConditionFalse
	if s.ready {
		status = corev1.ConditionTrue
	}
	scheduled := metav1.NewTime(pod.CreationTimestamp.Time)
	since := metav1.NewTime(s.readySince)
	patch := map[string]any{"status": map[string]any{
		"conditions": []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: scheduled},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: scheduled},
			{Type: corev1.ContainersReady, Status: status, LastTransitionTime: since},
			{Type: corev1.PodReady, Status: status, LastTransitionTime: since},
			{Type: "example.com/Audited", Status: corev1.ConditionTrue, LastTransitionTime: scheduled, Reason: "Audited"},
		},
		"containerStatuses": []corev1.ContainerStatus{{
			Name: "app", Image: "registry.k8s.io/pause:3.10", ImageID: "registry.k8s.io/pause@sha256:0",
			Ready: s.ready, RestartCount: s.restarts, Started: &s.ready,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: scheduled}},
		}},
	}}
	if !s.terminatedAt.IsZero() {
		statuses := patch["status"].(map[string]any)["containerStatuses"].([]corev1.ContainerStatus)
		statuses[0].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{
			ExitCode: 1, Reason: "Error", StartedAt: scheduled, FinishedAt: metav1.NewTime(s.terminatedAt),
		}
	}
	body, err := json.Marshal(patch)
	require.NoError(t, err)
	updated, err := c.CoreV1().Pods(pod.Namespace).Patch(context.Background(), pod.Name, types.StrategicMergePatchType, body, metav1.PatchOptions{}, "status")
	require.NoError(t, err)
	return notOwned(updated.Status.Conditions)
}

// notOwned drops the agent's condition, leaving everyone else's.
func notOwned(conds []corev1.PodCondition) []corev1.PodCondition {
	var out []corev1.PodCondition
	for _, c := range conds {
		if c.Type != DefaultStableConditionType {
			out = append(out, c)
		}
	}
	return out
}

// seen is one Stable condition as a watch delivered it.
type seen struct {
	cond corev1.PodCondition
	at   time.Time
}

// recorder watches a namespace's pods and keeps every change of their
// Stable condition, with the time it arrived, and every set of other
// conditions the pods went through.
type recorder struct {
	mu      sync.Mutex
	stable  map[string][]seen
	others  map[string][][]corev1.PodCondition
	stopped error
}

func record(t *testing.T, c kubernetes.Interface, ns string) *recorder {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := c.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	r := &recorder{stable: map[string][]seen{}, others: map[string][][]corev1.PodCondition{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				r.mu.Lock()
				r.stopped = errors.New("watch error")
				r.mu.Unlock()
				return
			}
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			now := time.Now()
			r.mu.Lock()
			if cond, ok := stableOf(pod); ok {
				hist := r.stable[pod.Name]
				if len(hist) == 0 || !sameCondition(hist[len(hist)-1].cond, cond) {
					r.stable[pod.Name] = append(hist, seen{cond: cond, at: now})
				}
			}
			r.others[pod.Name] = append(r.others[pod.Name], notOwned(pod.Status.Conditions))
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		w.Stop()
		<-done
	})
	return r
}

func stableOf(pod *corev1.Pod) (corev1.PodCondition, bool) {
	for _, c := range pod.Status.Conditions {
		if c.Type == DefaultStableConditionType {
			return c, true
		}
	}
	return corev1.PodCondition{}, false
}

func sameCondition(a, b corev1.PodCondition) bool {
	return a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message && a.LastTransitionTime.Equal(&b.LastTransitionTime)
}

// waitStable waits until the pod's Stable condition has changed n times,
// and returns the changes.
func (r *recorder) waitStable(t *testing.T, pod string, n int) []seen {
	t.Helper()
	var got []seen
	require.Eventually(t, func() bool {
		got = r.stableOf(t, pod)
		return len(got) >= n
	}, 20*time.Second, 10*time.Millisecond, "pod %s: wanted %d Stable changes", pod, n)
	return got
}

func (r *recorder) stableOf(t *testing.T, pod string) []seen {
	r.mu.Lock()
	defer r.mu.Unlock()
	assert.NoError(t, r.stopped)
	return append([]seen(nil), r.stable[pod]...)
}

func (r *recorder) othersOf(pod string) [][]corev1.PodCondition {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]corev1.PodCondition(nil), r.others[pod]...)
}

// transition is what the tests assert of a Stable change.
type transition struct {
	Status corev1.ConditionStatus
	Reason string
	At     time.Time
}

func transitions(s []seen) []transition {
	out := make([]transition, 0, len(s))
	for _, x := range s {
		out = append(out, transition{x.cond.Status, x.cond.Reason, x.cond.LastTransitionTime.UTC()})
	}
	return out
}

// agentMetrics is what the tests read of the agent's /metrics.
type agentMetrics struct {
	// writes is podslo_agent_condition_writes_total of the Stable type, by
	// result.
	writes map[string]float64
	// timed is the number of writes podslo_agent_condition_write_duration_seconds observed.
	timed uint64
}

// helper marks t as a helper when it is a *testing.T or *testing.B; a
// condition of require.EventuallyWithT passes an *assert.CollectT, which
// has no Helper.
func helper(t require.TestingT) {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
}

// scrape reads the agent's /metrics. It takes a require.TestingT so that a
// condition of require.EventuallyWithT can call it with its CollectT: a
// failed request then fails that tick only, not the test.
func scrape(t require.TestingT, url string) agentMetrics {
	helper(t)
	resp, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	require.NoError(t, err)
	m := agentMetrics{writes: map[string]float64{}}
	require.Contains(t, fams, writesName)
	for _, s := range fams[writesName].GetMetric() {
		labels := map[string]string{}
		for _, l := range s.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		require.Contains(t, []string{DefaultStableConditionType, DefaultProbeConditionType}, labels["condition_type"])
		if labels["condition_type"] == DefaultStableConditionType {
			m.writes[labels["result"]] = s.GetCounter().GetValue()
		}
	}
	require.Contains(t, fams, durationName)
	require.Len(t, fams[durationName].GetMetric(), 1)
	m.timed = fams[durationName].GetMetric()[0].GetHistogram().GetSampleCount()
	return m
}
