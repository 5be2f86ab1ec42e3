package harness

import (
	"context"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
)

// Parallel calls fn for every i in [from, to) on workers goroutines (at
// least one), each taking the next i as it finishes the last, and stops at
// the first error, which it returns. fn's context is cancelled once any
// call fails.
func Parallel(ctx context.Context, from, to, workers int, fn func(ctx context.Context, i int) error) error {
	var next atomic.Int64
	next.Store(int64(from))
	g, gctx := errgroup.WithContext(ctx)
	for range max(workers, 1) {
		g.Go(func() error {
			for {
				i := int(next.Add(1) - 1)
				if i >= to || gctx.Err() != nil {
					return gctx.Err()
				}
				if err := fn(gctx, i); err != nil {
					return err
				}
			}
		})
	}
	return g.Wait()
}
