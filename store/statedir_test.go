package store

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podslo/podslo/internal/testenv"
	"github.com/podslo/podslo/lifecycle"
)

func requireRoot(t *testing.T) { testenv.RequireRoot(t) }

func mountTmpfs(t *testing.T, size int64) string { return testenv.MountTmpfs(t, size) }

func fill(t *testing.T, dir string, leave int64) func() { return testenv.Fill(t, dir, leave) }

func stateDirError(t *testing.T, dir string) error {
	t.Helper()
	_, err := Open(Options{Dir: dir})
	require.Error(t, err)
	assert.Contains(t, err.Error(), dir, "the error names the path")
	return err
}

func TestAFileAsStateDirIsRefusedAndKept(t *testing.T) {
	file := filepath.Join(t.TempDir(), "state")
	require.NoError(t, os.WriteFile(file, []byte("user data"), 0o600))
	err := stateDirError(t, file)
	assert.Contains(t, err.Error(), "is not a directory (it is a regular file)")
	got, rerr := os.ReadFile(file)
	require.NoError(t, rerr)
	assert.Equal(t, "user data", string(got), "untouched")
	matches, _ := filepath.Glob(file + ".corrupt-*")
	assert.Empty(t, matches, "nothing renamed")
}

func TestAForeignDirIsRefusedAndKept(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "thesis.tex"), []byte("user data"), 0o600))
	err := stateDirError(t, dir)
	assert.Contains(t, err.Error(), `holds "thesis.tex", which is not podslo state`)
	entries, _ := os.ReadDir(dir)
	assert.Len(t, entries, 1, "nothing added or removed")
}

func TestLostAndFoundIsAFreshVolume(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "lost+found"), 0o700))
	s := open(t, dir)
	require.NoError(t, s.Apply(Change{UID: uidA, State: lifecycle.State{Scheduled: 1}, Meta: meta("a")}))
}

func TestAReadOnlyFilesystemIsRefusedAndKept(t *testing.T) {
	mnt := mountTmpfs(t, 256<<20)
	s := open(t, mnt)
	require.NoError(t, s.Apply(Change{UID: uidA, State: lifecycle.State{Scheduled: 1}, Meta: meta("a")}))
	require.NoError(t, s.Close())
	before, _ := os.ReadDir(mnt)
	require.NoError(t, syscall.Mount("", mnt, "", syscall.MS_REMOUNT|syscall.MS_RDONLY, ""))

	err := stateDirError(t, mnt)
	assert.ErrorIs(t, err, syscall.EROFS)
	assert.Contains(t, err.Error(), "read-only filesystem")
	assert.Zero(t, s.Stats().Recoveries.Load())
	after, _ := os.ReadDir(mnt)
	assert.Equal(t, len(before), len(after), "nothing moved")
	matches, _ := filepath.Glob(mnt + ".corrupt-*")
	assert.Empty(t, matches)
}

// TestPermissionChild is the child of TestAPermissionErrorIsRefusedAndKept,
// run as an unprivileged user.
func TestPermissionChild(t *testing.T) {
	dir := os.Getenv("PODSLO_PERMISSION_CHILD_DIR")
	if dir == "" {
		return // only meaningful as the child
	}
	_, err := Open(Options{Dir: dir})
	require.Error(t, err)
	assert.ErrorIs(t, err, os.ErrPermission)
	assert.Contains(t, err.Error(), dir)
}

func TestAPermissionErrorIsRefusedAndKept(t *testing.T) {
	requireRoot(t)
	// A state written by root, opened by uid 65532: as after a securityContext
	// change without fsGroup.
	// Not t.TempDir: its parent is private to root.
	parent, err := os.MkdirTemp("", "podslo-perm-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(parent) })
	require.NoError(t, os.Chmod(parent, 0o755))
	dir := filepath.Join(parent, "state")
	s := open(t, dir)
	require.NoError(t, s.Apply(Change{UID: uidA, State: lifecycle.State{Scheduled: 1}, Meta: meta("a")}))
	require.NoError(t, s.Close())
	require.NoError(t, os.Chmod(dir, 0o755)) // listable, not writable

	exe, err := os.Executable()
	require.NoError(t, err)
	bin := filepath.Join(parent, "store.test")
	data, err := os.ReadFile(exe)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, data, 0o755))
	cmd := exec.Command(bin, "-test.run", "^TestPermissionChild$", "-test.v")
	cmd.Env = append(os.Environ(), "PODSLO_PERMISSION_CHILD_DIR="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65532, Gid: 65532}}
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "--- PASS: TestPermissionChild")

	s = open(t, dir)
	assert.Equal(t, 1, s.Len(), "the state is intact")
	matches, _ := filepath.Glob(dir + ".corrupt-*")
	assert.Empty(t, matches)
}

// A damaged table used to load partly and silently. With checksums checked
// at open, it is a corrupt state: moved aside, logged and counted.
func TestADamagedTableIsMovedAsideLoggedAndCounted(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "state")
	s := open(t, dir)
	for i := range 20000 {
		uid := types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i))
		require.NoError(t, s.Apply(Change{UID: uid, State: lifecycle.State{Scheduled: int64(1700000000 + i), FirstSandboxReady: int64(1700000003 + i)}, Meta: meta("p")}))
	}
	require.NoError(t, s.Close())
	tables, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	require.NotEmpty(t, tables)
	var largest string
	var size int64
	for _, tb := range tables {
		if fi, _ := os.Stat(tb); fi.Size() > size {
			largest, size = tb, fi.Size()
		}
	}
	require.Greater(t, size, int64(16<<10))
	f, err := os.OpenFile(largest, os.O_RDWR, 0)
	require.NoError(t, err)
	junk := bytes.Repeat([]byte{0xa5}, 4096)
	_, err = f.WriteAt(junk, size/2)
	require.NoError(t, err)
	require.NoError(t, f.Close())

	var logs bytes.Buffer
	s2, err := Open(Options{Dir: dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s2.Close() })
	assert.Equal(t, uint64(1), s2.Stats().Recoveries.Load())
	assert.Zero(t, s2.Len(), "starts empty, not with a part")
	assert.Contains(t, logs.String(), "level=ERROR msg=\"State is corrupt")
	matches, _ := filepath.Glob(dir + ".corrupt-*")
	assert.Len(t, matches, 1, "the evidence is kept")
}

// On a full filesystem a write is refused before badger touches its
// mappings (where it would be a SIGBUS), the store keeps serving what it
// has, and writes resume once space returns.
func TestAFullFilesystemRefusesWritesAndRecovers(t *testing.T) {
	mnt := mountTmpfs(t, 96<<20)
	s, err := Open(Options{Dir: mnt, MinFreeBytes: 48 << 20, spaceRecheck: time.Nanosecond})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.NoError(t, s.Apply(Change{UID: uidA, State: lifecycle.State{Scheduled: 1}, Meta: meta("a")}))
	assert.True(t, s.Writable())

	free := fill(t, mnt, 8<<20)
	err = s.Apply(Change{UID: uidB, State: lifecycle.State{Scheduled: 2}, Meta: meta("b"), Add: []Sample{{Family: "f", Value: 1}}})
	assert.ErrorIs(t, err, ErrNoSpace)
	assert.False(t, s.Writable())
	assert.Equal(t, uint64(1), s.Stats().Failed(OpApply))
	_, ok := s.Get(uidB)
	assert.False(t, ok, "nothing changed")
	assert.Empty(t, aggregates(s))

	free()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.NoError(c, s.Apply(Change{UID: uidB, State: lifecycle.State{Scheduled: 2}, Meta: meta("b"), Add: []Sample{{Family: "f", Value: 1}}}))
	}, 5*time.Second, 100*time.Millisecond, "a full disk is looked at again within a second")
	assert.True(t, s.Writable())
	assert.Equal(t, map[string]seriesView{"f/": {Value: 1}}, aggregates(s), "counted once")
}

// A restart on a filesystem that is still full serves the state read-only
// instead of crash-looping, and writes it once space returns.
func TestOpenOnAFullFilesystemServesReadOnly(t *testing.T) {
	mnt := mountTmpfs(t, 96<<20)
	dir := filepath.Join(mnt, "state")
	opts := Options{Dir: dir, MinFreeBytes: 48 << 20, spaceRecheck: time.Nanosecond}
	s, err := Open(opts)
	require.NoError(t, err)
	require.NoError(t, s.Apply(Change{UID: uidA, State: lifecycle.State{Scheduled: 1}, Meta: meta("a"), Add: []Sample{{Family: "f", Value: 1}}}))
	require.NoError(t, s.Close())

	free := fill(t, mnt, 8<<20)
	s, err = Open(opts)
	require.NoError(t, err, "starts")
	t.Cleanup(func() { _ = s.Close() })
	assert.False(t, s.Writable())
	assert.Equal(t, 1, s.Len(), "serves what it loaded")
	assert.Equal(t, map[string]seriesView{"f/": {Value: 1}}, aggregates(s))
	assert.ErrorIs(t, s.Apply(Change{UID: uidB, State: lifecycle.State{Scheduled: 2}, Meta: meta("b")}), ErrNoSpace)

	free()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.NoError(c, s.Apply(Change{UID: uidB, State: lifecycle.State{Scheduled: 2}, Meta: meta("b")}))
	}, 5*time.Second, 100*time.Millisecond)
	require.NoError(t, s.Close())
	s, err = Open(opts)
	require.NoError(t, err)
	assert.Equal(t, 2, s.Len(), "both pods persisted")
	require.NoError(t, s.Close())
}

// A new state on a full filesystem: nothing to load, and no badger yet.
func TestANewStateOnAFullFilesystemStarts(t *testing.T) {
	mnt := mountTmpfs(t, 96<<20)
	free := fill(t, mnt, 8<<20)
	dir := filepath.Join(mnt, "state")
	s, err := Open(Options{Dir: dir, MinFreeBytes: 48 << 20})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	assert.False(t, s.Writable())
	assert.ErrorIs(t, s.Apply(Change{UID: uidA, State: lifecycle.State{Scheduled: 1}, Meta: meta("a")}), ErrNoSpace)
	free()
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.NoError(c, s.Apply(Change{UID: uidA, State: lifecycle.State{Scheduled: 1}, Meta: meta("a")}))
	}, 5*time.Second, 100*time.Millisecond)
}

// A free-space check holds for spaceRecheck while writes go ahead, so a busy
// exporter does not pay a statfs per pod update; a short one is always
// looked at again.
func TestFreeSpaceIsCheckedAtMostEveryRecheck(t *testing.T) {
	calls := 0
	statfs := func(string) (int64, error) { calls++; return 1 << 40, nil }
	s, err := Open(Options{Dir: t.TempDir(), statfs: statfs, spaceRecheck: time.Hour})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	calls = 0
	for i := range 100 {
		require.NoError(t, s.Apply(Change{UID: types.UID(fmt.Sprint("u", i)), State: lifecycle.State{Scheduled: 1}, Meta: meta("p")}))
	}
	assert.Equal(t, 1, calls, "one statfs for 100 writes within the window")

	s.opts.spaceRecheck = time.Nanosecond
	calls = 0
	for i := range 10 {
		require.NoError(t, s.Apply(Change{UID: types.UID(fmt.Sprint("v", i)), State: lifecycle.State{Scheduled: 1}, Meta: meta("p")}))
	}
	assert.Equal(t, 10, calls)
}

// The first write marks the state directory with the format it is written
// in: a file badger does not use, which 0.1.0 (that deletes every record it
// cannot read) refuses to start on, so a rollback stops instead of losing
// the state. This release reads its own marker and a state without one.
func TestTheFirstWriteMarksTheFormat(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	_, err := os.Stat(filepath.Join(dir, formatMarker))
	assert.ErrorIs(t, err, os.ErrNotExist, "opening writes nothing")
	require.NoError(t, s.Apply(Change{UID: uidA, State: lifecycle.State{FirstSandboxReady: 10, LastSandboxReady: 10}, Meta: meta("a")}))
	got, err := os.ReadFile(filepath.Join(dir, formatMarker))
	require.NoError(t, err)
	assert.Equal(t, fmt.Sprintf("podslo state format %d\n", WriteFormat), string(got))
	require.NoError(t, s.Close())

	// 0.1.0's own check of the directory (store/statedir.go at its commit)
	// accepts badger's files only: the marker is not one of them.
	assert.False(t, badgerFile.MatchString(formatMarker), "0.1.0 must refuse a directory with the marker")

	s = open(t, dir)
	got2, ok := s.Get(uidA)
	assert.True(t, ok, "this release reads its marked state")
	assert.Equal(t, int64(10), got2.FirstSandboxReady)
}

func TestANewerFormatMarkerIsRefusedAndKept(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	require.NoError(t, s.Apply(Change{UID: uidA, State: lifecycle.State{FirstSandboxReady: 10, LastSandboxReady: 10}, Meta: meta("a")}))
	require.NoError(t, s.Close())
	marker := filepath.Join(dir, formatMarker)
	for _, tc := range []struct{ content, want string }{
		{fmt.Sprintf("podslo state format %d\n", NewestFormat+1), "was written in format"},
		{"not a marker", `says "not a marker"`},
	} {
		require.NoError(t, os.WriteFile(marker, []byte(tc.content), 0o600))
		before, _ := os.ReadDir(dir)
		err := stateDirError(t, dir)
		assert.Contains(t, err.Error(), tc.want)
		if tc.want == "was written in format" {
			assert.ErrorIs(t, err, ErrNewerFormat)
		}
		after, _ := os.ReadDir(dir)
		assert.Equal(t, len(before), len(after), "nothing added or removed")
		got, _ := os.ReadFile(marker)
		assert.Equal(t, tc.content, string(got), "the marker is kept")
	}
}
