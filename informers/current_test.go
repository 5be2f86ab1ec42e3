package informers

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	"github.com/podslo/podslo/lifecycle"
)

// TestCurrency follows the pod watch through a list, an outage and a
// streamed relist: current only while open, settled, and with every pod of
// the newest list handled.
func TestCurrency(t *testing.T) {
	now := time.Unix(1700000000, 0)
	c := newCurrency(func() time.Time { return now }, nil)
	var watchErr error
	lw := c.track(&cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			return nil, watchErr
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			if watchErr != nil {
				return nil, watchErr
			}
			return watch.NewFake(), nil
		},
	})
	fifo := cache.NewDeltaFIFOWithOptions(cache.DeltaFIFOOptions{KnownObjects: newPodKeys()})
	q := &markingQueue{DeltaFIFO: fifo, c: c}
	// pop handles the one queued key (the marker), as the controller's
	// Process does.
	pop := func() {
		_, err := fifo.Pop(func(obj any, _ bool) error {
			for _, d := range obj.(cache.Deltas) {
				if n, ok := listMarker(d.Object); ok && d.Type != cache.Deleted {
					c.listHandled(n)
				}
			}
			return nil
		})
		require.NoError(t, err)
	}
	assert.False(t, c.Current(), "before any list")

	_, err := lw.ListWithContext(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	require.NoError(t, q.Replace(nil, "1"))
	w, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "1"})
	require.NoError(t, err)
	now = now.Add(time.Hour)
	assert.False(t, c.Current(), "the list's pods are not handled yet")
	pop()
	assert.True(t, c.Current())

	// The watch ends and cannot be opened again: an outage.
	w.Stop()
	assert.False(t, c.Current(), "watch stopped")
	watchErr = errors.New("connection refused")
	_, err = lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "1"})
	require.Error(t, err)
	now = now.Add(time.Minute)
	assert.False(t, c.Current(), "watch down")

	// Back, resumed from its resource version: current once settled.
	watchErr = nil
	_, err = lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "1"})
	require.NoError(t, err)
	assert.False(t, c.Current(), "what the watch missed may not be handled yet")
	now = now.Add(watchSettle)
	assert.True(t, c.Current())

	// A streamed relist (410 Gone): not current until its Replace is
	// handled, however long it streams.
	yes := true
	_, err = lw.WatchWithContext(context.Background(), metav1.ListOptions{SendInitialEvents: &yes})
	require.NoError(t, err)
	now = now.Add(time.Hour)
	assert.False(t, c.Current(), "streaming the relist")
	require.NoError(t, q.Replace(nil, "9"))
	assert.False(t, c.Current(), "the relist's pods are queued")
	pop()
	assert.True(t, c.Current())
}

func TestListMarkerIsNoPodKey(t *testing.T) {
	n, ok := listMarker(cache.ExplicitKey(listMarkerPrefix + "7"))
	assert.True(t, ok)
	assert.Equal(t, uint64(7), n)
	n, ok = listMarker(cache.DeletedFinalStateUnknown{Key: listMarkerPrefix + "3", Obj: cache.ExplicitKey(listMarkerPrefix + "3")})
	assert.True(t, ok)
	assert.Equal(t, uint64(3), n)
	for _, obj := range []any{cache.ExplicitKey("ns/list/7"), &podRef{Namespace: "ns", Name: "p"}, nil} {
		_, ok := listMarker(obj)
		assert.False(t, ok, "%#v", obj)
	}
}

// TestStampOnlyWhileCurrent: a pod gets its receive time only while the
// watch is current, and keeps the first one it got.
func TestStampOnlyWhileCurrent(t *testing.T) {
	now := time.Unix(1700000000, 123e6)
	pw := newPodWatch("", nil)
	pw.current = newCurrency(func() time.Time { return now }, nil)
	stamped := func() int64 {
		obj, err := pw.stamp(&lifecycle.Pod{}, nil)
		require.NoError(t, err)
		return obj.(*lifecycle.Pod).Received
	}
	assert.Zero(t, stamped(), "no watch open: a list's pod")
	pw.current.setOpen(true)
	assert.Zero(t, stamped(), "a watch just opened may deliver what it missed")
	now = now.Add(watchSettle)
	assert.Equal(t, now.UnixMilli(), stamped())
	pw.current.listStarted()
	assert.Zero(t, stamped(), "a relist in flight")
	pw.current.listHandled(1)

	first := &lifecycle.Pod{Received: 42}
	obj, err := pw.stamp(first, nil)
	require.NoError(t, err)
	assert.Equal(t, int64(42), obj.(*lifecycle.Pod).Received, "transformed twice, it keeps its first receive time")
	_, err = pw.stamp(nil, errors.New("trim failed"))
	require.Error(t, err)
}
