package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// RequireRoot fails, never skips: real mounts and a second user need root,
// which developers' machines and CI have.
func RequireRoot(tb testing.TB) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Fatal("this test mounts filesystems: run it as root")
	}
}

// MountTmpfs mounts a tmpfs of size bytes on a new directory, unmounted in
// cleanup. It is a real filesystem for what disk faults need: it runs out of
// space (a write into a mapping it cannot back is a SIGBUS, as on a disk),
// and it can be remounted read-only.
func MountTmpfs(tb testing.TB, size int64, opts ...string) string {
	tb.Helper()
	RequireRoot(tb)
	dir := tb.TempDir()
	data := strings.Join(append([]string{fmt.Sprintf("size=%d", size)}, opts...), ",")
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, data); err != nil {
		tb.Fatalf("mount tmpfs on %s: %v", dir, err)
	}
	tb.Cleanup(func() { _ = syscall.Unmount(dir, syscall.MNT_DETACH) })
	return dir
}

// FreeBytes is the space an unprivileged process may still use on the
// filesystem holding path.
func FreeBytes(tb testing.TB, path string) int64 {
	tb.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		tb.Fatalf("statfs %s: %v", path, err)
	}
	return int64(st.Bavail) * st.Bsize
}

// Fill writes a filler file into dir until its filesystem has less than
// leave bytes free (0: until it is full), and returns the func that removes
// it.
func Fill(tb testing.TB, dir string, leave int64) (free func()) {
	tb.Helper()
	name := filepath.Join(dir, "..filler")
	f, err := os.Create(name)
	if err != nil {
		tb.Fatalf("create filler: %v", err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for {
		avail := FreeBytes(tb, dir)
		if avail < leave || avail == 0 {
			break
		}
		n := int64(len(buf))
		if leave > 0 {
			n = min(n, avail-leave+4096)
		}
		if _, err := f.Write(buf[:n]); err != nil {
			break // ENOSPC: full
		}
	}
	return func() {
		if err := os.Remove(name); err != nil {
			tb.Errorf("remove filler: %v", err)
		}
	}
}
