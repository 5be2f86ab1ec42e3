package harness

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

// Every index of the range is handed out exactly once, and no more calls
// run at once than there are workers.
func TestParallelCallsEachIndexOnce(t *testing.T) {
	for _, workers := range []int{0, 1, 3, 16} {
		var mu sync.Mutex
		seen := map[int]int{}
		var running, peak atomic.Int64
		err := Parallel(context.Background(), 5, 105, workers, func(_ context.Context, i int) error {
			n := running.Add(1)
			defer running.Add(-1)
			for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
			}
			mu.Lock()
			seen[i]++
			mu.Unlock()
			return nil
		})
		if err != nil {
			t.Fatalf("workers %d: %v", workers, err)
		}
		if len(seen) != 100 {
			t.Errorf("workers %d: %d distinct indices, want 100", workers, len(seen))
		}
		for i, n := range seen {
			if i < 5 || i >= 105 || n != 1 {
				t.Errorf("workers %d: index %d called %d times", workers, i, n)
			}
		}
		if limit := int64(max(workers, 1)); peak.Load() > limit {
			t.Errorf("workers %d: %d calls at once", workers, peak.Load())
		}
	}
}

// The first error stops the pool: on one worker, nothing after the
// failing index runs, and the error comes back.
func TestParallelStopsAtTheFirstError(t *testing.T) {
	boom := errors.New("boom")
	var called []int
	err := Parallel(context.Background(), 0, 10, 1, func(_ context.Context, i int) error {
		called = append(called, i)
		if i == 3 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want %v", err, boom)
	}
	if want := []int{0, 1, 2, 3}; !slices.Equal(called, want) {
		t.Errorf("called %v, want %v", called, want)
	}
}

// A cancelled context runs nothing and says why.
func TestParallelHonoursCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var calls atomic.Int64
	err := Parallel(ctx, 0, 10, 4, func(context.Context, int) error { calls.Add(1); return nil })
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
	if calls.Load() != 0 {
		t.Errorf("%d calls after cancellation", calls.Load())
	}
}
