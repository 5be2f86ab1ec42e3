package main

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"
)

// slot is one pod name: its current pod, and what the driver plans for it.
type slot struct {
	idx     int
	uid     types.UID
	kind    podKind
	created time.Time // when the current pod was created
	// deleteAt is when a stuck pod is to be deleted.
	deleteAt time.Time
	creating bool
	deleting bool
	// recreateAt is when an empty slot gets a new pod of the same name.
	recreateAt time.Time
}

// driverStats counts what the driver did.
type driverStats struct {
	Created   int `json:"created"`
	Crash     int `json:"crash"`
	Stuck     int `json:"stuck"`
	UserError int `json:"userError"`
	Init      int `json:"init"`
	Multi     int `json:"multi"`
	// PullsFailed counts the pods given a Failed image event.
	PullsFailed   int `json:"pullsFailed"`
	CrashLoop     int `json:"crashLoop"`
	Flap          int `json:"flap"`
	Deleted       int `json:"deleted"`
	ForceDeleted  int `json:"forceDeleted"`
	SameNameAgain int `json:"sameNameAgain"` // pods created under a name used before
	CreateErrors  int `json:"createErrors"`
	DeleteErrors  int `json:"deleteErrors"`
}

// driver keeps Pods pods alive and churns them: it deletes pods that have
// been Ready long enough (and stuck pods on their schedule) and re-creates
// every removed pod under the same name.
type driver struct {
	o   *Options
	c   *client
	rec *recorder
	log *slog.Logger
	// allowed says whether a graceful deletion may start now (faults.go).
	allowed func(time.Time) bool
	// crashAllowed says whether a pod created now may be a crash pod: its
	// crash must not fall where the exporter may be blind for long.
	crashAllowed func(time.Time) bool
	// stuckUntil: no stuck pods are created after it, so that every stuck
	// pod is past its timeout when the run compares.
	stuckUntil time.Time

	mu        sync.Mutex
	rng       *rand.Rand
	slots     []*slot
	spare     []*slot
	userError map[types.UID]bool
	stats     driverStats
	churning  bool
	jobs      chan func(context.Context)
	wg        sync.WaitGroup
}

func newDriver(o *Options, c *client, rec *recorder, log *slog.Logger, seed int64) *driver {
	d := &driver{o: o, c: c, rec: rec, log: log, rng: rand.New(rand.NewPCG(uint64(seed), 1)),
		userError: map[types.UID]bool{}, jobs: make(chan func(context.Context), 1024),
		allowed: func(time.Time) bool { return true }, crashAllowed: func(time.Time) bool { return true }}
	for i := range o.Pods {
		d.slots = append(d.slots, &slot{idx: i})
	}
	if o.Outage > 0 {
		// Spare names for the stuck pods made just before the outage.
		for i := range replacedDuringOutage(o) / 2 {
			s := &slot{idx: o.Pods + i}
			d.slots = append(d.slots, s)
			d.spare = append(d.spare, s)
		}
	}
	return d
}

// replacedDuringOutage is how many pods are replaced under their names
// while the exporter's watch is down.
func replacedDuringOutage(o *Options) int { return max(2, min(20, o.Pods/20)) }

// createStuck creates a stuck pod (half of them user errors) in each spare
// slot and waits until they are all created: fresh pods whose timeout
// falls after the outage.
func (d *driver) createStuck(ctx context.Context) {
	d.mu.Lock()
	for i, s := range d.spare {
		if s.uid != "" || s.creating {
			continue
		}
		k := podKind{RuntimeClass: []string{"runc", "kata", ""}[i%3], Stuck: true, UserError: i%2 == 1}
		d.createKind(s, k, time.Now())
		// Never deleted by the churn: the outage replaces them.
		s.deleteAt = time.Time{}
	}
	d.mu.Unlock()
	for ctx.Err() == nil {
		d.mu.Lock()
		done := true
		for _, s := range d.spare {
			done = done && !s.creating
		}
		d.mu.Unlock()
		if done {
			return
		}
		_ = sleepUntil(ctx, time.Now().Add(100*time.Millisecond))
	}
}

// workers runs the API calls; they end when ctx ends.
func (d *driver) workers(ctx context.Context, n int) {
	for range n {
		d.wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case job := <-d.jobs:
					job(ctx)
				}
			}
		})
	}
}

// drawKind picks a new pod's kind; d.mu is held.
func (d *driver) drawKind(now time.Time) podKind {
	var k podKind
	switch x := d.rng.Float64(); {
	case x < 0.5:
		k.RuntimeClass = "runc"
	case x < 0.75:
		k.RuntimeClass = "kata"
	}
	switch x := d.rng.Float64(); {
	case x < 0.05:
		k.Claims = []string{"standard", fastClass}
	case x < 0.25:
		k.Claims = []string{"standard"}
	}
	k.Init = d.rng.Float64() < 0.1
	k.Multi = d.rng.Float64() < 0.1
	switch x := d.rng.Float64(); {
	case x < 0.03 && now.Before(d.stuckUntil):
		k.Stuck = true
		k.UserError = x < 0.015
	case x < 0.13 && d.crashAllowed(now):
		k.Crash = true
	case x >= 0.13 && x < 0.18 && d.crashAllowed(now):
		// Its exit and restart, MinLife after its start, kept away from
		// the faults as a sandbox crash is.
		k.CrashLoop = true
	case x >= 0.18 && x < 0.23 && d.crashAllowed(now):
		k.Flap = true
	}
	return k
}

// create starts creating a new pod of a drawn kind in slot s; d.mu is held.
func (d *driver) create(s *slot, now time.Time) { d.createKind(s, d.drawKind(now), now) }

// createKind starts creating the pod of slot s; d.mu is held.
func (d *driver) createKind(s *slot, k podKind, now time.Time) {
	s.creating, s.kind, s.recreateAt = true, k, time.Time{}
	if !s.created.IsZero() {
		d.stats.SameNameAgain++
	}
	timeout := d.o.SandboxTimeout
	if k.Stuck {
		// Deleted well before the timeout, or well after it, never near
		// it: the timeout check runs every 5 s.
		if early := timeout - 20*time.Second; early > d.o.MinLife && d.rng.IntN(2) == 0 {
			s.deleteAt = now.Add(d.o.MinLife + time.Duration(d.rng.Int64N(int64(early-d.o.MinLife))))
		} else {
			s.deleteAt = now.Add(timeout + 30*time.Second + time.Duration(d.rng.Int64N(int64(time.Minute))))
		}
	} else {
		s.deleteAt = time.Time{}
	}
	pod := newPod(s.idx, k, d.o.MinLife)
	if (k.Init || k.Multi) && !k.Stuck {
		// A stuck pod never gets its sandbox, which comes before the
		// pulls.
		k.Pulls = planPulls(d.rng, pod)
		pod.Annotations[annotationPulls] = pullsAnnotation(k.Pulls)
		if names := backoffAnnotation(k.Pulls); names != "" {
			pod.Annotations[annotationBackoff] = names
		}
		if k.Init {
			// Each init container runs 0 to 2 s.
			pod.Annotations[annotationInitRun] = strconv.Itoa(d.rng.IntN(3)) + "," + strconv.Itoa(d.rng.IntN(3))
		}
		s.kind = k
	}
	nodes := (d.o.Pods + d.o.PodsPerNode - 1) / d.o.PodsPerNode
	node := nodeName(s.idx / d.o.PodsPerNode % nodes)
	d.jobs <- func(ctx context.Context) {
		uid, err := d.c.createPod(ctx, pod, node, k)
		d.mu.Lock()
		defer d.mu.Unlock()
		s.creating = false
		if uid != "" {
			s.uid, s.created = uid, time.Now()
			d.stats.Created++
			switch {
			case k.Crash:
				d.stats.Crash++
			case k.Stuck:
				d.stats.Stuck++
			}
			if k.Init {
				d.stats.Init++
			}
			if k.Multi {
				d.stats.Multi++
			}
			if slices.ContainsFunc(k.Pulls, func(pl plannedPull) bool { return pl.FailFirst }) {
				d.stats.PullsFailed++
			}
			if k.CrashLoop {
				d.stats.CrashLoop++
			}
			if k.Flap {
				d.stats.Flap++
			}
		}
		if err != nil {
			d.stats.CreateErrors++
			if ctx.Err() == nil {
				d.log.Error("Creating a pod failed", "pod", pod.Namespace+"/"+pod.Name, "err", err)
			}
			return
		}
		if k.UserError {
			d.userError[uid] = true
			d.stats.UserError++
		}
	}
}

// remove starts deleting the pod of slot s; d.mu is held.
func (d *driver) remove(s *slot, grace int64) {
	s.deleting = true
	ns, name, uid := podNamespace(s.idx), podName(s.idx), s.uid
	d.jobs <- func(ctx context.Context) {
		err := d.c.deletePod(ctx, ns, name, uid, grace)
		d.mu.Lock()
		defer d.mu.Unlock()
		if err != nil {
			d.stats.DeleteErrors++
			s.deleting = false
			if ctx.Err() == nil {
				d.log.Error("Deleting a pod failed", "pod", ns+"/"+name, "err", err)
			}
			return
		}
		d.stats.Deleted++
		if grace == 0 {
			d.stats.ForceDeleted++
		}
	}
}

// grace draws a deletion's grace period: mostly graceful, some forced (0:
// the pod vanishes without a termination), some shorter than kata's 3 s
// termination (over grace).
func (d *driver) grace() int64 {
	return []int64{0, 1, 1, 2, 5, 5, 30, 30, 30, 30}[d.rng.IntN(10)]
}

// grow creates the first Pods pods at CreateRate.
func (d *driver) grow(ctx context.Context) error {
	lim := rate.NewLimiter(rate.Limit(d.o.CreateRate), 1)
	for i := range d.o.Pods {
		if err := lim.Wait(ctx); err != nil {
			return err
		}
		d.mu.Lock()
		d.create(d.slots[i], time.Now())
		d.mu.Unlock()
	}
	return nil
}

// churn deletes and re-creates pods until ctx ends.
func (d *driver) churn(ctx context.Context) {
	d.mu.Lock()
	d.churning = true
	d.mu.Unlock()
	lim := rate.NewLimiter(rate.Limit(d.o.ChurnRate), 1)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var eligible []*slot
	var scanned time.Time
	for {
		select {
		case <-ctx.Done():
			d.mu.Lock()
			d.churning = false
			d.mu.Unlock()
			return
		case <-tick.C:
		}
		now := time.Now()
		d.reap(now)
		d.mu.Lock()
		// Re-create emptied slots.
		for _, s := range d.slots {
			if s.uid == "" && !s.creating && !s.recreateAt.IsZero() && !now.Before(s.recreateAt) {
				d.create(s, now)
			}
		}
		d.mu.Unlock()
		if !d.allowed(now) {
			continue
		}
		if now.Sub(scanned) > time.Second {
			eligible, scanned = d.eligible(now), now
		}
		d.mu.Lock()
		// Stuck pods on their schedule, never near their timeout.
		for _, s := range d.slots {
			if !s.kind.Stuck || s.uid == "" || s.deleting || s.deleteAt.IsZero() || now.Before(s.deleteAt) {
				continue
			}
			if age := now.Sub(s.created); age > d.o.SandboxTimeout-15*time.Second && age < d.o.SandboxTimeout+25*time.Second {
				s.deleteAt = s.created.Add(d.o.SandboxTimeout + 26*time.Second)
				continue
			}
			d.remove(s, d.grace())
		}
		for len(eligible) > 0 && lim.AllowN(now, 1) {
			j := d.rng.IntN(len(eligible))
			s := eligible[j]
			eligible[j] = eligible[len(eligible)-1]
			eligible = eligible[:len(eligible)-1]
			if s.deleting || s.creating || s.uid == "" {
				continue
			}
			d.remove(s, d.grace())
		}
		d.mu.Unlock()
	}
}

// reap notices removed pods and plans their slots' re-creation.
func (d *driver) reap(now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.slots {
		if s.uid == "" || !s.deleting {
			continue
		}
		if uid, ok := d.rec.uidAt(podNamespace(s.idx), podName(s.idx)); ok && uid == s.uid {
			continue
		}
		s.uid, s.deleting = "", false
		if d.churning {
			s.recreateAt = now.Add(time.Duration(d.rng.Int64N(int64(3 * time.Second))))
		}
	}
}

// eligible lists the slots whose pod may be deleted now: Ready for at least
// MinLife (a crash pod only after its sandbox came back, a crash-looping
// one after its restart, a flapping one after its flap), so that every
// state the SLIs read outlasts the exporter's blind spells.
func (d *driver) eligible(now time.Time) []*slot {
	ok := map[types.UID]bool{}
	minReady := now.Add(-d.o.MinLife).Unix()
	d.rec.view(func(h *history) {
		r := h.last()
		if r == nil || h.Stuck || r.Deletion != 0 || !r.Ready.isTrue() || r.Ready.Time > minReady {
			return
		}
		if (h.Crash || h.CrashLoop) && r.Restarts == 0 {
			return
		}
		if h.Flap && !h.flapped() {
			return
		}
		ok[h.UID] = true
	})
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []*slot
	for _, s := range d.slots {
		if s.uid != "" && ok[s.uid] && !s.deleting && !s.creating {
			out = append(out, s)
		}
	}
	return out
}

// forceReplace deletes up to n pods at once with grace 0 and creates each
// name again right away: run while the exporter's watch is down, the
// relist finds known names under new UIDs. Half are Ready pods, half young
// stuck ones (whose timeout must not be counted).
func (d *driver) forceReplace(ctx context.Context, n int) []*slot {
	d.mu.Lock()
	var ready, stuck []*slot
	live := map[types.UID]bool{}
	minReady := time.Now().Add(-d.o.MinLife).Unix()
	d.mu.Unlock()
	d.rec.view(func(h *history) {
		r := h.last()
		if r != nil && r.Deletion == 0 && (h.Stuck || (r.Ready.isTrue() && r.Ready.Time <= minReady && (!h.Crash || r.Restarts > 0))) {
			live[h.UID] = true
		}
	})
	d.mu.Lock()
	for _, s := range d.slots {
		if s.uid == "" || s.deleting || s.creating || !live[s.uid] {
			continue
		}
		if s.kind.Stuck {
			stuck = append(stuck, s)
		} else {
			ready = append(ready, s)
		}
	}
	// The youngest stuck pods: the exporter must relist long before their
	// timeout, which must then not be counted.
	slices.SortFunc(stuck, func(a, b *slot) int { return b.created.Compare(a.created) })
	stuck = stuck[:min(len(stuck), n)]
	d.rng.Shuffle(len(ready), func(i, j int) { ready[i], ready[j] = ready[j], ready[i] })
	picked := stuck[:min(len(stuck), n/2+n%2)]
	picked = append(slices.Clone(picked), ready[:min(len(ready), n-len(picked))]...)
	for _, s := range picked {
		s.deleting = true
	}
	d.mu.Unlock()
	var done []*slot
	for _, s := range picked {
		ns, name := podNamespace(s.idx), podName(s.idx)
		if err := d.c.deletePod(ctx, ns, name, s.uid, 0); err != nil {
			d.log.Error("Force-deleting a pod failed", "pod", ns+"/"+name, "err", err)
			continue
		}
		done = append(done, s)
		d.mu.Lock()
		d.stats.Deleted++
		d.stats.ForceDeleted++
		s.uid, s.deleting = "", false
		d.create(s, time.Now())
		d.mu.Unlock()
	}
	return done
}

// uidsOf returns the UIDs of the slots' current pods, once created.
func (d *driver) uidsOf(slots []*slot) []types.UID {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []types.UID
	for _, s := range slots {
		if s.uid != "" {
			out = append(out, s.uid)
		}
	}
	return out
}

// userErrors returns the pods given a FailedMount event.
func (d *driver) userErrors() map[types.UID]bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[types.UID]bool, len(d.userError))
	for k, v := range d.userError {
		out[k] = v
	}
	return out
}

func (d *driver) statsCopy() driverStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.stats
}

// busy reports whether any create or delete is still in flight.
func (d *driver) busy() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, s := range d.slots {
		if s.creating || s.deleting {
			return true
		}
	}
	return false
}

// flapped reports whether the pod was Ready, then not, at some point.
func (h *history) flapped() bool {
	ready := false
	for _, r := range h.Revs {
		switch {
		case r.Ready.isTrue():
			ready = true
		case ready:
			return true
		}
	}
	return false
}
