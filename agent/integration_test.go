package agent

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/podslo/podslo/internal/testenv"
)

// lateBound is how long after its deadline a pod may become Stable: the
// timer fires at the deadline, then one PATCH and one watch event, well
// under a second on an idle machine (assertOnTime logs it). A loaded CI
// machine running -race can stall any of them, so the bound only
// catches a write that never comes on its own; the count of writes is what
// these tests hold exact.
const lateBound = 5 * time.Second

// quiet is the least time an assert.Never below watches for a write that
// must not come, however late the test reaches it: a window computed from
// a deadline already past would check nothing.
const quiet = time.Second

// neverUntil is the window of an assert.Never that must cover the time up
// to end, and at least quiet from now.
func neverUntil(end time.Time) time.Duration {
	return max(time.Until(end), 0) + quiet
}

// kubeletStates keeps, per pod, every set of conditions other than Stable
// that the test (as the kubelet) left on the API server.
type kubeletStates map[string][][]corev1.PodCondition

func (k kubeletStates) patch(t *testing.T, c kubernetes.Interface, pod *corev1.Pod, s kubeletStatus) {
	t.Helper()
	k[pod.Name] = append(k[pod.Name], kubelet(t, c, pod, s))
}

// now is the time as the API stores it: whole seconds, in UTC as decoded.
func now() time.Time { return time.Now().UTC().Truncate(time.Second) }

// assertOnTime checks that a pod became stable no earlier than its deadline
// and soon after it.
func assertOnTime(t *testing.T, s seen, deadline time.Time) {
	t.Helper()
	t.Logf("stable %s after its deadline", s.at.Sub(deadline))
	assert.False(t, s.at.Before(deadline), "stable at %s, before its deadline %s", s.at.Format(time.RFC3339Nano), deadline.Format(time.RFC3339Nano))
	assert.Less(t, s.at.Sub(deadline), lateBound, "stable at %s, deadline %s", s.at.Format(time.RFC3339Nano), deadline.Format(time.RFC3339Nano))
}

func TestStableOnRealAPIServer(t *testing.T) {
	env := testenv.Start(t)
	c := env.Client
	ctx := context.Background()
	createNode(t, c, "node-a")
	createNode(t, c, "node-b")
	const ns = "apps"
	testenv.CreateNamespace(t, c, ns, nil)
	rec := record(t, c, ns)
	states := kubeletStates{}

	// The owner exists before its pod, as in a cluster. Without a
	// controller manager nothing creates its pods but the test.
	labels := map[string]string{"app": "api"}
	rs, err := c.AppsV1().ReplicaSets(ns).Create(ctx, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "api-5f7c", Namespace: ns},
		Spec: appsv1.ReplicaSetSpec{
			MinReadySeconds: 30,
			Selector:        &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	url := startAgent(t, Options{NodeName: "node-a"}, WithRestConfig(env.Config))

	controller := true
	web := testenv.CreatePod(t, c, ns, testenv.PodSpec{Name: "web", Node: "node-a", Annotations: map[string]string{MinReadySecondsAnnotation: "2"}})
	api := testenv.CreatePod(t, c, ns, testenv.PodSpec{Name: "api", Node: "node-a", Owner: &metav1.OwnerReference{
		APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rs.Name, UID: rs.UID, Controller: &controller,
	}})
	zero := testenv.CreatePod(t, c, ns, testenv.PodSpec{Name: "zero", Node: "node-a"})
	other := testenv.CreatePod(t, c, ns, testenv.PodSpec{Name: "other", Node: "node-b", Annotations: map[string]string{MinReadySecondsAnnotation: "0"}})
	states.patch(t, c, other, kubeletStatus{ready: true, readySince: now()})

	t.Run("minReadySeconds from the annotation, restarts", func(t *testing.T) {
		r0 := now()
		states.patch(t, c, web, kubeletStatus{ready: false, readySince: r0})
		got := rec.waitStable(t, "web", 1)
		first := transitions(got)
		require.Len(t, first, 1)
		assert.Equal(t, [2]string{"False", ReasonNotReady}, [2]string{string(first[0].Status), first[0].Reason})
		// NotReady from the agent's first sight of the pod: at its creation
		// or at r0, which is a second later when the creation was late in
		// its second.
		assert.False(t, first[0].At.Before(web.CreationTimestamp.UTC()), "NotReady at %s, pod created %s", first[0].At, web.CreationTimestamp.UTC())
		assert.False(t, first[0].At.After(r0), "NotReady at %s, after r0 %s", first[0].At, r0)

		// Ready: Stable 2s later, by the timer, with no status update.
		r1 := now()
		states.patch(t, c, web, kubeletStatus{ready: true, readySince: r1})
		got = rec.waitStable(t, "web", 2)
		assert.Equal(t, transition{"True", ReasonMinReadySecondsElapsed, r1.Add(2 * time.Second)}, transitions(got)[1])
		assertOnTime(t, got[1], r1.Add(2*time.Second))

		// A restart while Ready, with Ready unchanged.
		before := time.Now()
		states.patch(t, c, web, kubeletStatus{ready: true, readySince: r1, restarts: 1})
		got = rec.waitStable(t, "web", 3)
		restarted := transitions(got)[2]
		assert.Equal(t, [2]string{"False", ReasonContainerRestarted}, [2]string{string(restarted.Status), restarted.Reason})
		// The restart's time is bounded below and above: the agent stamps
		// the moment it sees the restart.
		assert.False(t, restarted.At.Before(before.Truncate(time.Second)), "restart seen at %s, before it happened at %s", restarted.At, before)
		assert.False(t, restarted.At.After(got[2].at), "restart seen at %s, after the watch delivered it", restarted.At)
		assert.Equal(t, "A container restarted while the pod was Ready (restarts 0 -> 1); stable again minReadySeconds after the next Ready.", got[2].cond.Message)

		// The clock restarts from the next Ready; losing Ready meanwhile
		// costs no write, the reason stays ContainerRestarted.
		states.patch(t, c, web, kubeletStatus{ready: false, readySince: now(), restarts: 1})
		r4 := now()
		states.patch(t, c, web, kubeletStatus{ready: true, readySince: r4, restarts: 1})
		got = rec.waitStable(t, "web", 4)
		assert.Equal(t, transition{"True", ReasonMinReadySecondsElapsed, r4.Add(2 * time.Second)}, transitions(got)[3])
		assertOnTime(t, got[3], r4.Add(2*time.Second))

		r5 := now()
		states.patch(t, c, web, kubeletStatus{ready: false, readySince: r5, restarts: 1})
		got = rec.waitStable(t, "web", 5)
		assert.Equal(t, transition{"False", ReasonNotReady, r5}, transitions(got)[4])

		// A restart before the clock ran out: no Stable at this streak's
		// deadline. This restart comes, as from a real kubelet, with the
		// previous container's termination after Ready's transition.
		r6 := now()
		states.patch(t, c, web, kubeletStatus{ready: true, readySince: r6, restarts: 1})
		states.patch(t, c, web, kubeletStatus{ready: true, readySince: r6, restarts: 2, terminatedAt: r6.Add(time.Second)})
		got = rec.waitStable(t, "web", 6)
		assert.Equal(t, transition{"False", ReasonContainerRestarted, r5}, transitions(got)[5], "still False: the reason changes, the transition time does not")
		assert.Never(t, func() bool { return len(rec.stableOf(t, "web")) > 6 }, neverUntil(r6.Add(2*time.Second+quiet)), 20*time.Millisecond,
			"a streak with a restart must not become stable")

		states.patch(t, c, web, kubeletStatus{ready: false, readySince: now(), restarts: 2, terminatedAt: r6.Add(time.Second)})
		r7 := now()
		states.patch(t, c, web, kubeletStatus{ready: true, readySince: r7, restarts: 2, terminatedAt: r6.Add(time.Second)})
		got = rec.waitStable(t, "web", 7)
		assert.Equal(t, transition{"True", ReasonMinReadySecondsElapsed, r7.Add(2 * time.Second)}, transitions(got)[6])
		assertOnTime(t, got[6], r7.Add(2*time.Second))

		final, err := c.CoreV1().Pods(ns).Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		cond, _ := stableOf(final)
		assert.Equal(t, corev1.PodCondition{
			Type: DefaultStableConditionType, Status: "True", ObservedGeneration: final.Generation,
			LastTransitionTime: metav1.NewTime(r7.Add(2 * time.Second)), Reason: ReasonMinReadySecondsElapsed,
			Message: "Ready since " + r7.UTC().Format(time.RFC3339) + " for minReadySeconds (2s) without a container restart.",
		}, withUTC(cond))
	})

	t.Run("minReadySeconds from the ReplicaSet, and its change", func(t *testing.T) {
		states.patch(t, c, api, kubeletStatus{ready: false, readySince: now()})
		rec.waitStable(t, "api", 1)
		ra := now()
		states.patch(t, c, api, kubeletStatus{ready: true, readySince: ra})
		// The ReplicaSet's 30s hold: not stable at Ready + 1s.
		assert.Never(t, func() bool { return len(rec.stableOf(t, "api")) > 1 }, neverUntil(ra.Add(time.Second+quiet)), 20*time.Millisecond)

		rs.Spec.MinReadySeconds = 1
		_, err := c.AppsV1().ReplicaSets(ns).Update(ctx, rs, metav1.UpdateOptions{})
		require.NoError(t, err)
		changed := time.Now()
		got := rec.waitStable(t, "api", 2)
		assert.Equal(t, transition{"True", ReasonMinReadySecondsElapsed, ra.Add(time.Second)}, transitions(got)[1])
		assert.Less(t, got[1].at.Sub(changed), lateBound, "the owner's change reaches its pods at once")
	})

	t.Run("minReadySeconds 0: stable when Ready", func(t *testing.T) {
		states.patch(t, c, zero, kubeletStatus{ready: false, readySince: now()})
		rec.waitStable(t, "zero", 1)
		rz := now()
		states.patch(t, c, zero, kubeletStatus{ready: true, readySince: rz})
		patched := time.Now()
		got := rec.waitStable(t, "zero", 2)
		assert.Equal(t, transition{"True", ReasonMinReadySecondsElapsed, rz}, transitions(got)[1])
		// The deadline is Ready's own time, up to a second before the patch.
		assert.Less(t, got[1].at.Sub(patched), lateBound)
	})

	t.Run("other nodes' pods are never touched", func(t *testing.T) {
		assert.Empty(t, rec.stableOf(t, "other"))
		p, err := c.CoreV1().Pods(ns).Get(ctx, "other", metav1.GetOptions{})
		require.NoError(t, err)
		_, ok := stableOf(p)
		assert.False(t, ok)
	})

	t.Run("the agent never changes a condition it does not own", func(t *testing.T) {
		for _, pod := range []string{"web", "api", "zero", "other"} {
			allowed := append(states[pod], nil) // nil: the pod as created
			for _, conds := range rec.othersOf(pod) {
				assert.True(t, slices.ContainsFunc(allowed, func(a []corev1.PodCondition) bool { return equality.Semantic.DeepEqual(a, conds) }),
					"pod %s went through conditions no kubelet patch left: %+v", pod, conds)
			}
			// What the API server says the agent's field manager owns.
			p, err := c.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
			require.NoError(t, err)
			managers := 0
			for _, mf := range p.ManagedFields {
				if mf.Manager != fieldManager {
					continue
				}
				managers++
				assert.Equal(t, "status", mf.Subresource)
				var owned map[string]map[string]map[string]any
				require.NoError(t, json.Unmarshal(mf.FieldsV1.Raw, &owned))
				keys := []string{}
				for top, sub := range owned {
					for field, items := range sub {
						for item := range items {
							// ".": the list itself, which holds the agent's item.
							if item != "." {
								keys = append(keys, top+"."+field+"."+item)
							}
						}
					}
				}
				assert.Equal(t, []string{`f:status.f:conditions.k:{"type":"podslo.io/Stable"}`}, keys, "pod %s", pod)
			}
			if pod == "other" {
				assert.Zero(t, managers, "the agent wrote to another node's pod")
			} else {
				assert.Equal(t, 1, managers, "pod %s", pod)
			}
		}
	})

	t.Run("self-metrics count every write", func(t *testing.T) {
		writes := len(rec.stableOf(t, "web")) + len(rec.stableOf(t, "api")) + len(rec.stableOf(t, "zero"))
		require.Equal(t, 11, writes)
		m := scrape(t, url)
		conflicts := m.writes[resultConflict]
		assert.Equal(t, map[string]float64{
			resultSuccess: float64(writes), resultConflict: conflicts,
			resultNotFound: 0, resultForbidden: 0, resultRefused: 0, resultError: 0,
		}, m.writes)
		assert.Equal(t, uint64(writes)+uint64(conflicts), m.timed, "every PATCH is timed")
	})
}

func withUTC(c corev1.PodCondition) corev1.PodCondition {
	c.LastTransitionTime = metav1.NewTime(c.LastTransitionTime.UTC())
	return c
}
