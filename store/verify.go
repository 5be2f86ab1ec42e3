package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/dgraph-io/badger/v4/table"
	"github.com/dgraph-io/ristretto/v2/z"
)

// errCorrupt marks a state that failed podslo's own checksum verification.
var errCorrupt = errors.New("corrupt state")

// verifyTables checks the checksum of every block of every table before
// badger opens them. badger can verify at open itself, but a damaged block
// then panics in one of its own goroutines (a nil block in the error path of
// Table.VerifyChecksum, badger v4.9.6), which no recover can catch; here the
// same check runs on the caller's goroutine. Without any check, a damaged
// table loads partly and silently.
func verifyTables(dir string, bo badger.Options) error {
	tables, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	if err != nil {
		return fmt.Errorf("list tables in %q: %w", dir, err)
	}
	topts := table.Options{
		ReadOnly:             true,
		ChkMode:              options.OnTableRead,
		BlockSize:            bo.BlockSize,
		BloomFalsePositive:   bo.BloomFalsePositive,
		Compression:          bo.Compression,
		ZSTDCompressionLevel: bo.ZSTDCompressionLevel,
	}
	for _, path := range tables {
		if err := verifyTable(path, topts); err != nil {
			return err
		}
	}
	return nil
}

func verifyTable(path string, topts table.Options) (err error) {
	mf, err := z.OpenMmapFile(path, os.O_RDONLY, 0)
	if err != nil {
		// Not the table's fault: a permission or I/O error, for the
		// operator, never a reason to move the state aside.
		return fmt.Errorf("open table %q: %w", path, err)
	}
	defer func() {
		if r := recover(); r != nil {
			_ = mf.Close(-1)
			err = fmt.Errorf("%w: table %q: %v", errCorrupt, path, r)
		}
	}()
	t, err := table.OpenTable(mf, topts)
	if err != nil {
		// OpenTable has closed the mapping.
		return fmt.Errorf("%w: table %q: %v", errCorrupt, path, err)
	}
	// Close, not DecrRef: the last reference's DecrRef deletes the file.
	return t.Close(-1)
}
