package informers

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// reconnectBackoff is the wait between a failed list or watch of pods or
// events and the next try. client-go's default grows to 30 s, doubled by
// its jitter to up to 60 s: after an 18 s API server outage the exporter
// handled pod events again only 64.8 s after the server returned (issue
// 26), its SLIs a minute behind every control-plane restart. Here the
// waits are 0.25, 0.5, 1 and 2 s, then 2 to 3 s (jitter 0.5) until the
// server answers: a few requests a second per watch at most while it is
// down, and events again within about 3 s of its return.
var reconnectBackoff = wait.Backoff{Duration: 250 * time.Millisecond, Factor: 2, Jitter: 0.5, Steps: 4, Cap: 2 * time.Second}

// backoffController is client-go's controller (cache.New) with
// reconnectBackoff for its reflector, which cache.Config cannot set: a
// reflector filling queue, and a loop handing what it pops to process.
type backoffController struct {
	queue   cache.Queue
	lw      cache.ListerWatcher
	obj     runtime.Object
	what    string
	process cache.ProcessFunc

	mu        sync.RWMutex
	reflector *cache.Reflector
}

var _ cache.Controller = (*backoffController)(nil)

func (c *backoffController) Run(stopCh <-chan struct{}) {
	c.RunWithContext(wait.ContextForChannel(stopCh))
}

// RunWithContext lists and watches until ctx ends, as cache.New's
// controller does.
func (c *backoffController) RunWithContext(ctx context.Context) {
	go func() {
		<-ctx.Done()
		c.queue.Close()
	}()
	logger := klog.FromContext(ctx)
	backoff := reconnectBackoff
	r := cache.NewReflectorWithOptions(c.lw, c.obj, c.queue, cache.ReflectorOptions{
		Logger:          &logger,
		TypeDescription: c.what,
		Backoff:         &backoff,
	})
	c.mu.Lock()
	c.reflector = r
	c.mu.Unlock()
	var wg wait.Group
	wg.StartWithContext(ctx, r.RunWithContext)
	wait.UntilWithContext(ctx, c.processLoop, time.Second)
	wg.Wait()
}

func (c *backoffController) processLoop(ctx context.Context) {
	for ctx.Err() == nil {
		if _, err := c.queue.Pop(cache.PopProcessFunc(c.process)); errors.Is(err, cache.ErrFIFOClosed) {
			return
		}
	}
}

func (c *backoffController) HasSynced() bool { return c.queue.HasSynced() }

func (c *backoffController) HasSyncedChecker() cache.DoneChecker { return c.queue.HasSyncedChecker() }

func (c *backoffController) LastSyncResourceVersion() string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.reflector == nil {
		return ""
	}
	return c.reflector.LastSyncResourceVersion()
}

// unreachableRepeat is how often an outage is logged again while it lasts.
const unreachableRepeat = time.Minute

// reachability logs when the API server stops answering the pod and event
// watches, once per outage and then once a minute, and when it answers
// again. client-go's reflector retries quietly: with no route to the API
// server, the exporter logged nothing at info level for two minutes, and
// only /readyz told (issue 26).
type reachability struct {
	log *slog.Logger
	now func() time.Time

	mu      sync.Mutex
	down    bool
	since   time.Time // the first failure of this outage
	lastLog time.Time
}

func newReachability(log *slog.Logger, now func() time.Time) *reachability {
	return &reachability{log: log, now: now}
}

// failed reports a failed list or watch. Only an error without an answer
// from the server (refused, no route, timed out) means it is unreachable;
// an answer, even an error status, means it is there.
func (r *reachability) failed(err error) {
	if r == nil || errors.Is(err, context.Canceled) {
		return
	}
	if status := apierrors.APIStatus(nil); errors.As(err, &status) {
		r.answered()
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	switch {
	case !r.down:
		r.down, r.since, r.lastLog = true, now, now
		r.log.Warn("API server unreachable: pods are not watched until it answers", "err", err)
	case now.Sub(r.lastLog) >= unreachableRepeat:
		r.lastLog = now
		r.log.Warn("API server still unreachable", "for", now.Sub(r.since).Round(time.Second).String(), "err", err)
	}
}

// answered reports a list or watch the server answered.
func (r *reachability) answered() {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		r.down = false
		r.log.Info("API server reachable again", "after", r.now().Sub(r.since).Round(time.Millisecond).String())
	}
}
