package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

type faultKind string

const (
	faultKill       faultKind = "kill"
	faultOutage     faultKind = "outage"
	faultDiskFull   faultKind = "disk-full"
	faultCompaction faultKind = "compaction"
)

// fault is one planned fault.
type fault struct {
	Kind faultKind     `json:"kind"`
	At   time.Time     `json:"at"`
	Down time.Duration `json:"down,omitempty"` // a kill's down time
}

// planFaults places the faults at random, without overlap, within the
// churn [start, start+churn), each with the room it needs.
func planFaults(o *Options, start time.Time, rng *rand.Rand) []fault {
	type item struct {
		f     fault
		width time.Duration
	}
	var items []item
	for range o.Kills {
		down := time.Second + time.Duration(rng.Int64N(int64(o.MaxDown-time.Second)+1))
		items = append(items, item{fault{Kind: faultKill, Down: down}, pauseBefore + down + killRoom})
	}
	if o.Outage > 0 {
		items = append(items, item{fault{Kind: faultOutage}, pauseBefore + o.Outage + o.outageRoom()})
	}
	if o.DiskFull > 0 {
		items = append(items, item{fault{Kind: faultDiskFull}, pauseBefore + o.DiskFull + diskFullRoom})
	}
	rng.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
	var used time.Duration
	for _, it := range items {
		used += it.width
	}
	free := max(o.Churn-used, 0)
	weights := make([]float64, len(items)+1)
	var total float64
	for i := range weights {
		weights[i] = rng.Float64()
		total += weights[i]
	}
	var out []fault
	at := start
	for i, it := range items {
		at = at.Add(time.Duration(float64(free) * weights[i] / total))
		it.f.At = at.Add(pauseBefore)
		out = append(out, it.f)
		at = at.Add(it.width)
	}
	// Compactions beyond the one in the outage: instants anywhere.
	extra := o.Compactions
	if o.Outage > 0 && extra > 0 {
		extra--
	}
	for range extra {
		out = append(out, fault{Kind: faultCompaction, At: start.Add(time.Duration(rng.Int64N(int64(o.Churn - 30*time.Second))))})
	}
	slices.SortFunc(out, func(a, b fault) int { return a.At.Compare(b.At) })
	return out
}

// Records of what the faults did, for the report.
type killRecord struct {
	At       time.Time     `json:"at"`
	Down     time.Duration `json:"down"`
	Instance int           `json:"instance"` // the process killed
}

type compactionRecord struct {
	At           time.Time `json:"at"`
	Revision     int64     `json:"revision"`
	DuringOutage bool      `json:"duringOutage"`
}

type diskFullRecord struct {
	Start       time.Time `json:"start"`
	FillerBytes int64     `json:"fillerBytes"`
	Freed       time.Time `json:"freed"`
}

// faults runs the plan and tells the driver when a graceful deletion may
// start: never within pauseBefore of a fault, so that every termination
// in flight completes while the exporter still watches, and otherwise only
// while the exporter surely watches, or surely does not (down after a kill,
// for longer than pauseBefore yet).
type faults struct {
	o    *Options
	log  *slog.Logger
	sup  *supervisor
	cl   *cluster
	etcd *clientv3.Client
	rec  *recorder
	d    *driver
	fs   *stateFS
	c    *client
	plan []fault

	mu          sync.Mutex
	pausing     bool
	Kills       []killRecord       `json:"kills"`
	Outages     []outageRecord     `json:"outages"`
	Compactions []compactionRecord `json:"compactions"`
	DiskFull    []diskFullRecord   `json:"diskFull"`
	// Replaced are the pods force-deleted and created again under the same
	// name while the exporter's watch was down.
	Replaced int `json:"replaced"`
}

func (f *faults) allowed(now time.Time) bool {
	f.mu.Lock()
	pausing := f.pausing
	f.mu.Unlock()
	if pausing {
		return false
	}
	for _, p := range f.plan {
		if p.Kind != faultCompaction && now.Before(p.At) && !now.Before(p.At.Add(-pauseBefore)) {
			return false
		}
	}
	return f.sup.ready() || f.sup.downBeyond(now.Add(pauseBefore))
}

// crashAllowed keeps crash pods' sandbox losses (MinLife after Ready, which
// comes within about 30 s of creation) away from the outage and the full
// disk, where the exporter may be blind for longer than MinLife.
func (f *faults) crashAllowed(now time.Time) bool {
	for _, p := range f.plan {
		var length time.Duration
		switch p.Kind {
		case faultOutage:
			length = f.o.Outage + time.Minute
		case faultDiskFull:
			length = f.o.DiskFull + time.Minute
		default:
			continue
		}
		crash := now.Add(f.o.MinLife)
		if crash.After(p.At.Add(-45*time.Second)) && crash.Before(p.At.Add(length)) {
			return false
		}
	}
	return true
}

func (f *faults) setPausing(v bool) {
	f.mu.Lock()
	f.pausing = v
	f.mu.Unlock()
}

// run executes the plan; it returns when the plan is done or ctx ends.
func (f *faults) run(ctx context.Context) error {
	for _, p := range f.plan {
		if p.Kind != faultCompaction {
			if err := sleepUntil(ctx, p.At.Add(-pauseBefore)); err != nil {
				return err
			}
			f.setPausing(true)
			if p.Kind == faultOutage {
				// Fresh stuck pods, for the exporter to know before its
				// watch breaks; the outage replaces them.
				f.d.createStuck(ctx)
			}
		}
		if err := sleepUntil(ctx, p.At); err != nil {
			return err
		}
		var err error
		switch p.Kind {
		case faultKill:
			err = f.kill(p)
		case faultOutage:
			err = f.outage(ctx)
		case faultDiskFull:
			err = f.diskFull(ctx)
		case faultCompaction:
			err = f.compact(ctx, false)
		}
		f.setPausing(false)
		if err != nil {
			return fmt.Errorf("%s at %s: %w", p.Kind, p.At.Format(time.TimeOnly), err)
		}
	}
	return nil
}

func (f *faults) kill(p fault) error {
	in, err := f.sup.kill(p.Down)
	if err != nil {
		// The exporter is down by itself (a crash loop): nothing to kill.
		f.log.Warn("Kill skipped", "err", err)
		return nil
	}
	f.log.Info("Killed the exporter", "instance", in.N, "down", p.Down)
	f.mu.Lock()
	f.Kills = append(f.Kills, killRecord{At: in.Exit, Down: p.Down, Instance: in.N})
	f.mu.Unlock()
	return nil
}

func (f *faults) compact(ctx context.Context, duringOutage bool) error {
	if err := f.rec.catchUp(ctx); err != nil {
		return err
	}
	rev, err := f.rec.position()
	if err != nil {
		return err
	}
	if err := compact(ctx, f.etcd, rev); err != nil {
		return err
	}
	f.log.Info("Compacted etcd", "revision", rev, "duringOutage", duringOutage)
	f.mu.Lock()
	f.Compactions = append(f.Compactions, compactionRecord{At: time.Now(), Revision: rev, DuringOutage: duringOutage})
	f.mu.Unlock()
	return nil
}

// outage stops kube-apiserver, compacts etcd meanwhile (every watch then
// resumes from a compacted resource version), starts it again, replaces
// some pods under the same names before the exporter can relist, and waits
// until the exporter handles pod events again.
func (f *faults) outage(ctx context.Context) error {
	stopping := time.Now()
	img, err := f.cl.stopAPIServer()
	if err != nil {
		return err
	}
	rec := outageRecord{Stopping: stopping, Stop: time.Now()}
	f.log.Info("Stopped kube-apiserver", "for", f.o.Outage)
	// The newest resource version any watcher can hold: nothing writes
	// while kube-apiserver is down.
	if err := f.rec.catchUp(ctx); err != nil {
		return err
	}
	lastRV, _ := f.rec.position()
	if f.o.Compactions > 0 {
		if err := f.compact(ctx, true); err != nil {
			return err
		}
	}
	if err := sleepUntil(ctx, rec.Stop.Add(f.o.Outage)); err != nil {
		return err
	}
	before, _ := scrapeMetrics(ctx, f.sup.URL)
	if err := f.cl.startAPIServer(img); err != nil {
		return err
	}
	if err := f.cl.WaitReady(ctx, 3*time.Minute); err != nil {
		return fmt.Errorf("kube-apiserver did not come back: %w", err)
	}
	rec.APIReady = time.Now()
	f.log.Info("kube-apiserver is back", "after", rec.APIReady.Sub(rec.Stop).Round(time.Millisecond))
	replaced := f.d.forceReplace(ctx, replacedDuringOutage(f.o))
	rec.StaleWatch = f.c.watchFrom(ctx, lastRV)
	f.mu.Lock()
	f.Replaced += len(replaced)
	f.mu.Unlock()
	// The exporter watches again once it handled a pod event after the
	// API server came back: a relist, or a watch resumed.
	deadline := time.Now().Add(3 * time.Minute)
	for rec.WatchBack.IsZero() {
		if err := sleepUntil(ctx, time.Now().Add(500*time.Millisecond)); err != nil {
			return err
		}
		after, err := scrapeMetrics(ctx, f.sup.URL)
		if err == nil && before != nil && after.PodEvents > before.PodEvents {
			rec.WatchBack = time.Now()
		}
		if time.Now().After(deadline) {
			f.log.Error("The exporter handled no pod event within 3 minutes of the API server's return")
			break
		}
	}
	if !rec.WatchBack.IsZero() {
		if err := sleepUntil(ctx, rec.WatchBack.Add(5*time.Second)); err != nil {
			return err
		}
		if after, err := scrapeMetrics(ctx, f.sup.URL); err == nil && before != nil {
			rec.EventsAtReturn = after.PodEvents - before.PodEvents
		}
		f.rec.view(func(*history) { rec.LivePods++ })
	}
	// When the exporter said so: it must not be silent while it watches
	// nothing (issue 26).
	// Looked for from when the stop began: the exporter's watches fail,
	// and it says so, while kube-apiserver shuts down.
	rec.Unreachable = f.sup.firstLog(rec.Stopping, "API server unreachable")
	rec.Reachable = f.sup.firstLog(rec.Stopping, "API server reachable again")
	f.log.Info("The exporter watches pods again", "afterAPI", rec.WatchBack.Sub(rec.APIReady).Round(time.Millisecond),
		"replaced", len(replaced), "staleWatch", rec.StaleWatch, "eventsAtReturn", rec.EventsAtReturn, "livePods", rec.LivePods,
		"unreachableLogged", !rec.Unreachable.IsZero(), "reachableLogged", !rec.Reachable.IsZero())
	f.mu.Lock()
	f.Outages = append(f.Outages, rec)
	f.mu.Unlock()
	return nil
}

// diskFull fills the state filesystem, keeps it full for DiskFull, and
// frees it. Deletions pause for the first seconds: an exporter that dies of
// the full disk dies at its next write, and a termination in flight then
// could not be judged.
func (f *faults) diskFull(ctx context.Context) error {
	rec := diskFullRecord{Start: time.Now()}
	n, err := f.fs.fill()
	rec.FillerBytes = n
	if err != nil {
		return err
	}
	f.log.Info("State filesystem full", "filler", n, "available", f.fs.available())
	if err := sleepUntil(ctx, rec.Start.Add(min(5*time.Second, f.o.DiskFull))); err != nil {
		return err
	}
	f.setPausing(false)
	if err := sleepUntil(ctx, rec.Start.Add(f.o.DiskFull)); err != nil {
		return err
	}
	if err := f.fs.free(); err != nil {
		return err
	}
	rec.Freed = time.Now()
	f.log.Info("State filesystem freed", "available", f.fs.available())
	f.mu.Lock()
	f.DiskFull = append(f.DiskFull, rec)
	f.mu.Unlock()
	return nil
}

func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
