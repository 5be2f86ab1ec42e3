package informers

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// watchSettle is how long a watch resumed from a resource version must have
// been open before it counts as current: the API server sends what was
// missed at once, and this leaves time for it to be handled.
const watchSettle = 2 * time.Second

// currency tracks whether the pod watch is current: open, and every pod of
// the newest list (or streamed list) handled. A stuck pod sends no updates,
// so the creation-timeout check can only trust the absence of a sandbox
// while the watch is current; while it is down, a sandbox that became ready
// is simply not seen yet.
type currency struct {
	now func() time.Time
	// reach hears of every list and watch, failed or answered; nil: none.
	reach *reachability

	mu       sync.Mutex
	open     bool
	openedAt time.Time
	// listed counts the lists begun (a LIST or a watch with initial
	// events), handled the newest whose every pod has been handled.
	listed, handled uint64
}

func newCurrency(now func() time.Time, reach *reachability) *currency {
	return &currency{now: now, reach: reach}
}

// Current reports whether the watch is open and has been long enough for
// what it missed to be handled, with no list in progress.
func (c *currency) Current() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open && c.handled == c.listed && c.now().Sub(c.openedAt) >= watchSettle
}

func (c *currency) listStarted() {
	c.mu.Lock()
	c.listed++
	c.mu.Unlock()
}

// listNumber is the list a Replace completes: the newest begun.
func (c *currency) listNumber() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.listed
}

func (c *currency) listHandled(n uint64) {
	c.mu.Lock()
	c.handled = max(c.handled, n)
	c.mu.Unlock()
}

func (c *currency) setOpen(open bool) {
	c.mu.Lock()
	if open && !c.open {
		c.openedAt = c.now()
	}
	c.open = open
	c.mu.Unlock()
}

// trackedWatch marks the watch closed when the reflector stops it, which
// it does whenever a watch ends, by error, timeout or a closed stream.
type trackedWatch struct {
	watch.Interface
	c    *currency
	once sync.Once
}

func (w *trackedWatch) Stop() {
	w.Interface.Stop()
	w.once.Do(func() { w.c.setOpen(false) })
}

// track wraps lw so that c follows the lists and watches it serves.
func (c *currency) track(lw *cache.ListWatch) *cache.ListWatch {
	list := func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		c.listStarted()
		obj, err := lw.ListWithContextFunc(ctx, o)
		if err != nil {
			c.setOpen(false)
			c.reach.failed(err)
		} else {
			c.reach.answered()
		}
		return obj, err
	}
	watchFunc := func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		if o.SendInitialEvents != nil && *o.SendInitialEvents {
			// A streamed list: the pods come as events, then one Replace.
			c.listStarted()
		}
		w, err := lw.WatchFuncWithContext(ctx, o)
		if err != nil {
			c.setOpen(false)
			c.reach.failed(err)
			return nil, err
		}
		c.reach.answered()
		c.setOpen(true)
		return &trackedWatch{Interface: w, c: c}, nil
	}
	return &cache.ListWatch{
		ListFunc:             func(o metav1.ListOptions) (runtime.Object, error) { return list(context.Background(), o) },
		WatchFunc:            func(o metav1.ListOptions) (watch.Interface, error) { return watchFunc(context.Background(), o) },
		ListWithContextFunc:  list,
		WatchFuncWithContext: watchFunc,
	}
}

// listMarkerPrefix keys the marker queued behind each Replace. No pod key
// starts with a NUL.
const listMarkerPrefix = "\x00list/"

// markingQueue queues a marker behind the pods of every Replace (a list),
// so that handling the marker means every pod of that list was handled.
type markingQueue struct {
	*cache.DeltaFIFO
	c *currency
}

func (q *markingQueue) Replace(list []any, resourceVersion string) error {
	if err := q.DeltaFIFO.Replace(list, resourceVersion); err != nil {
		return err
	}
	return q.DeltaFIFO.Add(cache.ExplicitKey(listMarkerPrefix + strconv.FormatUint(q.c.listNumber(), 10)))
}

// listMarker reports whether obj is a marker, and which list it ends.
func listMarker(obj any) (n uint64, ok bool) {
	if tomb, isTomb := obj.(cache.DeletedFinalStateUnknown); isTomb {
		obj = tomb.Obj
	}
	k, isKey := obj.(cache.ExplicitKey)
	if !isKey {
		return 0, false
	}
	s, found := strings.CutPrefix(string(k), listMarkerPrefix)
	if !found {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}
