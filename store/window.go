package store

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Windowed counts: what each series gained in each slot of time, so that a
// reader can say what happened over the last hour or the last 30 days
// without Prometheus (the landing page, `podslo report`). The cumulative
// series cannot: a regression last week hides under months of history.
//
// A slot is FineSlot long for the last FineKeep (the short windows of the
// burn-rate alerts: 5m, 30m, 2h, 6h) and CoarseSlot long beyond, up to
// Options.WindowRetention (the longest SLO window). Each slot of a series is
// a record of its own, written in the same transaction as the series it
// counts into, so a window is exactly as durable as the cumulative series:
// nothing counted twice or lost across a restart. CompactWindows folds the
// fine slots older than FineKeep into their hour and drops the slots older
// than the retention, each in one transaction.
//
// The record is an aggregate record (prefixAggregate, format 2) whose
// family is the series' family followed by "@<slot seconds>/<slot start in
// Unix seconds>": a release that knows no windows reads it as a series of a
// family it does not export, and so starts on a state with windows, rather
// than refusing a record type it does not know. It keeps them as they are.
const (
	FineSlot   = 5 * time.Minute
	CoarseSlot = time.Hour
	FineKeep   = 6 * time.Hour
	// DefaultWindowRetention is the default for Options.WindowRetention:
	// alerts/slos.yaml's SLO window.
	DefaultWindowRetention = 30 * 24 * time.Hour
)

// windowSep separates a series' family from its slot in a window record's
// family. A family ID never holds it (a store family is snake_case, a
// histogram label a Prometheus label name).
const windowSep = "@"

// Slot is one span of time a window record counts.
type Slot struct {
	Start  time.Time
	Length time.Duration
}

// End is when the slot ends.
func (s Slot) End() time.Time { return s.Start.Add(s.Length) }

// SlotCounts is what one series gained within one slot: a histogram's
// events (Count, of which Precise were measured in milliseconds, and the
// classic bucket counts, non-cumulative, the last one +Inf), or a
// counter's increase (Value).
type SlotCounts struct {
	Count, Precise uint64
	Classic        []uint64
	Value          float64
}

// slot is one slot of a series in memory.
type slot struct {
	start  int64 // Unix seconds
	length int32 // seconds
	counts counts
}

// counts are what a slot holds, compactly: a 30-day window is 792 slots of
// each series, and most of a slot's classic buckets are empty.
type counts struct {
	value float64
	// count and precise are a slot's events: far from 2^32 in 5 minutes or
	// an hour.
	count, precise uint32
	histogram      bool
	// buckets are the classic buckets that are not empty, by index.
	buckets []bucketCount
}

type bucketCount struct {
	index uint16
	n     uint32
}

func countsOf(a *Aggregate) counts {
	c := counts{value: a.Value}
	if h := a.Histogram; h != nil {
		c.histogram, c.count, c.precise = true, clamp32(h.Count), clamp32(h.Precise)
		for i, n := range h.Classic {
			if n > 0 {
				c.buckets = append(c.buckets, bucketCount{uint16(i), clamp32(n)})
			}
		}
		c.buckets = slices.Clip(c.buckets)
	}
	return c
}

func clamp32(n uint64) uint32 { return uint32(min(n, math.MaxUint32)) }

// aggregate is c as the record it is written as, under the store's
// bounds (nb of them).
func (c *counts) aggregate(nb int, created int64) *Aggregate {
	a := &Aggregate{Created: created, Value: c.value}
	if c.histogram {
		a.Histogram = &Histogram{Count: uint64(c.count), Precise: uint64(c.precise), Classic: c.dense(make([]uint64, nb+1))}
	}
	return a
}

// dense writes the classic counts into dst, zeroed first.
func (c *counts) dense(dst []uint64) []uint64 {
	clear(dst)
	for _, b := range c.buckets {
		if int(b.index) < len(dst) {
			dst[b.index] += uint64(b.n)
		}
	}
	return dst
}

func (c *counts) addBucket(i int, n uint32) {
	j, found := slices.BinarySearchFunc(c.buckets, uint16(i), func(b bucketCount, i uint16) int { return int(b.index) - int(i) })
	if found {
		c.buckets[j].n += n
		return
	}
	c.buckets = slices.Insert(c.buckets, j, bucketCount{uint16(i), n})
}

func (c *counts) add(o *counts) {
	c.value += o.value
	c.count += o.count
	c.precise += o.precise
	for _, b := range o.buckets {
		c.addBucket(int(b.index), b.n)
	}
}

func (c counts) clone() counts {
	c.buckets = slices.Clone(c.buckets)
	return c
}

// slotSeries are the slots of one series, sorted by start.
type slotSeries struct {
	family string
	labels []string
	slots  []slot
}

func windowFamily(family string, length time.Duration, start int64) string {
	return family + windowSep + strconv.FormatInt(int64(length/time.Second), 10) + "/" + strconv.FormatInt(start, 10)
}

// parseWindowFamily splits a window record's family; ok is false for a
// series' own family.
func parseWindowFamily(f string) (family string, length int32, start int64, ok bool, err error) {
	i := strings.Index(f, windowSep)
	if i < 0 {
		return f, 0, 0, false, nil
	}
	l, s, found := strings.Cut(f[i+1:], "/")
	n, err1 := strconv.ParseInt(l, 10, 32)
	t, err2 := strconv.ParseInt(s, 10, 64)
	if !found || err1 != nil || err2 != nil || n <= 0 {
		return "", 0, 0, true, fmt.Errorf("window record family %q: %w", f, errDecode)
	}
	return f[:i], int32(n), t, true, nil
}

// slotOf is the fine slot an observation made at now counts in.
func slotOf(now time.Time) int64 { return now.Truncate(FineSlot).Unix() }

// loadSlot keeps a window record read at Open. Called with mu held.
func (s *Store) loadSlot(family, labels string, length int32, start int64, agg *Aggregate) {
	if !s.windowed(family) {
		// Counted under a spec that read this family; this one does not.
		// Kept on disk, and dropped once older than the retention by the
		// next start that windows it.
		return
	}
	key := family + "\x00" + labels
	ss, ok := s.windows[key]
	if !ok {
		ss = &slotSeries{family: family, labels: splitLabels(labels)}
		s.windows[key] = ss
	}
	ss.put(slot{start: start, length: length, counts: countsOf(agg)})
}

// windowed tells whether the store keeps the windowed counts of family.
func (s *Store) windowed(family string) bool {
	return s.opts.WindowFamilies == nil || s.opts.WindowFamilies(family)
}

// put inserts or replaces sl, keeping the order.
func (ss *slotSeries) put(sl slot) {
	i, found := slices.BinarySearchFunc(ss.slots, sl, compareSlots)
	if found {
		ss.slots[i] = sl
		return
	}
	ss.slots = slices.Insert(ss.slots, i, sl)
}

func compareSlots(a, b slot) int {
	if a.start != b.start {
		return int(a.start - b.start)
	}
	return int(a.length - b.length)
}

func (ss *slotSeries) find(start int64, length int32) *counts {
	i, found := slices.BinarySearchFunc(ss.slots, slot{start: start, length: length}, compareSlots)
	if !found {
		return nil
	}
	return &ss.slots[i].counts
}

// pendingSlot is a slot record to write with a change, and to keep once
// its transaction committed.
type pendingSlot struct {
	key    string // the series key
	family string
	labels []string
	start  int64
	counts counts
}

// updatedSlots returns the fine slot of now of every series c touches,
// with c applied, as copies (see updatedSeries).
func (s *Store) updatedSlots(c Change, now time.Time) map[string]*pendingSlot {
	if len(c.Observe) == 0 && len(c.Add) == 0 {
		return nil
	}
	start := slotOf(now)
	out := make(map[string]*pendingSlot, len(c.Observe)+len(c.Add))
	get := func(smp Sample, histogram bool) *pendingSlot {
		key := smp.Family + "\x00" + joinLabels(smp.Labels)
		if ps, ok := out[key]; ok {
			return ps
		}
		ps := &pendingSlot{key: key, family: smp.Family, labels: smp.Labels, start: start, counts: counts{histogram: histogram}}
		if ss, ok := s.windows[key]; ok {
			if old := ss.find(start, int32(FineSlot/time.Second)); old != nil {
				ps.counts = old.clone()
			}
		}
		out[key] = ps
		return ps
	}
	for _, smp := range c.Observe {
		if !s.windowed(smp.Family) {
			continue
		}
		sc := &get(smp, true).counts
		sc.count++
		sc.addBucket(sort.SearchFloat64s(s.opts.Buckets, smp.Value), 1)
		if smp.Precise {
			sc.precise++
		}
	}
	for _, smp := range c.Add {
		if s.windowed(smp.Family) {
			get(smp, false).counts.value += smp.Value
		}
	}
	return out
}

func (ps *pendingSlot) recordKey() []byte {
	return aggregateKey(windowFamily(ps.family, FineSlot, ps.start), ps.key[len(ps.family)+1:])
}

// keepSlots makes committed slots visible. Called with mu held.
func (s *Store) keepSlots(slots map[string]*pendingSlot) {
	for key, ps := range slots {
		ss, ok := s.windows[key]
		if !ok {
			ss = &slotSeries{family: ps.family, labels: ps.labels}
			s.windows[key] = ss
		}
		ss.put(slot{start: ps.start, length: int32(FineSlot / time.Second), counts: ps.counts})
	}
}

// Windows calls fn for every slot that ends after since, of every series,
// under a read lock: fn must not call back into the Store nor keep c.
func (s *Store) Windows(since time.Time, fn func(family string, labels []string, sl Slot, c *SlotCounts)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	after := since.Unix()
	var c SlotCounts
	classic := make([]uint64, len(s.opts.Buckets)+1)
	for _, ss := range s.windows {
		for i := range ss.slots {
			sl := &ss.slots[i]
			if sl.start+int64(sl.length) <= after {
				continue
			}
			c = SlotCounts{Value: sl.counts.value}
			if sl.counts.histogram {
				c.Count, c.Precise, c.Classic = uint64(sl.counts.count), uint64(sl.counts.precise), sl.counts.dense(classic)
			}
			fn(ss.family, ss.labels, Slot{Start: time.Unix(sl.start, 0), Length: time.Duration(sl.length) * time.Second}, &c)
		}
	}
}

// CompactWindows folds the fine slots that ended before now-FineKeep into
// their CoarseSlot, and drops the slots that ended before
// now-WindowRetention: one transaction per series, so that a fold is never
// half done (counted twice or lost), and a long downtime's work never makes
// a transaction too big. A failure changes nothing of that series; the next
// run tries again.
// Start runs it every FineSlot; a program that keeps the store's clock
// itself (a benchmark, a simulation) calls it.
func (s *Store) CompactWindows(now time.Time) error {
	if s.closed.Load() {
		return ErrClosed
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() || s.db == nil {
		// Closed meanwhile, or never opened (a full filesystem at Open):
		// nothing to fold.
		return nil
	}
	fineBefore := now.Add(-FineKeep).Unix()
	dropBefore := now.Add(-s.opts.WindowRetention).Unix()
	for key, ss := range s.windows {
		removed, coarse := s.compactSeries(ss, fineBefore, dropBefore)
		if len(removed) == 0 {
			continue
		}
		if err := s.ensureSpace(); err != nil {
			return err
		}
		if err := s.commitCompaction(ss, removed, coarse); err != nil {
			return err
		}
		ss.slots = slices.DeleteFunc(ss.slots, func(sl slot) bool {
			return slices.ContainsFunc(removed, func(r slot) bool { return compareSlots(r, sl) == 0 })
		})
		for _, sl := range coarse {
			ss.put(sl)
		}
		if len(ss.slots) == 0 {
			delete(s.windows, key)
		}
	}
	return nil
}

// compactSeries returns the slots of ss to remove, and the coarse slots,
// new or replaced, that take in the fine ones removed.
func (s *Store) compactSeries(ss *slotSeries, fineBefore, dropBefore int64) (removed, coarse []slot) {
	length := int32(CoarseSlot / time.Second)
	merged := map[int64]*counts{}
	for _, sl := range ss.slots {
		end := sl.start + int64(sl.length)
		switch {
		case end <= dropBefore:
			removed = append(removed, sl)
		case sl.length < length && end <= fineBefore:
			removed = append(removed, sl)
			hour := time.Unix(sl.start, 0).Truncate(CoarseSlot).Unix()
			into, ok := merged[hour]
			if !ok {
				if old := ss.find(hour, length); old != nil {
					c := old.clone()
					into = &c
				} else {
					into = &counts{histogram: sl.counts.histogram}
				}
				merged[hour] = into
			}
			into.add(&sl.counts)
		}
	}
	for hour, c := range merged {
		c.buckets = slices.Clip(c.buckets)
		coarse = append(coarse, slot{start: hour, length: length, counts: *c})
	}
	return removed, coarse
}

func (s *Store) commitCompaction(ss *slotSeries, removed, coarse []slot) error {
	labels := joinLabels(ss.labels)
	txn := s.db.NewTransaction(true)
	defer txn.Discard()
	newLayout := false
	for _, sl := range removed {
		if err := txn.Delete(aggregateKey(windowFamily(ss.family, time.Duration(sl.length)*time.Second, sl.start), labels)); err != nil {
			return fmt.Errorf("drop window slot of %s: %w", ss.family, err)
		}
	}
	for _, sl := range coarse {
		if sl.counts.histogram && s.layouts[s.layout] == nil && !newLayout {
			// Slots loaded under other bounds are rewritten under these.
			if err := txn.Set(layoutKey(s.layout), encodeLayout(s.opts.Buckets)); err != nil {
				return fmt.Errorf("write bucket layout: %w", err)
			}
			newLayout = true
		}
		if err := txn.Set(aggregateKey(windowFamily(ss.family, CoarseSlot, sl.start), labels), encodeAggregate(sl.counts.aggregate(len(s.opts.Buckets), sl.start), s.layout)); err != nil {
			return fmt.Errorf("write window slot of %s: %w", ss.family, err)
		}
	}
	if err := txn.Commit(); err != nil {
		return fmt.Errorf("compact the windows of %s: %w", ss.family, err)
	}
	if newLayout {
		s.layouts[s.layout] = s.opts.Buckets
	}
	return nil
}
