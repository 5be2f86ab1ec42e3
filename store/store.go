package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/y"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/podslo/podslo/lifecycle"
)

// InMemory as Options.Dir keeps all state in memory: nothing survives a
// restart, so observations may be counted twice across one.
const InMemory = ":memory:"

// DefaultGCInterval is the default for Options.GCInterval.
const DefaultGCInterval = 10 * time.Minute

// spaceRecheck is how long a free-space check holds while writes go
// ahead: far less than MinFreeBytes takes to fill (at ~30 µs and under 1 KB
// a write, 100 ms of writes is a few MB), and it keeps statfs off most
// writes.
const spaceRecheck = 100 * time.Millisecond

// DefaultMinFreeBytes is the default for Options.MinFreeBytes: more than
// badger writes between two checks (a memtable file of 2×4 MB, its flush to
// an L0 table, and an L0→L1 compaction of a few MB at 100k pods).
const DefaultMinFreeBytes = 64 << 20

var (
	// ErrClosed is returned by every call after Close.
	ErrClosed = errors.New("store is closed")
	// ErrLocked means another process holds the state directory.
	ErrLocked = errors.New("state directory is in use by another process")
	// ErrNoSpace means the state filesystem has less free space than
	// Options.MinFreeBytes: the write was refused before badger could
	// touch its memory-mapped files, where a full disk is a SIGBUS.
	ErrNoSpace = errors.New("state filesystem is full")
	// ErrStateLoaded means the state, unreadable while the filesystem was
	// full, has just been loaded: the change was computed against an empty
	// state and must be computed again (the pod's next update or retry).
	ErrStateLoaded = errors.New("state loaded now that space returned: compute the change again")
)

// Options configures a Store.
type Options struct {
	// Dir is the state directory, created if missing. InMemory keeps state
	// in memory only. Required.
	Dir string
	// Buckets are the classic bucket upper bounds shared by every histogram.
	// Changing them keeps the persisted counts (rebucket). Default
	// Buckets.
	Buckets []float64
	// GCInterval is how often the value log is garbage-collected. Default
	// DefaultGCInterval.
	GCInterval time.Duration
	// MinFreeBytes is the free space the state filesystem must keep for a
	// write to go ahead. badger memory-maps its files, and a write into a
	// mapping that the filesystem cannot back kills the process with
	// SIGBUS: the only safe full-disk error is one raised before the write.
	// Default DefaultMinFreeBytes.
	MinFreeBytes int64
	// WindowRetention is how long the windowed counts are kept (Windows):
	// the longest window a reader asks for. Default
	// DefaultWindowRetention.
	WindowRetention time.Duration
	// WindowFamilies says which families' windowed counts are kept: those
	// a reader asks for (the SLOs' events and failures). Default: every
	// family.
	WindowFamilies func(family string) bool
	// Logger receives the store's and badger's logs. Default: discard.
	Logger *slog.Logger
	// Now is the clock the windowed counts are kept by. Default time.Now;
	// tests set their own.
	Now func() time.Time
	// statfs reports the free bytes of the filesystem holding a path;
	// tests replace it.
	statfs func(path string) (int64, error)
	// spaceRecheck overrides the package's spaceRecheck; tests that fill
	// a filesystem right after a write set it tiny.
	spaceRecheck time.Duration
}

// Validate reports the first invalid option.
func (o *Options) Validate() error {
	if o.Dir == "" {
		return errors.New("state dir must be set (use " + InMemory + " for no persistence)")
	}
	for i := 1; i < len(o.Buckets); i++ {
		if !(o.Buckets[i] > o.Buckets[i-1]) {
			return fmt.Errorf("histogram buckets must increase, got %v", o.Buckets)
		}
	}
	if o.GCInterval < 0 {
		return fmt.Errorf("gc interval must not be negative, got %s", o.GCInterval)
	}
	if o.MinFreeBytes < 0 {
		return fmt.Errorf("min free bytes must not be negative, got %d", o.MinFreeBytes)
	}
	if o.WindowRetention < 0 {
		return fmt.Errorf("window retention must not be negative, got %s", o.WindowRetention)
	}
	return nil
}

func (o *Options) withDefaults() Options {
	c := *o
	if len(c.Buckets) == 0 {
		c.Buckets = Buckets
	}
	if c.GCInterval == 0 {
		c.GCInterval = DefaultGCInterval
	}
	if c.MinFreeBytes == 0 {
		c.MinFreeBytes = DefaultMinFreeBytes
	}
	if c.WindowRetention == 0 {
		c.WindowRetention = DefaultWindowRetention
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.statfs == nil {
		c.statfs = freeBytes
	}
	if c.spaceRecheck == 0 {
		c.spaceRecheck = spaceRecheck
	}
	return c
}

// PodMeta is what per-pod series show of a live pod. It comes from the
// informer and is never persisted: after a restart it is filled again as the
// informer replays the pods.
type PodMeta struct {
	Namespace    string
	Name         string
	Node         string
	RuntimeClass string
	StorageClass string
	// PodLabels holds the values of the configured pod labels, in order.
	PodLabels []string
	// HistogramLabels holds the values of the configured extra histogram
	// dimensions, in order.
	HistogramLabels []string
	// DeletionDeadline is the pod's deletionTimestamp in Unix seconds (its
	// deletion request plus the grace period, as the API server keeps
	// it), 0 while none is set: whether a pending termination is past its
	// grace (collectors).
	DeletionDeadline int64
}

// Sample is one change to an aggregate series.
type Sample struct {
	Family string
	Labels []string
	// Value is the observed value for a histogram, the increment for a
	// counter.
	Value    float64
	Exemplar *Exemplar
	// Precise marks a histogram observation measured in milliseconds.
	Precise bool
}

// Change is everything one pod event changes, applied atomically.
type Change struct {
	UID   types.UID
	State lifecycle.State
	// Meta replaces the pod's live metadata when not nil.
	Meta *PodMeta
	// Observe adds observations to histogram families.
	Observe []Sample
	// Add increments counter families.
	Add []Sample
	// Forget deletes the pod's record in the same transaction: the pod is
	// gone, and what its last change counted must not be lost or repeated.
	Forget bool
}

type pod struct {
	state lifecycle.State
	// meta is nil for a pod loaded from disk and not yet seen by the
	// informer since start; Unseen lists such pods.
	meta *PodMeta
}

type series struct {
	family string
	labels []string
	agg    *Aggregate
}

// Store is the exporter's memory of pods and aggregates. Reads are served
// from memory; every change is written to badger before it becomes visible,
// so what a scrape shows has always been persisted.
type Store struct {
	opts   Options
	db     *badger.DB
	log    *slog.Logger
	stats  Stats
	closed atomic.Bool

	// writable is false while the state filesystem is short of space (or
	// the store is read-only because it was full at Open).
	writable atomic.Bool

	mu     sync.RWMutex
	pods   map[types.UID]*pod
	series map[string]*series
	// windows are the windowed counts of each series (window.go), by the
	// same key as series.
	windows map[string]*slotSeries
	// settings are what the state was written under (Setting); guarded
	// by mu.
	settings map[string][]byte
	// layouts are the classic bucket layouts the state holds, by ID
	// (layoutID); layout is the ID of opts.Buckets, written with the first
	// histogram record that needs it. Guarded by mu.
	layouts map[uint32][]float64
	layout  uint32
	// readOnly: badger was opened read-only (or not at all, db nil, for a
	// new state) because the filesystem was full at Open; the first write
	// after space returns reopens it read-write. Guarded by mu.
	readOnly bool
	// formatMarked: the state directory's format marker is written
	// (writeFormatMarker), so records in WriteFormat may be.
	formatMarked bool
	// spaceCheckedAt is when free space was last found short; guarded by
	// mu. A full filesystem is looked at again at most once a second.
	spaceCheckedAt time.Time
	// spaceOKAt is when free space was last found sufficient; guarded by
	// mu. Within spaceRecheck of it, writes skip the statfs.
	spaceOKAt time.Time
	// unloaded: the state could not even be read while the filesystem was
	// full (badger's read-only mode refuses a log that needs recovery after
	// a crash, and recovery writes); it is loaded when writes resume.
	// Guarded by mu.
	unloaded bool
	// preallocated are the mapped files whose blocks are reserved, and
	// preallocatedAt when new ones were last looked for; guarded by mu.
	preallocated   map[string]bool
	preallocatedAt time.Time
}

// Open opens (or creates) the state in opts.Dir and loads it into memory.
//
// A state directory that podslo cannot use as it is (a path that is not a
// directory, a permission error, a read-only filesystem, a directory that
// holds files of something else) is an error that names the path and the
// cause: nothing is moved, renamed or deleted. Only a state that badger
// reports as corrupt, with every table's checksum verified, is moved aside to
// "<dir>.corrupt-<unix time>" and replaced by an empty one, and that is
// logged at error level and counted in Stats().Recoveries: losing the memory
// of what was observed is better than not serving at all, and the move keeps
// the evidence. A directory held by another process is ErrLocked.
//
// A filesystem with less than MinFreeBytes free opens the state read-only:
// the store serves what it loaded, refuses writes with ErrNoSpace, and opens
// read-write again on the first write after space returns.
func Open(opts Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	s := &Store{
		opts:    opts,
		log:     opts.Logger,
		pods:    map[types.UID]*pod{},
		series:  map[string]*series{},
		windows: map[string]*slotSeries{},

		settings: map[string][]byte{},
		layouts:  map[uint32][]float64{},
		layout:   layoutID(opts.Buckets),

		preallocated: map[string]bool{},
	}
	s.writable.Store(true)
	if opts.Dir == InMemory {
		db, err := openBadger(opts, false)
		if err != nil {
			return nil, fmt.Errorf("open in-memory state: %w", err)
		}
		s.db = db
		return s, nil
	}
	fresh, err := checkStateDir(opts.Dir)
	if err != nil {
		return nil, err
	}
	if free, err := opts.statfs(opts.Dir); err != nil {
		return nil, fmt.Errorf("state dir %q: %w", opts.Dir, err)
	} else if free < opts.MinFreeBytes {
		s.log.Error("State filesystem is full: serving the state read-only until space returns", "dir", opts.Dir, "freeBytes", free, "minFreeBytes", opts.MinFreeBytes)
		s.readOnly = true
		s.writable.Store(false)
		s.spaceCheckedAt = time.Now()
		if fresh {
			// Nothing to load, and a read-only badger cannot create a state.
			return s, nil
		}
	}
	db, err := openBadger(opts, s.readOnly)
	if err != nil && s.readOnly && !errors.Is(err, ErrLocked) {
		s.log.Error("State cannot be read while its filesystem is full: serving without it until space returns", "dir", opts.Dir, "err", err)
		s.unloaded = true
		return s, nil
	}
	if err != nil && !errors.Is(err, ErrLocked) && isCorrupt(err) && !s.readOnly {
		aside := fmt.Sprintf("%s.corrupt-%d", strings.TrimRight(opts.Dir, "/"), time.Now().Unix())
		s.log.Error("State is corrupt: moving it aside and starting empty; pods observed before may be observed again", "dir", opts.Dir, "aside", aside, "err", err)
		if rerr := os.Rename(opts.Dir, aside); rerr != nil {
			return nil, fmt.Errorf("move corrupt state %q aside: %w (open failed with: %v)", opts.Dir, rerr, err)
		}
		s.stats.Recoveries.Add(1)
		if _, err := checkStateDir(opts.Dir); err != nil {
			return nil, err
		}
		db, err = openBadger(opts, false)
	}
	if err != nil {
		return nil, fmt.Errorf("open state at %q: %w", opts.Dir, err)
	}
	s.db = db
	if err := s.load(); err != nil {
		_ = db.Close()
		if errors.Is(err, ErrNewerFormat) {
			return nil, fmt.Errorf("load state from %q: %w: run the podslo release that wrote it, or a later one; the state was left as it is", opts.Dir, err)
		}
		return nil, fmt.Errorf("load state from %q: %w", opts.Dir, err)
	}
	if !s.readOnly {
		if err := preallocate(opts.Dir, s.preallocated); err != nil {
			_ = db.Close()
			return nil, err
		}
		s.preallocatedAt = time.Now()
	}
	return s, nil
}

func openBadger(opts Options, readOnly bool) (*badger.DB, error) {
	bo := badgerOptions(opts, readOnly)
	if opts.Dir != InMemory {
		// A flipped block must be a corrupt state, moved aside and counted,
		// not a partial load.
		if err := verifyTables(opts.Dir, bo); err != nil {
			return nil, err
		}
	}
	db, err := badger.Open(bo)
	if err != nil && (errors.Is(err, syscall.EWOULDBLOCK) || strings.Contains(err.Error(), "Cannot acquire directory lock")) {
		return nil, fmt.Errorf("%w: %v", ErrLocked, err)
	}
	return db, err
}

func badgerOptions(opts Options, readOnly bool) badger.Options {
	bo := badger.DefaultOptions(opts.Dir).WithReadOnly(readOnly)
	if opts.Dir == InMemory {
		bo = badger.DefaultOptions("").WithInMemory(true)
	}
	// Sized for a small state (tens of bytes per pod) rather than badger's
	// defaults, which reserve hundreds of MB for memtables and caches. The
	// memtables are the largest fixed cost (8 MB ones cost ~300 B per pod
	// more at 100k pods); the value threshold must stay under the batch size
	// they allow, and every podslo value (at most ~900 B) stays in the LSM.
	bo = bo.WithLogger(badgerLogger{opts.Logger}).
		WithMemTableSize(4 << 20).
		WithValueThreshold(1 << 10).
		WithNumMemtables(2).
		WithNumLevelZeroTables(2).
		WithNumLevelZeroTablesStall(8).
		WithBaseTableSize(1 << 20).
		WithBlockCacheSize(4 << 20).
		WithValueLogFileSize(16 << 20).
		WithNumCompactors(2).
		WithCompactL0OnClose(true).
		WithMetricsEnabled(false).
		// One writer (the informer handler) at a time: no conflicts to detect.
		WithDetectConflicts(false)
	return bo
}

// isCorrupt tells whether badger found the state itself damaged. badger
// wraps its errors as text, so beyond errors.Is the messages are matched;
// anything else (permissions, space, I/O) is left to the operator, since
// moving the directory aside would not help and would lose its state.
func isCorrupt(err error) bool {
	if errors.Is(err, errCorrupt) || errors.Is(err, y.ErrChecksumMismatch) || errors.Is(err, badger.ErrTruncateNeeded) {
		return true
	}
	msg := err.Error()
	for _, m := range []string{"checksum mismatch", "Checksum mismatch", "bad magic", "Bad magic", "manifest has unsupported version", "corrupt", "Corrupt", "failed to read table index", "unexpected EOF", "Invalid checksum"} {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

// load reads every record into memory. It deletes nothing: a record whose
// checksum fails (or, in format 1, which has none, that does not decode) is
// corrupt, and is logged, counted and left out, one bad record not costing
// the rest; a record in a newer format, or one that does not parse though
// its checksum holds, stops the load with an error that names it, since
// the store cannot tell what it would count twice.
func (s *Store) load() error {
	return s.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			item := it.Item()
			key := item.KeyCopy(nil)
			err := item.Value(func(v []byte) error { return s.loadRecord(key, v) })
			switch {
			case err == nil:
				s.stats.count(OpLoad, true)
			case errors.Is(err, errChecksum):
				s.log.Error("Ignoring corrupt state record: its pod may be observed again", "key", fmt.Sprintf("%q", key), "err", err)
				s.stats.count(OpLoad, false)
			default:
				return fmt.Errorf("state record %q: %w", key, err)
			}
		}
		return nil
	})
}

func (s *Store) loadRecord(key, val []byte) error {
	if len(key) == 0 {
		return errDecode
	}
	switch key[0] {
	case prefixPodUUID, prefixPodString:
		uid, err := uidFromKey(key)
		if err != nil {
			return err
		}
		p := &pod{}
		if err := decodeStateInto(val, &p.state); err != nil {
			return err
		}
		s.pods[uid] = p
	case prefixAggregate:
		family, labels, err := splitAggregateKey(key)
		if err != nil {
			return err
		}
		agg, err := decodeAggregate(val, s.opts.Buckets, s.layouts)
		if err != nil {
			return err
		}
		family, length, start, window, err := parseWindowFamily(family)
		if err != nil {
			return err
		}
		if window {
			s.loadSlot(family, labels, length, start, agg)
			return nil
		}
		if agg.Histogram != nil {
			agg.Exemplars = make([]Exemplar, len(s.opts.Buckets)+1)
		}
		s.series[family+"\x00"+labels] = &series{family: family, labels: splitLabels(labels), agg: agg}
	case prefixSetting:
		s.settings[string(key[1:])] = append([]byte(nil), val...)
	case prefixLayout:
		id, bounds, err := decodeLayout(key, val)
		if err != nil {
			return err
		}
		s.layouts[id] = bounds
	default:
		// A record type this release does not know: a newer release's.
		return fmt.Errorf("record type %q: %w", key[0], ErrNewerFormat)
	}
	return nil
}

func joinLabels(values []string) string { return strings.Join(values, "\xff") }

func splitLabels(joined string) []string {
	if joined == "" {
		return nil
	}
	return strings.Split(joined, "\xff")
}

// Buckets returns the classic histogram bucket bounds.
func (s *Store) Buckets() []float64 { return s.opts.Buckets }

// Get returns the remembered state of a pod.
func (s *Store) Get(uid types.UID) (lifecycle.State, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	p, ok := s.pods[uid]
	if !ok {
		return lifecycle.State{}, false
	}
	return p.state, true
}

// Meta is what the store keeps in memory of a live pod besides its state;
// nil for a pod not seen live since the store opened. The caller must not
// modify it.
func (s *Store) Meta(uid types.UID) *PodMeta {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if p, ok := s.pods[uid]; ok {
		return p.meta
	}
	return nil
}

// Apply persists c and then makes it visible. On error nothing changes, in
// memory or on disk, so the caller can apply the same change again later.
func (s *Store) Apply(c Change) error {
	if s.closed.Load() {
		return ErrClosed
	}
	s.mu.Lock()
	defer s.mu.Unlock()

	p, known := s.pods[c.UID]
	stateChanged := !known || p.state != c.State
	if !stateChanged && len(c.Observe) == 0 && len(c.Add) == 0 && !c.Forget {
		// Nothing to persist: only the live metadata may have moved.
		if c.Meta != nil {
			p.meta = c.Meta
		}
		return nil
	}
	if err := s.ensureSpace(); err != nil {
		s.stats.count(OpApply, false)
		return err
	}

	updated, exemplars, err := s.updatedSeries(c)
	if err != nil {
		s.stats.count(OpApply, false)
		return err
	}
	slots := s.updatedSlots(c, s.opts.Now())
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	switch {
	case c.Forget:
		if err := txn.Delete(podKey(c.UID)); err != nil {
			s.stats.count(OpApply, false)
			return fmt.Errorf("forget pod %s: %w", c.UID, err)
		}
	case stateChanged:
		if err := txn.Set(podKey(c.UID), encodeState(c.State)); err != nil {
			s.stats.count(OpApply, false)
			return fmt.Errorf("write pod %s: %w", c.UID, err)
		}
	}
	newLayout := false
	for key, sr := range updated {
		if sr.agg.Histogram != nil && s.layouts[s.layout] == nil && !newLayout {
			// The first histogram written under these bounds brings
			// them along, in the same transaction.
			if err := txn.Set(layoutKey(s.layout), encodeLayout(s.opts.Buckets)); err != nil {
				s.stats.count(OpApply, false)
				return fmt.Errorf("write bucket layout: %w", err)
			}
			newLayout = true
		}
		if err := txn.Set(aggregateKey(sr.family, key[len(sr.family)+1:]), encodeAggregate(sr.agg, s.layout)); err != nil {
			s.stats.count(OpApply, false)
			return fmt.Errorf("write %s series: %w", sr.family, err)
		}
	}
	for _, ps := range slots {
		if err := txn.Set(ps.recordKey(), encodeAggregate(ps.counts.aggregate(len(s.opts.Buckets), ps.start), s.layout)); err != nil {
			s.stats.count(OpApply, false)
			return fmt.Errorf("write %s window: %w", ps.family, err)
		}
	}
	if err := txn.Commit(); err != nil {
		s.stats.count(OpApply, false)
		return fmt.Errorf("commit pod %s: %w", c.UID, err)
	}
	s.stats.count(OpApply, true)
	if newLayout {
		s.layouts[s.layout] = s.opts.Buckets
	}

	for key, sr := range updated {
		s.series[key] = sr
	}
	s.keepSlots(slots)
	for _, e := range exemplars {
		e.agg.Exemplars[e.bucket] = *e.exemplar
	}
	if c.Forget {
		delete(s.pods, c.UID)
		return nil
	}
	if !known {
		p = &pod{}
		s.pods[c.UID] = p
	}
	p.state = c.State
	if c.Meta != nil {
		p.meta = c.Meta
	}
	return nil
}

// ensureSpace refuses a write while the filesystem is short of space, and
// reopens a state opened read-only once space is back; then it makes sure
// the state directory says which format it is written in before anything
// is (writeFormatMarker). Called with mu held.
func (s *Store) ensureSpace() error {
	if err := s.checkSpace(); err != nil {
		return err
	}
	if s.opts.Dir == InMemory || s.formatMarked {
		return nil
	}
	if err := writeFormatMarker(s.opts.Dir); err != nil {
		return err
	}
	s.formatMarked = true
	return nil
}

func (s *Store) checkSpace() error {
	if s.opts.Dir == InMemory {
		return nil
	}
	if s.writable.Load() && !s.readOnly && time.Since(s.spaceOKAt) < s.opts.spaceRecheck {
		return nil
	}
	if !s.writable.Load() && time.Since(s.spaceCheckedAt) < time.Second {
		// Looked at less than a second ago: a full disk on a busy cluster
		// would otherwise cost a statfs per pod update.
		return ErrNoSpace
	}
	free, err := s.opts.statfs(s.opts.Dir)
	if err != nil {
		return fmt.Errorf("check free space of %q: %w", s.opts.Dir, err)
	}
	if free < s.opts.MinFreeBytes {
		if s.writable.Swap(false) {
			s.log.Error("State filesystem is full: writes are refused until space returns", "dir", s.opts.Dir, "freeBytes", free, "minFreeBytes", s.opts.MinFreeBytes)
		}
		s.spaceCheckedAt = time.Now()
		return fmt.Errorf("%w: %d bytes free in %q, %d needed", ErrNoSpace, free, s.opts.Dir, s.opts.MinFreeBytes)
	}
	if s.readOnly {
		if s.db != nil {
			if err := s.db.Close(); err != nil {
				return fmt.Errorf("close read-only state at %q: %w", s.opts.Dir, err)
			}
			s.db = nil
		}
		db, err := openBadger(s.opts, false)
		if err != nil {
			s.spaceCheckedAt = time.Now()
			return fmt.Errorf("reopen state at %q for writing: %w", s.opts.Dir, err)
		}
		s.db, s.readOnly = db, false
		s.preallocatedAt = time.Time{}
		if s.unloaded {
			// Nothing was written meanwhile: every write was refused, so
			// the maps are still empty and the state on disk is whole.
			if err := s.load(); err != nil {
				return fmt.Errorf("load state from %q: %w", s.opts.Dir, err)
			}
			s.unloaded = false
			s.log.Info("State loaded once space returned", "dir", s.opts.Dir, "pods", len(s.pods))
			// The change in hand was computed against the empty state.
			return ErrStateLoaded
		}
	}
	if time.Since(s.preallocatedAt) >= time.Second {
		// badger starts a new memtable file every 4 MB of writes: reserve
		// it while the space is known to be there.
		if err := preallocate(s.opts.Dir, s.preallocated); err != nil {
			return err
		}
		s.preallocatedAt = time.Now()
	}
	if !s.writable.Swap(true) {
		s.log.Info("State filesystem has space again: writes resume", "dir", s.opts.Dir, "freeBytes", free)
	}
	s.spaceOKAt = time.Now()
	return nil
}

// Writable reports whether the last write could go ahead: false while the
// state filesystem is short of space.
func (s *Store) Writable() bool { return s.writable.Load() }

// pendingExemplar is an exemplar to record once the commit succeeded.
type pendingExemplar struct {
	agg      *Aggregate
	bucket   int
	exemplar *Exemplar
}

// updatedSeries returns copies of the series c touches, with c applied, so
// that a failed commit leaves the visible ones as they were, and the
// exemplars to record after the commit.
func (s *Store) updatedSeries(c Change) (map[string]*series, []pendingExemplar, error) {
	if len(c.Observe) == 0 && len(c.Add) == 0 {
		return nil, nil, nil
	}
	var exemplars []pendingExemplar
	now := time.Now()
	out := make(map[string]*series, len(c.Observe)+len(c.Add))
	get := func(smp Sample, histogram bool) (*series, error) {
		key := smp.Family + "\x00" + joinLabels(smp.Labels)
		if sr, ok := out[key]; ok {
			return sr, nil
		}
		sr := &series{family: smp.Family, labels: smp.Labels}
		if old, ok := s.series[key]; ok {
			if (old.agg.Histogram != nil) != histogram {
				return nil, fmt.Errorf("series %s%v is both a counter and a histogram", smp.Family, smp.Labels)
			}
			sr.labels = old.labels
			sr.agg = old.agg.clone()
		} else {
			sr.agg = &Aggregate{Created: now.Unix()}
			if histogram {
				sr.agg.Histogram = newHistogram(s.opts.Buckets)
				sr.agg.Exemplars = make([]Exemplar, len(s.opts.Buckets)+1)
			}
		}
		out[key] = sr
		return sr, nil
	}
	for _, smp := range c.Observe {
		sr, err := get(smp, true)
		if err != nil {
			return nil, nil, err
		}
		bucket := sr.agg.Histogram.observe(s.opts.Buckets, smp.Value)
		if smp.Precise {
			sr.agg.Histogram.Precise++
		}
		if smp.Exemplar != nil {
			exemplars = append(exemplars, pendingExemplar{sr.agg, bucket, smp.Exemplar})
		}
	}
	for _, smp := range c.Add {
		sr, err := get(smp, false)
		if err != nil {
			return nil, nil, err
		}
		sr.agg.Value += smp.Value
	}
	return out, exemplars, nil
}

// Setting returns a setting the state was written under, such as the
// exporter's scope, and whether it was ever set.
func (s *Store) Setting(name string) ([]byte, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	v, ok := s.settings[name]
	return v, ok
}

// SetSetting persists a setting of the state. A setting is not a pod nor
// an aggregate: it says what the pods and aggregates were written under.
func (s *Store) SetSetting(name string, value []byte) error {
	if s.closed.Load() {
		return ErrClosed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.ensureSpace(); err != nil {
		return err
	}
	key := append([]byte{prefixSetting}, name...)
	if err := s.db.Update(func(txn *badger.Txn) error { return txn.Set(key, value) }); err != nil {
		return fmt.Errorf("write setting %s: %w", name, err)
	}
	s.settings[name] = append([]byte(nil), value...)
	return nil
}

// UIDs calls fn for the UID of every pod record, under a read lock: fn must
// not call back into the Store.
func (s *Store) UIDs(fn func(uid types.UID)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for uid := range s.pods {
		fn(uid)
	}
}

// Pods calls fn for every pod that is live (seen since Open), under a read
// lock: fn must not call back into the Store.
func (s *Store) Pods(fn func(uid types.UID, state *lifecycle.State, meta *PodMeta)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for uid, p := range s.pods {
		if p.meta != nil {
			fn(uid, &p.state, p.meta)
		}
	}
}

// Aggregates calls fn for every series, under a read lock: fn must not call
// back into the Store nor keep agg or anything it points to.
func (s *Store) Aggregates(fn func(family string, labels []string, agg *Aggregate)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, sr := range s.series {
		fn(sr.family, sr.labels, sr.agg)
	}
}

// Start runs value-log garbage collection every GCInterval, and the
// compaction of the windowed counts every FineSlot, until ctx ends.
func (s *Store) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Go(func() {
		wait.UntilWithContext(ctx, func(context.Context) {
			err := s.CompactWindows(s.opts.Now())
			if err != nil && !errors.Is(err, ErrNoSpace) && !errors.Is(err, ErrClosed) {
				s.log.Warn("Compacting the windowed counts failed: trying again later", "err", err)
			}
		}, FineSlot)
	})
	wait.UntilWithContext(ctx, func(context.Context) { s.collectGarbage() }, s.opts.GCInterval)
	wg.Wait()
	return nil
}

func (s *Store) collectGarbage() {
	if s.closed.Load() || s.opts.Dir == InMemory || !s.writable.Load() {
		return
	}
	for {
		// Rewrite a value-log file when at least half of it is stale, until
		// badger finds none left.
		err := s.db.RunValueLogGC(0.5)
		if errors.Is(err, badger.ErrNoRewrite) || errors.Is(err, badger.ErrRejected) {
			s.stats.count(OpGC, true)
			return
		}
		if err != nil {
			s.stats.count(OpGC, false)
			s.log.Warn("State garbage collection failed", "err", err)
			return
		}
	}
}

// Close flushes and closes the state. It is idempotent: a second Close
// returns nil, and every later write returns ErrClosed.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.db == nil {
		return nil
	}
	if !s.readOnly && s.opts.Dir != InMemory {
		if free, err := s.opts.statfs(s.opts.Dir); err == nil && free < s.opts.MinFreeBytes {
			// Closing flushes the memtable into a new mapped table: on a
			// full disk, a SIGBUS. Every commit is already in the memtable's
			// own file, which the next Open replays, so leaving it is safe.
			s.log.Error("State filesystem is full: leaving the state unflushed, the next start replays it", "dir", s.opts.Dir, "freeBytes", free)
			return nil
		}
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close state at %q: %w", s.opts.Dir, err)
	}
	return nil
}

// Size returns the bytes the state takes on disk: LSM tree and value log.
func (s *Store) Size() (lsm, vlog int64) {
	if s.closed.Load() {
		return 0, 0
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.db == nil {
		return 0, 0
	}
	return s.db.Size()
}

// Len returns the number of pods remembered.
func (s *Store) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.pods)
}

type badgerLogger struct{ log *slog.Logger }

func (l badgerLogger) Errorf(f string, a ...any) {
	l.log.Error("Badger", "detail", strings.TrimSpace(fmt.Sprintf(f, a...)))
}
func (l badgerLogger) Warningf(f string, a ...any) {
	l.log.Warn("Badger", "detail", strings.TrimSpace(fmt.Sprintf(f, a...)))
}
func (l badgerLogger) Infof(f string, a ...any) {
	l.log.Debug("Badger", "detail", strings.TrimSpace(fmt.Sprintf(f, a...)))
}

// Debugf drops badger's per-write tracing, which would drown podslo's own
// debug logs.
func (badgerLogger) Debugf(string, ...any) {}
