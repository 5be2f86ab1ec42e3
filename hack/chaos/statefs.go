package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// stateFS is the exporter's state filesystem: an ext4 image in the workdir,
// loop-mounted, or a tmpfs, so that filling it is a real ENOSPC on a real
// filesystem with badger's memory maps on it, and the rest of the machine
// is not touched.
type stateFS struct {
	image, mount string
	mounted      bool
	filler       string
}

// Kinds of state filesystem (--state-fs).
const (
	stateFSExt4  = "ext4"
	stateFSTmpfs = "tmpfs"
)

// mountStateFS mounts a sizeMiB filesystem of kind under workdir. ext4 is
// what a PersistentVolume usually carries; tmpfs needs no loop device, which
// some CI containers lack, and fails the same way when full (ENOSPC, or
// SIGBUS through a mapping).
func mountStateFS(workdir string, sizeMiB int, kind string) (*stateFS, error) {
	fs := &stateFS{mount: filepath.Join(workdir, "state-fs")}
	if kind == stateFSTmpfs {
		if err := os.MkdirAll(fs.mount, 0o755); err != nil {
			return nil, err
		}
		if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm,mode=0755", sizeMiB), "podslo-chaos", fs.mount).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("mount tmpfs on %s: %w: %s", fs.mount, err, out)
		}
		fs.mounted = true
		return fs, nil
	}
	fs.image = filepath.Join(workdir, "state.img")
	f, err := os.Create(fs.image)
	if err != nil {
		return nil, err
	}
	err = f.Truncate(int64(sizeMiB) << 20)
	f.Close()
	if err != nil {
		return nil, err
	}
	// -m 0: no blocks reserved for root, who runs the exporter here; a
	// full filesystem is then full for it too.
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-m", "0", fs.image).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mkfs.ext4 %s: %w: %s", fs.image, err, out)
	}
	if err := os.MkdirAll(fs.mount, 0o755); err != nil {
		return nil, err
	}
	if out, err := exec.Command("mount", "-o", "loop", fs.image, fs.mount).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mount -o loop %s: %w: %s", fs.image, err, out)
	}
	fs.mounted = true
	return fs, nil
}

// stateDir is the exporter's --state-dir: a directory inside the
// filesystem, so that the exporter may rename it (it moves a state it takes
// for corrupt aside) as it could on any volume.
func (fs *stateFS) stateDir() string { return filepath.Join(fs.mount, "state") }

// fill writes a file until the filesystem is full and returns its size.
func (fs *stateFS) fill() (int64, error) {
	fs.filler = filepath.Join(fs.mount, "filler")
	f, err := os.Create(fs.filler)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	var n int64
	for {
		w, err := f.Write(buf)
		n += int64(w)
		if errors.Is(err, syscall.ENOSPC) {
			break
		}
		if err != nil {
			return n, fmt.Errorf("fill %s: %w", fs.mount, err)
		}
	}
	// The last partial megabyte: block by block.
	for {
		_, err := f.Write(buf[:4096])
		if err != nil {
			break
		}
		n += 4096
	}
	if err := f.Sync(); err != nil && !errors.Is(err, syscall.ENOSPC) {
		return n, err
	}
	return n, nil
}

// free deletes the filler.
func (fs *stateFS) free() error {
	if fs.filler == "" {
		return nil
	}
	err := os.Remove(fs.filler)
	fs.filler = ""
	return err
}

// available is the free space, in bytes.
func (fs *stateFS) available() int64 {
	var st syscall.Statfs_t
	if err := syscall.Statfs(fs.mount, &st); err != nil {
		return -1
	}
	return int64(st.Bavail) * st.Bsize
}

// unmount unmounts the filesystem and removes the image, if any; the
// exporter must have stopped.
func (fs *stateFS) unmount() error {
	if fs.mounted {
		if out, err := exec.Command("umount", fs.mount).CombinedOutput(); err != nil {
			// A lazy unmount still frees the loop device once nothing
			// uses the filesystem.
			if out2, err2 := exec.Command("umount", "-l", fs.mount).CombinedOutput(); err2 != nil {
				return fmt.Errorf("umount %s: %w: %s; %s", fs.mount, err, out, out2)
			}
		}
		fs.mounted = false
	}
	_ = os.Remove(fs.mount)
	if fs.image == "" {
		return nil
	}
	return os.Remove(fs.image)
}
