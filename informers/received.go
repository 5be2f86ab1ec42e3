package informers

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"

	corev1 "k8s.io/api/core/v1"
)

// receiveBuffer is how many pod events a watch reads ahead of the queue.
// client-go's DeltaFIFO.Pop runs the handler under the queue's lock, which
// the reflector needs to add the next event: without a buffer the next pod
// would come off the connection, and be stamped, only once the previous
// pod's handler (a store write) returned, and its receive time would carry
// podslo's own backlog. The buffer holds trimmed pods (a few hundred bytes
// each); when it is full the watch waits, as it did without one.
const receiveBuffer = 1024

// receivingListWatch is lw whose watches stamp each pod with its receive
// time (pw.stamp) as it comes off the connection, and read up to
// receiveBuffer events ahead of the reflector. Lists are lw's: a list's
// pods are never stamped.
type receivingListWatch struct {
	lw cache.ListerWatcherWithContext
	// unsupported is whether lw's client cannot stream lists (WatchList),
	// which the reflector asks of the ListerWatcher it is given.
	unsupported bool
	// receive readies a watched pod: trimmed (on the typed client's path)
	// and stamped.
	receive func(any) any
}

var _ cache.ListerWatcherWithContext = (*receivingListWatch)(nil)

func newReceivingListWatch(lw cache.ListerWatcher, receive func(any) any) *receivingListWatch {
	return &receivingListWatch{
		lw:          cache.ToListerWatcherWithContext(lw),
		unsupported: watchlist.DoesClientNotSupportWatchListSemantics(lw),
		receive:     receive,
	}
}

func (r *receivingListWatch) IsWatchListSemanticsUnSupported() bool { return r.unsupported }

func (r *receivingListWatch) List(o metav1.ListOptions) (runtime.Object, error) {
	return r.ListWithContext(context.Background(), o)
}

func (r *receivingListWatch) Watch(o metav1.ListOptions) (watch.Interface, error) {
	return r.WatchWithContext(context.Background(), o)
}

func (r *receivingListWatch) ListWithContext(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
	return r.lw.ListWithContext(ctx, o)
}

func (r *receivingListWatch) WatchWithContext(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	w, err := r.lw.WatchWithContext(ctx, o)
	if err != nil {
		return nil, err
	}
	return newReceivedWatch(w, r.receive), nil
}

// receivedWatch is a watch read ahead into a buffer by its own goroutine,
// which readies each object as it arrives.
type receivedWatch struct {
	inner watch.Interface
	out   chan watch.Event
	stop  chan struct{}
	once  sync.Once
}

func newReceivedWatch(inner watch.Interface, receive func(any) any) *receivedWatch {
	w := &receivedWatch{inner: inner, out: make(chan watch.Event, receiveBuffer), stop: make(chan struct{})}
	go func() {
		defer close(w.out)
		for e := range inner.ResultChan() {
			switch e.Type {
			case watch.Added, watch.Modified, watch.Deleted:
				if o, ok := receive(e.Object).(runtime.Object); ok {
					e.Object = o
				}
			}
			select {
			case w.out <- e:
			case <-w.stop:
				return
			}
		}
	}()
	return w
}

func (w *receivedWatch) ResultChan() <-chan watch.Event { return w.out }

// Stop stops the watch; what it read ahead and the reflector did not take
// is dropped, as the connection's unread bytes would be.
func (w *receivedWatch) Stop() {
	w.once.Do(func() { close(w.stop) })
	w.inner.Stop()
}

// receivePod readies a pod pw's watch has just received: trimmed, if it
// came whole (the typed client's path; the exporter decodes pods trimmed),
// and stamped. A pod the trim refuses goes on whole, and the reflector
// drops it as a watch event of the wrong type; the error says why.
func (w *Watcher) receivePod(pw *podWatch) func(any) any {
	return func(obj any) any {
		if p, ok := obj.(*corev1.Pod); ok {
			trimmed, err := w.trim.pod(p)
			if err != nil {
				w.log.Error("Cannot trim a watched pod", "namespace", p.Namespace, "pod", p.Name, "err", err)
				return obj
			}
			obj = trimmed
		}
		stamped, _ := pw.stamp(obj, nil)
		return stamped
	}
}
