package demo

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ownerFile holds, in a demo's directory, the pid of the process that runs
// it. kwokctl starts the cluster's processes detached, so a demo killed by
// SIGKILL (or a test binary killed mid-run) leaves them running; the next
// demo finds them by a dead owner and deletes them.
const ownerFile = "owner.pid"

func writeOwner(dir string) error {
	return os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644)
}

// reapStale deletes the clusters and directories of demos whose process is
// gone.
func (d *Demo) reapStale(log *slog.Logger) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "podslo-demo-*"))
	for _, dir := range dirs {
		raw, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
		if err != nil || alive(pid) {
			continue
		}
		c := &cluster{kwokctl: filepath.Join(d.opts.KwokBinDir, "kwokctl"), workdir: dir}
		err = c.stop()
		log.Warn("Deleted the cluster of a demo that died without tearing down", "dir", dir, "pid", pid, "err", err)
		if err := os.RemoveAll(dir); err != nil {
			log.Error("Removing a dead demo's directory failed", "dir", dir, "err", err)
		}
	}
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
