package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/podslo/podslo/hack/harness"
)

// errMismatch: the run finished and the exporter's figures disagree with
// the ground truth.
var errMismatch = fmt.Errorf("the exporter's metrics disagree with the ground truth: %w", harness.ErrMismatch)

// maxObservationAge is the exporter's default --max-observation-age: the
// run must end within it, or the oracle would have to model too_old skips.
const maxObservationAge = time.Hour

func run(ctx context.Context, o *Options, log *slog.Logger) (err error) {
	if o.Workdir == "" {
		if o.Workdir, err = os.MkdirTemp("", "podslo-chaos-"); err != nil {
			return err
		}
	} else if err := os.MkdirAll(o.Workdir, 0o755); err != nil {
		return err
	}
	if !o.Keep {
		defer os.RemoveAll(o.Workdir)
	}
	if o.Seed == 0 {
		o.Seed = time.Now().UnixNano()
	}
	log.Info("Chaos run", "workdir", o.Workdir, "seed", o.Seed, "pods", o.Pods, "kills", o.Kills, "outage", o.Outage, "diskFull", o.DiskFull)
	res := &Results{Started: time.Now().UTC(), Machine: harness.DescribeMachine(), Versions: harness.DescribeVersions(ctx, o.Repo, o.Testbin, o.Kwokbin), Options: o, Command: os.Args}
	rng := rand.New(rand.NewPCG(uint64(o.Seed), 2))

	var keepLogs string
	if o.Keep {
		keepLogs = filepath.Join(o.Workdir, "cluster-logs")
	}
	cl := newCluster(o, keepLogs, log)
	defer cl.down()
	if err := cl.Create(ctx); err != nil {
		return err
	}
	log.Info("Cluster up", "kubeconfig", cl.Kubeconfig)
	cfg, err := clientcmd.BuildConfigFromFlags("", cl.Kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 500, 1000
	cfg.Timeout = 30 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	c := &client{cs: cs}
	nodes := (o.Pods + o.PodsPerNode - 1) / o.PodsPerNode
	claimClass, err := c.setUp(ctx, o.Repo, nodes)
	if err != nil {
		return fmt.Errorf("set up the cluster: %w", err)
	}

	etcd, err := cl.etcdClient()
	if err != nil {
		return err
	}
	defer etcd.Close()
	recCtx, stopRec := context.WithCancel(ctx)
	defer stopRec()
	rec := newRecorder(etcd, log)
	if err := rec.start(recCtx); err != nil {
		return err
	}

	fs, err := mountStateFS(o.Workdir, o.StateFSMiB, o.StateFS)
	if err != nil {
		return err
	}
	defer func() {
		if uerr := fs.unmount(); uerr != nil {
			log.Error("Unmounting the state filesystem failed", "err", uerr)
		}
	}()
	sup, err := newSupervisor(o, cl.Kubeconfig, fs.stateDir(), log)
	if err != nil {
		return err
	}
	supCtx, stopSup := context.WithCancel(ctx)
	supDone := make(chan struct{})
	go func() { sup.run(supCtx); close(supDone) }()
	// Stopped before the filesystem is unmounted (defers run last first).
	defer func() { sup.stop(); stopSup(); <-supDone }()
	if err := sup.waitReady(ctx, 2*time.Minute); err != nil {
		return err
	}
	log.Info("Exporter ready", "url", sup.URL)

	d := newDriver(o, c, rec, log, o.Seed)
	workCtx, stopWork := context.WithCancel(ctx)
	defer stopWork()
	d.workers(workCtx, 16)

	// The plan comes first: crash pods created while growing must not
	// lose their sandbox in the outage or on the full disk.
	churnStart := time.Now().Add(time.Duration(float64(o.Pods)/o.CreateRate*float64(time.Second)) + 30*time.Second)
	churnEnd := churnStart.Add(o.Churn)
	f := &faults{o: o, log: log, sup: sup, cl: cl, etcd: etcd, rec: rec, d: d, fs: fs, c: c, plan: planFaults(o, churnStart, rng)}
	res.Plan = f.plan
	d.allowed, d.crashAllowed = f.allowed, f.crashAllowed
	d.stuckUntil = churnEnd.Add(-(o.SandboxTimeout + 20*time.Second))

	log.Info("Growing", "pods", o.Pods, "nodes", nodes)
	grown := time.Now()
	if err := d.grow(ctx); err != nil {
		return err
	}
	res.GrowSeconds = time.Since(grown).Seconds()
	if time.Now().After(churnStart) {
		log.Warn("Growing took longer than planned; the faults start at once", "late", time.Since(churnStart).Round(time.Second))
	}
	if err := sleepUntil(ctx, churnStart); err != nil {
		return err
	}

	log.Info("Churning", "for", o.Churn, "faults", len(f.plan))
	churnCtx, stopChurn := context.WithDeadline(ctx, churnEnd)
	churnDone := make(chan struct{})
	go func() { d.churn(churnCtx); close(churnDone) }()
	ferr := f.run(ctx)
	if ferr == nil {
		<-churnCtx.Done()
	}
	stopChurn()
	<-churnDone
	res.Faults = f
	if ferr != nil {
		return ferr
	}

	log.Info("Settling")
	settled := time.Now()
	end, got, serr := settle(ctx, o, d, rec, sup, log)
	res.SettleSeconds = time.Since(settled).Seconds()
	if serr != nil {
		log.Error("The run did not settle; comparing what there is", "err", serr)
		res.Failures = append(res.Failures, "did not settle: "+serr.Error())
	}
	if got == nil {
		return fmt.Errorf("no scrape of the exporter to compare: %w", serr)
	}
	if end.Sub(res.Started) > maxObservationAge-5*time.Minute {
		res.Failures = append(res.Failures, "the run lasted close to --max-observation-age: too_old skips are not modelled")
	}
	stopWork()
	// After the last scrape: kwok wrote every pod's event before the
	// revision that started its containers, so by now.
	if res.Pulls, err = c.pulledEvents(ctx); err != nil {
		return err
	}

	res.Workload = d.statsCopy()
	res.Instances = sup.instances()
	res.End, res.ClaimClass = end, claimClass
	for uid := range d.userErrors() {
		res.UserErrors = append(res.UserErrors, uid)
	}
	histories := rec.snapshot()
	res.ExporterLog = analyseLogs(sup.logDir)
	judgeRun(res, histories, got)
	res.Finished = time.Now().UTC()
	if werr := res.write(o.Out, o.Markdown); werr != nil {
		return werr
	}
	if o.Keep {
		// What --rejudge needs, to look into a mismatch after the run.
		if err := keepForRejudge(o.Workdir, res, histories, got); err != nil {
			log.Error("Keeping the run for --rejudge failed", "err", err)
		}
	}
	log.Info("Done", "results", o.Out, "report", o.Markdown, "ok", len(res.Failures) == 0)
	if len(res.Failures) > 0 {
		logFailures(log, res)
		return errMismatch
	}
	return nil
}

// logFailures prints what failed with what is needed to look into it: in
// CI the log is all that remains of a run.
func logFailures(log *slog.Logger, res *Results) {
	for _, f := range res.Failures {
		log.Error("Failure", "what", f)
	}
	for _, p := range res.PodCounts {
		log.Error("Pod counted off", "what", p)
	}
	for _, p := range res.PodObservations {
		log.Error("Pod recorded off", "what", p)
	}
	for _, c := range res.Contradictions {
		log.Error("deploy/kwok wrote what a kubelet cannot", "pod", c)
	}
	var outages []outageRecord
	if res.Faults != nil {
		outages = res.Faults.Outages
	}
	for _, l := range describeTimeline(res.Instances, outages) {
		log.Info("Timeline", "what", l)
	}
}

// settle waits until nothing is in flight, every pod is in a state that no
// longer changes (Ready after its crash, if any; stuck past its timeout),
// the recorder has caught up, and two scrapes 5 s apart agree. It returns
// the time of the last scrape and the scrape.
func settle(ctx context.Context, o *Options, d *driver, rec *recorder, sup *supervisor, log *slog.Logger) (time.Time, *exposition, error) {
	deadline := time.Now().Add(o.SettleTimeout)
	logged := time.Now()
	var last *exposition
	var lastAt time.Time
	var why string
	for time.Now().Before(deadline) {
		if err := sleepUntil(ctx, time.Now().Add(2*time.Second)); err != nil {
			return lastAt, last, err
		}
		why = unsettled(o, d, rec, sup)
		if why != "" {
			if time.Since(logged) > 30*time.Second {
				log.Info("Not settled yet", "why", why)
				logged = time.Now()
			}
			continue
		}
		if err := rec.catchUp(ctx); err != nil {
			return lastAt, last, err
		}
		e, err := scrapeMetrics(ctx, sup.URL)
		if err != nil {
			why = err.Error()
			continue
		}
		now := time.Now()
		if last != nil && aggregatesEqual(last, e) && now.Sub(lastAt) >= 5*time.Second && unsettled(o, d, rec, sup) == "" {
			return now, e, nil
		}
		if last == nil || !aggregatesEqual(last, e) {
			last, lastAt = e, now
		}
	}
	if last == nil {
		e, err := scrapeMetrics(ctx, sup.URL)
		if err != nil {
			return time.Now(), nil, fmt.Errorf("%s; scrape: %w", why, err)
		}
		return time.Now(), e, errors.New(why)
	}
	return lastAt, last, fmt.Errorf("after %s: %s", o.SettleTimeout, why)
}

// unsettled says what is still changing, or "" when nothing is.
func unsettled(o *Options, d *driver, rec *recorder, sup *supervisor) string {
	// The churn is over: removed pods only need their slots cleared.
	d.reap(time.Now())
	if d.busy() {
		return "API calls in flight"
	}
	if since := sup.readySince(); since.IsZero() || time.Since(since) < 10*time.Second {
		return "the exporter is not ready, or only just"
	}
	now := time.Now()
	var why string
	rec.view(func(h *history) {
		if why != "" {
			return
		}
		r := h.last()
		name := h.Namespace + "/" + h.Name
		switch {
		case r == nil:
			why = name + " has no status"
		case r.Deletion != 0:
			why = name + " is being deleted"
		case h.Stuck:
			if r.Scheduled.Time == 0 {
				why = name + " is not scheduled"
			} else if due := time.Unix(r.Scheduled.Time, 0).Add(o.SandboxTimeout + 15*time.Second); now.Before(due) {
				why = name + " is not past its sandbox timeout"
			}
		case !r.Ready.isTrue() && r.Sandbox.Status == "" && r.Scheduled.Time != 0 && now.Sub(time.Unix(r.Scheduled.Time, 0)) > time.Minute:
			// kwok keys its stages by name: a stage of an earlier pod of
			// the name, retried through the outage, can replace this
			// pod's own, and kwok then plays none on it.
			why = name + " is not Ready: kwok never admitted it (no PodReadyToStartContainers a minute after its binding)"
		case !r.Ready.isTrue():
			why = name + " is not Ready"
		case h.Crash && r.Restarts == 0:
			why = name + " has not lost its sandbox yet"
		case h.CrashLoop && r.Restarts == 0:
			why = name + " has not restarted its container yet"
		case h.Flap && !h.flapped():
			why = name + " has not flapped yet"
		}
	})
	return why
}

// keepForRejudge writes the results, every pod's history and the final
// scrape into dir.
func keepForRejudge(dir string, res *Results, histories map[types.UID]*history, got *exposition) error {
	for name, v := range map[string]any{"results.json": res, "histories.json": histories} {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	return os.WriteFile(filepath.Join(dir, "final-metrics.txt"), got.Raw, 0o644)
}

// rejudge judges a run kept with --keep again, from its workdir: for work
// on the oracle without a new run.
func rejudge(o *Options, log *slog.Logger) error {
	var res Results
	var histories map[types.UID]*history
	for name, v := range map[string]any{"results.json": &res, "histories.json": &histories} {
		b, err := os.ReadFile(filepath.Join(o.Rejudge, name))
		if err != nil {
			return err
		}
		if err := json.Unmarshal(b, v); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	raw, err := os.ReadFile(filepath.Join(o.Rejudge, "final-metrics.txt"))
	if err != nil {
		return err
	}
	got, err := parseExposition(raw)
	if err != nil {
		return fmt.Errorf("final-metrics.txt: %w", err)
	}
	judgeRun(&res, histories, got)
	if err := res.write(o.Out, o.Markdown); err != nil {
		return err
	}
	log.Info("Judged again", "results", o.Out, "report", o.Markdown, "ok", len(res.Failures) == 0)
	if len(res.Failures) > 0 {
		logFailures(log, &res)
		return errMismatch
	}
	return nil
}
