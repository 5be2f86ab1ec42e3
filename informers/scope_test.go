package informers

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/podslo/podslo/internal/kube/kubetest"
	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/scope"
)

// The shard filter drops other shards' pods from the list and from the
// watch, before the queue: together the shards see every pod exactly once,
// and bookmarks still pass.
func TestPodListWatchKeepsOnlyItsShard(t *testing.T) {
	const total = 3
	var pods []*corev1.Pod
	for i := range 30 {
		pods = append(pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("p%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i))}})
	}
	seen := map[types.UID]int{}
	for shard := range total {
		// The fake's watch may replay what the list showed: count each
		// pod once per shard.
		mine := map[types.UID]bool{}
		sc := scope.Scope{Shard: shard, TotalShards: total}
		client := fake.NewClientset()
		for _, p := range pods[:20] {
			_, err := client.CoreV1().Pods("ns").Create(context.Background(), p, metav1.CreateOptions{})
			require.NoError(t, err)
		}
		lw := podListWatch(kubetest.Wrap(client), "ns", "", sc.OwnsUID, newCurrency(time.Now, nil))
		obj, err := lw.List(metav1.ListOptions{})
		require.NoError(t, err)
		for _, p := range obj.(*corev1.PodList).Items {
			assert.True(t, sc.OwnsUID(p.UID), "shard %d listed another shard's pod %s", shard, p.UID)
			mine[p.UID] = true
		}
		w, err := lw.Watch(metav1.ListOptions{})
		require.NoError(t, err)
		for _, p := range pods[20:] {
			_, err := client.CoreV1().Pods("ns").Create(context.Background(), p, metav1.CreateOptions{})
			require.NoError(t, err)
		}
		// The fake's watcher sends each event in order; the last pod of a
		// shard ends the wait.
		var last types.UID
		for _, p := range pods[20:] {
			if sc.OwnsUID(p.UID) {
				last = p.UID
			}
		}
		require.NotEmpty(t, last, "shard %d owns none of the watched pods: pick other UIDs", shard)
		for done := false; !done; {
			select {
			case e := <-w.ResultChan():
				require.Equal(t, watch.Added, e.Type)
				p := e.Object.(*corev1.Pod)
				assert.True(t, sc.OwnsUID(p.UID), "shard %d watched another shard's pod %s", shard, p.UID)
				mine[p.UID] = true
				done = p.UID == last
			case <-time.After(10 * time.Second):
				t.Fatalf("shard %d: no event for %s", shard, last)
			}
		}
		w.Stop()
		for uid := range mine {
			seen[uid]++
		}
	}
	require.Len(t, seen, len(pods), "every pod in some shard")
	for uid, n := range seen {
		assert.Equal(t, 1, n, "pod %s seen by %d shards", uid, n)
	}
}

// The exporter's own pod client lists decoded pods (podList): its list is
// narrowed to the shard as the typed one is, in place, keeping the list's
// continue token.
func TestPodListOfDecodedPodsKeepsOnlyItsShard(t *testing.T) {
	const total = 3
	seen := map[types.UID]int{}
	for shard := range total {
		sc := scope.Scope{Shard: shard, TotalShards: total}
		list := func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			l := &podList{ListMeta: metav1.ListMeta{Continue: "next-page"}}
			for i := range 30 {
				l.Items = append(l.Items, lifecycle.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("p%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i))}})
			}
			return l, nil
		}
		noWatch := func(context.Context, metav1.ListOptions) (watch.Interface, error) { return watch.NewEmptyWatch(), nil }
		lw := filteredPodListWatch(newCurrency(time.Now, nil), nil, "", sc.OwnsUID, list, noWatch)
		obj, err := lw.List(metav1.ListOptions{})
		require.NoError(t, err)
		l := obj.(*podList)
		assert.Equal(t, "next-page", l.Continue)
		require.NotEmpty(t, l.Items, "shard %d owns none of the pods: pick other UIDs", shard)
		for _, p := range l.Items {
			assert.True(t, sc.OwnsUID(p.UID), "shard %d listed another shard's pod %s", shard, p.UID)
			seen[p.UID]++
		}
	}
	require.Len(t, seen, 30, "every pod in some shard")
	for uid, n := range seen {
		assert.Equal(t, 1, n, "pod %s listed by %d shards", uid, n)
	}
}

// FailedMount events of another shard's pod, or reported by another
// node's kubelet, never reach the handler, once trimmed as in the watch.
func TestEventsOfOtherShardsAndNodesAreDropped(t *testing.T) {
	sc := scope.Scope{Node: "node-a", TotalShards: 2}
	var mine, theirs types.UID
	for i := 0; mine == "" || theirs == ""; i++ {
		uid := types.UID(fmt.Sprintf("uid-%d", i))
		if sc.OwnsUID(uid) {
			mine = uid
		} else {
			theirs = uid
		}
	}
	rec := &recorder{}
	w, err := New(kubetest.Wrap(fake.NewClientset()), rec, Options{Scope: sc})
	require.NoError(t, err)
	event := func(uid types.UID, host string) *corev1.Event {
		return &corev1.Event{
			Reason: "FailedMount", Message: `MountVolume.SetUp failed for volume "c" : secret "s" not found`,
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: string(uid), UID: uid},
			Source:         corev1.EventSource{Component: "kubelet", Host: host},
		}
	}
	// Through the trim, as the watch hands them on.
	handle := func(ev *corev1.Event) {
		trimmed, err := w.trim.transform(ev)
		require.NoError(t, err)
		w.handleEvent(trimmed)
	}
	handle(event(mine, "node-a"))
	handle(event(theirs, "node-a"))
	handle(event(mine, "node-b"))
	handle(event(mine, ""))
	assert.Equal(t, []string{"user error " + string(mine) + " ns/" + string(mine), "user error " + string(mine) + " ns/" + string(mine)}, rec.calls)
}

func TestEventSelector(t *testing.T) {
	assert.Equal(t, "reason=FailedMount,involvedObject.kind=Pod", eventSelector(""))
	sc := scope.Scope{NamespacesDenylist: []string{"kube-system"}, TotalShards: 1}
	assert.Equal(t, "reason=FailedMount,involvedObject.kind=Pod,metadata.namespace!=kube-system", eventSelector(sc.NamespaceSelector()))
}
