//go:build unix

package testenv

import (
	"syscall"
	"testing"
	"time"
)

// CPUTime is this process's user plus system CPU time; a child's is not in
// it.
func CPUTime(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
