package informers

import (
	"context"
	"fmt"
	"maps"
	"sync"
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
	"k8s.io/client-go/tools/cache"

	"github.com/podslo/podslo/internal/kube/kubetest"
	"github.com/podslo/podslo/lifecycle"
)

// slowHandler blocks in its first Pod call until release is closed, as a
// store write on a slow disk does, and records each pod's receive time.
type slowHandler struct {
	recorder
	entered, release chan struct{}
	once             sync.Once

	mu       sync.Mutex
	received map[string]int64
}

func (h *slowHandler) Pod(p *lifecycle.Pod) {
	h.once.Do(func() {
		close(h.entered)
		<-h.release
	})
	h.mu.Lock()
	h.received[p.Name] = p.Received
	h.mu.Unlock()
}

func (h *slowHandler) got() map[string]int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return maps.Clone(h.received)
}

// TestReceiveTimeIsNotTheHandlersBacklog: a pod that arrives while the
// handler is still busy with the previous one gets the time it came off
// the connection, not the time the handler got to it. The queue runs the
// handler under the lock its adds need, so a receive time stamped in the
// queue carried the whole backlog (issue 35, item 4).
func TestReceiveTimeIsNotTheHandlersBacklog(t *testing.T) {
	h := &slowHandler{entered: make(chan struct{}), release: make(chan struct{}), received: map[string]int64{}}
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(h.release) }) }
	t.Cleanup(release)
	client := fake.NewClientset()
	w, err := New(kubetest.Wrap(client), h, Options{})
	require.NoError(t, err)
	w.classes = *resolver(t)

	var mu sync.Mutex
	now := time.Unix(1700000000, 0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	set := func(t time.Time) { mu.Lock(); now = t; mu.Unlock() }

	pw := newPodWatch("", nil)
	pw.current = newCurrency(clock, nil)
	fw := watch.NewFake()
	lw := cache.ToListWatcherWithWatchListSemantics(pw.current.track(&cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			return &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return fw, nil },
	}), client)
	w.controlPods(pw, lw)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go pw.ctrl.RunWithContext(ctx)

	require.Eventually(t, func() bool {
		pw.current.mu.Lock()
		defer pw.current.mu.Unlock()
		return pw.current.open && pw.current.handled == pw.current.listed
	}, 10*time.Second, 10*time.Millisecond, "the watch never opened")
	t0 := now.Add(watchSettle)
	set(t0)
	require.True(t, pw.current.Current())

	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name)}}
	}
	fw.Add(pod("a"))
	select {
	case <-h.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the handler never got pod a")
	}
	t1 := t0.Add(1500 * time.Millisecond)
	set(t1)
	// The fake watch's channel is unbuffered: once the last pod is taken,
	// every one before it has been received and stamped. A backlog of
	// several pods behind the busy handler is read all the same.
	const backlog = 20
	taken := make(chan struct{})
	go func() {
		for i := range backlog {
			fw.Add(pod(fmt.Sprint("b", i)))
		}
		fw.Add(pod("c"))
		close(taken)
	}()
	select {
	case <-taken:
	case <-time.After(10 * time.Second):
		t.Fatal("the watch read nothing while the handler was busy with pod a")
	}
	set(t1.Add(3 * time.Second))
	release()
	require.Eventually(t, func() bool { return len(h.got()) == backlog+2 }, 10*time.Second, 10*time.Millisecond)
	got := h.got()
	assert.Equal(t, t0.UnixMilli(), got["a"])
	for i := range backlog {
		assert.Equal(t, t1.UnixMilli(), got[fmt.Sprint("b", i)], "a pod's receive time is when it came, not when the handler was free")
	}
	assert.Contains(t, got, "c", "c only marks the end of the backlog: it may be stamped after the clock moved")
}
