package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	eventrecord "k8s.io/client-go/tools/record"

	"github.com/podslo/podslo/agent/probe"
	"github.com/podslo/podslo/conditions"
)

// Reasons of the readiness-gate condition.
const (
	ReasonProbeSucceeded = "ProbeSucceeded"
	ReasonProbeFailed    = "ProbeFailed"
	ReasonProbeTimeout   = "ProbeTimeout"
	ReasonInvalidProbe   = "InvalidProbe"
	// reasonWorkerLimit is the Event reason for a pod left unprobed because
	// the agent runs --max-probe-workers already.
	reasonWorkerLimit = "ProbeWorkerLimit"
)

const (
	// writeTimeout bounds one PATCH: a worker does not probe while it
	// writes, and an API server that hangs must not freeze its pod's gate.
	writeTimeout = 10 * time.Second
	// writeRetry spaces the retries of a failed write. Without it a 100 ms
	// probe would PATCH ten times a second into an API server outage.
	writeRetry = time.Second
	// maxMessage bounds the condition message: a probe error can quote a
	// response, and a pod's status is written back on every update.
	maxMessage = 1024
)

// probeWorkers runs the readiness probes of one node's pods, one worker
// goroutine per pod whose annotation asks for one, and writes each result
// that flips the gate condition. The probing itself is package probe's.
type probeWorkers struct {
	node       string
	client     kubernetes.Interface
	owner      conditions.Owner
	condType   corev1.PodConditionType
	minPeriod  time.Duration
	maxWorkers int
	probes     *probe.Prober
	events     eventrecord.EventRecorder
	log        *slog.Logger
	m          *probeMetrics
	pods       cache.Indexer
	// started is when the agent started: a worker that starts within one
	// period of it waits a random part of the period first, as the
	// kubelet's do, so that an agent restart does not probe every pod of the
	// node in the same instant.
	started time.Time

	// ctx is the agent's: workers live until it ends or their pod changes.
	ctx context.Context
	wg  sync.WaitGroup

	mu sync.Mutex
	// workers is keyed like the informer's store.
	workers map[string]*probeWorker
	// reported remembers, per pod key, the invalid annotation already
	// reported, so that an Event and a write happen once per bad value.
	reported map[string]reportedProbe
	// waiting are pods left unprobed for lack of a free worker; the next
	// worker that stops takes one of them.
	waiting map[string]struct{}
}

type reportedProbe struct {
	uid        types.UID
	annotation string
	err        string
}

// probeWorker is one pod's probe loop. Its identity says when it must be
// replaced: a new pod under the name, a new annotation, a restarted
// container or a new pod IP.
type probeWorker struct {
	uid         types.UID
	annotation  string
	containerID string
	target      probe.Target
	probe       *probe.Probe
	startedAt   time.Time
	// written is the gate condition as last seen on the API server or
	// written by this worker; nil when the pod has none.
	written *corev1.PodCondition
	cancel  context.CancelFunc
	done    chan struct{}
}

func (w *probeWorker) same(o *probeWorker) bool {
	return w.uid == o.uid && w.annotation == o.annotation && w.containerID == o.containerID && w.target == o.target
}

// observe is the informer's handler: it decides, from the pod alone, which
// worker the pod needs, and starts or stops workers to match. It never calls
// the API server itself.
func (p *probeWorkers) observe(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		p.forget(tomb.Key)
		return
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	key, err := cache.MetaNamespaceKeyFunc(pod)
	if err != nil {
		p.log.Error("Ignoring a pod event without a key", "err", err)
		return
	}
	want, invalid := p.plan(pod)

	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ctx == nil || p.ctx.Err() != nil {
		return
	}
	if cur := p.workers[key]; cur != nil {
		if want != nil && cur.same(want) {
			return
		}
		p.stopLocked(key)
	}
	if invalid != nil {
		p.reportLocked(key, pod, invalid)
		return
	}
	// A fixed annotation that breaks again the same way is reported again.
	delete(p.reported, key)
	if want == nil {
		delete(p.waiting, key)
		return
	}
	if len(p.workers) >= p.maxWorkers {
		if _, ok := p.waiting[key]; !ok {
			p.waiting[key] = struct{}{}
			p.log.Warn("Not probing a pod: every probe worker is busy", "pod", key, "maxProbeWorkers", p.maxWorkers)
			p.events.Eventf(pod, corev1.EventTypeWarning, reasonWorkerLimit,
				"Not probed: the podslo agent of node %s runs its maximum of %d probe workers", p.node, p.maxWorkers)
		}
		return
	}
	delete(p.waiting, key)
	p.startLocked(key, want)
}

// plan returns the worker the pod needs now, or the error that makes its
// probe invalid, or neither when nothing is to be probed yet.
func (p *probeWorkers) plan(pod *corev1.Pod) (*probeWorker, error) {
	annotation, ok := pod.Annotations[probe.Annotation]
	if !ok {
		return nil, nil
	}
	pr, err := probe.Parse(annotation, p.minPeriod)
	if err != nil {
		return nil, err
	}
	target, err := pr.Target(pod)
	if errors.Is(err, probe.ErrNoPodIP) {
		// Not an error of the pod's: the kubelet has not started it yet.
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	w := &probeWorker{uid: pod.UID, annotation: annotation, target: target, probe: pr}
	running := false
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == target.Container && cs.State.Running != nil {
			running = true
			w.containerID = cs.ContainerID
			w.startedAt = cs.State.Running.StartedAt.Time
		}
	}
	if !running {
		return nil, nil
	}
	if cond, ok := conditions.GetPod(pod.Status.Conditions, p.condType); ok {
		w.written = &cond
	}
	return w, nil
}

func (p *probeWorkers) startLocked(key string, w *probeWorker) {
	ctx, cancel := context.WithCancel(p.ctx)
	w.cancel, w.done = cancel, make(chan struct{})
	p.workers[key] = w
	p.m.workers.Set(float64(len(p.workers)))
	p.log.Debug("Probe worker started", "pod", key, "probeType", w.probe.Type, "target", fmt.Sprintf("%s:%d", w.target.Host, w.target.Port),
		"period", w.probe.Period, "timeout", w.probe.Timeout, "initialDelay", w.probe.InitialDelay)
	p.wg.Go(func() {
		defer close(w.done)
		p.run(ctx, key, w)
	})
}

// stopLocked cancels the pod's worker without waiting for it: a worker in
// the middle of a write finishes it, and the write is refused if the pod is
// gone.
func (p *probeWorkers) stopLocked(key string) {
	w := p.workers[key]
	if w == nil {
		return
	}
	w.cancel()
	delete(p.workers, key)
	p.m.workers.Set(float64(len(p.workers)))
	p.log.Debug("Probe worker stopped", "pod", key)
	// The waiting pod stays in waiting until it starts, so that its Event
	// is not repeated should another pod take the slot first.
	for next := range p.waiting {
		if obj, ok, _ := p.pods.GetByKey(next); ok {
			// observe takes the lock itself.
			p.wg.Go(func() { p.observe(obj) })
		}
		break
	}
}

func (p *probeWorkers) forget(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopLocked(key)
	delete(p.reported, key)
	delete(p.waiting, key)
}

func (p *probeWorkers) deleted(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	p.forget(key)
}

// reportLocked tells the pod's owner, once per bad annotation value, why
// its probe does not run: an Event with the exact field errors, and the
// gate condition False so that the pod never turns Ready on a probe nobody
// runs.
func (p *probeWorkers) reportLocked(key string, pod *corev1.Pod, invalid error) {
	r := reportedProbe{uid: pod.UID, annotation: pod.Annotations[probe.Annotation], err: invalid.Error()}
	if p.reported[key] == r {
		return
	}
	p.reported[key] = r
	p.m.invalid.Inc()
	p.log.Warn("Invalid readiness probe", "pod", key, "annotation", probe.Annotation, "err", invalid)
	p.events.Event(pod, corev1.EventTypeWarning, ReasonInvalidProbe, "Readiness probe not run: "+r.err)
	var written *corev1.PodCondition
	if cond, ok := conditions.GetPod(pod.Status.Conditions, p.condType); ok {
		written = &cond
	}
	p.wg.Go(func() {
		want := corev1.PodCondition{Type: p.condType, Status: corev1.ConditionFalse, Reason: ReasonInvalidProbe, Message: truncate(r.err)}
		for attempt := 0; ; attempt++ {
			_, err := p.write(p.ctx, key, pod.UID, written, want, time.Now())
			if err == nil || errors.Is(err, errGone) || p.ctx.Err() != nil {
				return
			}
			p.log.Error("Writing the invalid probe's condition failed, will retry", "pod", key, "err", err)
			select {
			case <-p.ctx.Done():
				return
			case <-time.After(writeRetry << min(attempt, 5)):
			}
		}
	})
}

// run probes until ctx ends. The first probe waits for the initial delay
// after the container started; later ones run every period, and a probe
// never outlives its timeout, which is at most the period.
func (p *probeWorkers) run(ctx context.Context, key string, w *probeWorker) {
	period := w.probe.Period
	first := w.startedAt.Add(w.probe.InitialDelay)
	if now := time.Now(); now.Sub(p.started) < period {
		if jittered := now.Add(rand.N(period)); jittered.After(first) {
			first = jittered
		}
	}
	if !sleepUntil(ctx, first) {
		return
	}
	ticker := time.NewTicker(period)
	defer ticker.Stop()

	var (
		run probeRun
		// pending is the status the thresholds decided and the API server
		// does not hold yet, with the time of the probe that decided it.
		pending   *corev1.PodCondition
		decidedAt time.Time
		retryAt   time.Time
	)
	for {
		out := p.probes.Probe(ctx, w.probe, w.target)
		if ctx.Err() != nil {
			return
		}
		p.m.observe(w.probe.Type, out)
		if want, ok := decide(w.probe, out, run.add(out.Result)); ok {
			wantStatus := want.Status
			switch {
			case w.written != nil && w.written.Status == wantStatus:
				pending = nil
			case pending == nil || pending.Status != wantStatus:
				want.Type = p.condType
				pending, decidedAt, retryAt = &want, time.Now(), time.Time{}
			}
		}
		if pending != nil && !time.Now().Before(retryAt) {
			cond, err := p.write(ctx, key, w.uid, w.written, *pending, decidedAt)
			switch {
			case err == nil:
				p.m.toCondition.Observe(time.Since(decidedAt).Seconds())
				w.written, pending = &cond, nil
			case errors.Is(err, errGone), ctx.Err() != nil:
				return
			default:
				retryAt = time.Now().Add(writeRetry)
				p.log.Error("Writing the probe's condition failed, will retry", "pod", key, "status", pending.Status, "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// probeRun counts results in a row, timeouts and failures alike.
type probeRun struct {
	success bool
	n       int
}

// add counts r and returns the length of the run it belongs to.
func (r *probeRun) add(res probe.Result) int {
	if ok := res == probe.Success; ok == r.success && r.n > 0 {
		r.n++
	} else {
		r.success, r.n = ok, 1
	}
	return r.n
}

// decide applies the thresholds as the kubelet does: a status needs
// successThreshold successes, or failureThreshold failures, in a row.
func decide(pr *probe.Probe, out probe.Outcome, run int) (corev1.PodCondition, bool) {
	switch out.Result {
	case probe.Success:
		if run < pr.SuccessThreshold {
			return corev1.PodCondition{}, false
		}
		return corev1.PodCondition{Status: corev1.ConditionTrue, Reason: ReasonProbeSucceeded}, true
	case probe.Timeout:
		if run < pr.FailureThreshold {
			return corev1.PodCondition{}, false
		}
		return corev1.PodCondition{Status: corev1.ConditionFalse, Reason: ReasonProbeTimeout, Message: truncate(out.Message)}, true
	default:
		if run < pr.FailureThreshold {
			return corev1.PodCondition{}, false
		}
		return corev1.PodCondition{Status: corev1.ConditionFalse, Reason: ReasonProbeFailed, Message: truncate(out.Message)}, true
	}
}

// errGone means the pod the worker probes is no longer in the cache, or is
// a new pod under the same name: the worker's job is over.
var errGone = errors.New("pod gone")

// write sends want as the gate condition in a strategic-merge PATCH on
// pods/status, carrying that one condition only. The condition is built on
// the worker's own memory of what it wrote, not on the cache, which may not
// have caught up with the worker's previous write and would give the new
// condition the wrong lastTransitionTime. No resourceVersion precondition:
// the agent is the only writer of this type, and a conflict with the
// kubelet's frequent status writes would only delay the gate.
func (p *probeWorkers) write(ctx context.Context, key string, uid types.UID, written *corev1.PodCondition, want corev1.PodCondition, at time.Time) (corev1.PodCondition, error) {
	obj, ok, err := p.pods.GetByKey(key)
	if err != nil {
		return corev1.PodCondition{}, fmt.Errorf("get pod %s from cache: %w", key, err)
	}
	if !ok || obj.(*corev1.Pod).UID != uid {
		return corev1.PodCondition{}, fmt.Errorf("write probe condition of pod %s: %w", key, errGone)
	}
	pod := obj.(*corev1.Pod)
	owned := []string{string(p.condType)}
	if pod.Spec.NodeName != p.node {
		p.m.writes.written(owned, resultRefused)
		return corev1.PodCondition{}, fmt.Errorf("write pod %s bound to node %q from node %q: %w", key, pod.Spec.NodeName, p.node, ErrNotOnNode)
	}
	scratch := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Generation: pod.Generation}}
	if written != nil {
		scratch.Status.Conditions = []corev1.PodCondition{*written}
	}
	if _, err := p.owner.SetPod(scratch, want, metav1.NewTime(at)); err != nil {
		return corev1.PodCondition{}, fmt.Errorf("write probe condition of pod %s: %w", key, err)
	}
	body, err := p.owner.PodStatusPatch(scratch.Status.Conditions)
	if err != nil {
		return corev1.PodCondition{}, fmt.Errorf("write probe condition of pod %s: %w", key, err)
	}
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	start := time.Now()
	_, err = p.client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, body,
		metav1.PatchOptions{FieldManager: fieldManager}, "status")
	p.m.writes.duration.Observe(time.Since(start).Seconds())
	p.m.writes.written(owned, resultOf(err))
	if err != nil {
		return corev1.PodCondition{}, fmt.Errorf("patch probe condition of pod %s: %w", key, err)
	}
	cond, _ := conditions.GetPod(scratch.Status.Conditions, p.condType)
	p.log.Debug("Probe condition written", "pod", key, "status", cond.Status, "reason", cond.Reason, "message", cond.Message)
	return cond, nil
}

// begin lets workers start; pod events before it are ignored, and the
// informer's initial list, which comes after, brings every pod again.
func (p *probeWorkers) begin(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ctx, p.started = ctx, time.Now()
}

// stop cancels every worker and waits for them; the agent calls it after
// its context ended.
func (p *probeWorkers) stop() {
	p.mu.Lock()
	for key := range p.workers {
		p.stopLocked(key)
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}

func truncate(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	return s[:maxMessage-len("…")] + "…"
}
