package store

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"syscall"

	"golang.org/x/sys/unix"
)

// badgerFile matches what badger keeps in its directory; lost+found is what
// a freshly formatted volume (a PVC) holds before podslo writes anything.
var badgerFile = regexp.MustCompile(`^(MANIFEST|KEYREGISTRY|DISCARD|LOCK|\d+\.(sst|vlog|mem)|.*\.tmp|lost\+found)$`)

// formatMarker is a file in the state directory that names the newest
// format written there. It is not badger's, and that is its point: 0.1.0,
// which deletes every record it cannot read, refuses to start on a
// directory holding a file that is not badger's, so a rollback to 0.1.0
// onto a state this release wrote stops with the state untouched instead
// of losing it. A later release that writes a newer format rewrites it,
// and this release refuses to start on a marker newer than it reads.
const formatMarker = "PODSLO_STATE_FORMAT"

// writeFormatMarker writes the marker for WriteFormat, unless it already
// names it or a newer format: through a temporary file, synced, then
// renamed, so that a crash leaves the old marker or the new one.
func writeFormatMarker(dir string) error {
	path := filepath.Join(dir, formatMarker)
	if f, err := readFormatMarker(path); err == nil && f >= WriteFormat {
		return nil
	}
	tmp := path + ".tmp"
	content := fmt.Sprintf("podslo state format %d\n", WriteFormat)
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("write state format marker %q: %w", path, err)
	}
	_, err = f.WriteString(content)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write state format marker %q: %w", path, err)
	}
	return nil
}

// readFormatMarker reads the format a marker names.
func readFormatMarker(path string) (byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var f int
	if _, err := fmt.Sscanf(string(b), "podslo state format %d\n", &f); err != nil || f < 1 || f > 255 {
		return 0, fmt.Errorf("state format marker %q says %q, not \"podslo state format N\"", path, b)
	}
	return byte(f), nil
}

// checkStateDir makes sure dir can hold podslo's state before badger opens
// it, so that each problem of the machine gets an error that names it:
// badger reports them as text, with the errno lost. It creates a missing
// directory and reports whether the state is new. It never moves, renames or
// deletes anything.
func checkStateDir(dir string) (fresh bool, err error) {
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return false, fmt.Errorf("create state dir %q: %w", dir, err)
		}
		return true, writeProbe(dir)
	case err != nil:
		return false, fmt.Errorf("state dir %q: %w", dir, err)
	case !fi.IsDir():
		return false, fmt.Errorf("state dir %q is not a directory (it is a %s): point --state-dir at a directory", dir, fileKind(fi.Mode()))
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err == nil && st.Flags&unix.ST_RDONLY != 0 {
		return false, fmt.Errorf("state dir %q is on a read-only filesystem: %w", dir, syscall.EROFS)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("read state dir %q: %w", dir, err)
	}
	fresh = true
	for _, e := range entries {
		name := e.Name()
		if name == formatMarker {
			f, err := readFormatMarker(filepath.Join(dir, name))
			if err != nil {
				return false, fmt.Errorf("state dir %q: %w", dir, err)
			}
			if f > NewestFormat {
				return false, fmt.Errorf("state dir %q was written in format %d by a later release (%s): %w", dir, f, formatMarker, ErrNewerFormat)
			}
			continue
		}
		if !badgerFile.MatchString(name) {
			return false, fmt.Errorf("state dir %q holds %q, which is not podslo state: point --state-dir at an empty directory or one podslo created", dir, name)
		}
		if name == "lost+found" {
			continue
		}
		fresh = false
		// Every file must be readable and writable by this process: badger
		// would fail on the first one it cannot open, with the cause lost
		// in its text.
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_RDWR, 0)
		if err != nil {
			return false, fmt.Errorf("state dir %q: %w", dir, err)
		}
		_ = f.Close()
	}
	return fresh, writeProbe(dir)
}

// writeProbe creates, writes and removes a file: it finds a directory this
// process may not write to, and a read-only mount that statfs did not flag.
// Its few bytes may still fit on a full disk, which the free-space check
// handles.
func writeProbe(dir string) error {
	f, err := os.CreateTemp(dir, ".podslo-probe-*.tmp")
	if err != nil {
		return fmt.Errorf("state dir %q is not writable: %w", dir, err)
	}
	name := f.Name()
	_, werr := f.Write([]byte("podslo"))
	cerr := f.Close()
	rerr := os.Remove(name)
	if err := errors.Join(werr, cerr, rerr); err != nil && !errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("state dir %q is not writable: %w", dir, err)
	}
	return nil
}

func fileKind(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "regular file"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	case m&fs.ModeDevice != 0:
		return "device"
	case m&fs.ModeNamedPipe != 0:
		return "named pipe"
	case m&fs.ModeSocket != 0:
		return "socket"
	}
	return m.Type().String()
}

// freeBytes is the space an unprivileged process may still use on the
// filesystem holding path.
func freeBytes(path string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("statfs: %w", err)
	}
	return int64(st.Bavail) * st.Bsize, nil
}

// preallocate reserves the blocks of the files badger maps sparse: each
// memtable's write-ahead log (*.mem, created as 2×MemTableSize holes) and
// DISCARD. A later fault on a hole of such a mapping — a write, or on tmpfs
// even the read that replays the log at the next start — needs a block the
// filesystem may no longer have, and is then a SIGBUS. Reserved while free
// space is known to be above MinFreeBytes, they can no longer fail. Value
// logs stay sparse: podslo's values are all below the value threshold, so
// badger never maps their holes.
func preallocate(dir string, done map[string]bool) error {
	names, err := filepath.Glob(filepath.Join(dir, "*.mem"))
	if err != nil {
		return err
	}
	names = append(names, filepath.Join(dir, "DISCARD"))
	for _, name := range names {
		if done[name] {
			continue
		}
		f, err := os.OpenFile(name, os.O_RDWR, 0)
		if errors.Is(err, fs.ErrNotExist) {
			// Flushed and removed meanwhile.
			continue
		}
		if err != nil {
			return fmt.Errorf("preallocate %q: %w", name, err)
		}
		fi, err := f.Stat()
		if err == nil && fi.Size() > 0 {
			err = unix.Fallocate(int(f.Fd()), 0, 0, fi.Size())
		}
		_ = f.Close()
		if err != nil {
			return fmt.Errorf("preallocate %q: %w", name, err)
		}
		done[name] = true
	}
	for name := range done {
		if _, err := os.Stat(name); errors.Is(err, fs.ErrNotExist) {
			delete(done, name)
		}
	}
	return nil
}
