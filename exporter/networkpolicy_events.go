package exporter

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/pager"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"

	"github.com/podslo/podslo/informers"
	"github.com/podslo/podslo/internal/kube"
	"github.com/podslo/podslo/netpolicy"
)

// The Events --networkpolicy-events writes on a NetworkPolicy.
const (
	// eventsController is the Events' reportingController, and the
	// reportingComponent a restarted exporter lists its earlier Events by.
	eventsController = "podslo-exporter"
	// ReasonEventUnsupported: the policy's Supported condition turned
	// False.
	ReasonEventUnsupported = "NetworkPolicyUnsupported"
	// ReasonEventProblem: the policy's Problem condition turned True.
	ReasonEventProblem = "NetworkPolicyProblem"
	eventAction        = "Judged"
	// maxEventNote is events.k8s.io/v1's limit on an Event's note.
	maxEventNote = 1024
	// Events are written at most this fast, so that a first start over
	// thousands of bad policies neither floods the API server nor
	// overflows the broadcaster's queue of 1000, which drops.
	eventsQPS   = 5
	eventsBurst = 50
)

// policyEvents writes a Warning Event on a NetworkPolicy when its
// Supported condition turns False or its Problem condition turns True
// (--networkpolicy-events), so that `kubectl describe networkpolicy` shows
// it. It sits between the NetworkPolicy watch and the state: the watch
// path only queues the policy's key, and a worker judges and writes.
//
// Once per transition: the worker remembers what it last judged of each
// policy, so a relist or an update that changes nothing writes nothing.
// Across restarts it remembers nothing, so it lists the Events it wrote
// before (by reportingComponent) and writes none for a policy that already
// has one for the same reason. Events expire (kube-apiserver --event-ttl,
// 1h by default): a policy that stays bad gets at most one Event per
// reason per TTL, however often the exporter restarts.
type policyEvents struct {
	next    informers.PolicyHandler
	state   *netpolicy.State
	profile *netpolicy.Profile
	client  kube.Interface
	log     *slog.Logger

	queue   *workqueue.Typed[string]
	limiter flowcontrol.RateLimiter
	// last is what the worker last judged of each policy; only the worker
	// touches it.
	last map[string]judgement
	// written are the Events found at start, as uid/reason.
	written map[string]bool
}

// judgement is what the Events depend on: which policy, and which of its
// conditions are bad.
type judgement struct {
	uid         types.UID
	unsupported bool
	problem     bool
}

func newPolicyEvents(next informers.PolicyHandler, state *netpolicy.State, profile *netpolicy.Profile, client kube.Interface, log *slog.Logger) *policyEvents {
	return &policyEvents{
		next: next, state: state, profile: profile, client: client, log: log,
		queue:   workqueue.NewTyped[string](),
		limiter: flowcontrol.NewTokenBucketRateLimiter(eventsQPS, eventsBurst),
		last:    map[string]judgement{},
	}
}

// Policy implements informers.PolicyHandler.
func (e *policyEvents) Policy(p *netpolicy.Policy) {
	e.next.Policy(p)
	e.queue.Add(p.Key())
}

// PolicyDeleted implements informers.PolicyHandler.
func (e *policyEvents) PolicyDeleted(namespace, name string) {
	e.next.PolicyDeleted(namespace, name)
	e.queue.Add(namespace + "/" + name)
}

// Start writes Events until ctx ends.
func (e *policyEvents) Start(ctx context.Context) error {
	host, err := os.Hostname()
	if err != nil {
		return fmt.Errorf("NetworkPolicy events: the reporting instance: %w", err)
	}
	// As client-go's events recorder names it.
	instance := eventsController + "-" + host
	go func() {
		<-ctx.Done()
		e.queue.ShutDown()
	}()

	written, err := e.listWritten(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		// Not fatal: at worst a policy that is still bad gets its Event
		// again.
		e.log.Error("Listing earlier NetworkPolicy events failed; policies already reported may be reported again", "err", err)
	}
	e.written = written
	e.log.Info("Writing NetworkPolicy events", "earlier", len(written), "qps", eventsQPS, "burst", eventsBurst)
	for {
		key, shutdown := e.queue.Get()
		if shutdown {
			return nil
		}
		e.judge(ctx, instance, key)
		e.queue.Done(key)
	}
}

// listWritten returns the Warning Events this exporter wrote before, as
// uid/reason.
func (e *policyEvents) listWritten(ctx context.Context) (map[string]bool, error) {
	written := map[string]bool{}
	sel := fields.Set{"reportingComponent": eventsController, "type": corev1.EventTypeWarning}.AsSelector().String()
	p := pager.New(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return e.client.List(ctx, kube.Events, "", opts)
	})
	err := p.EachListItem(ctx, metav1.ListOptions{FieldSelector: sel}, func(obj runtime.Object) error {
		ev, ok := obj.(*corev1.Event)
		if ok && ev.InvolvedObject.Kind == "NetworkPolicy" {
			written[string(ev.InvolvedObject.UID)+"/"+ev.Reason] = true
		}
		return nil
	})
	return written, err
}

func (e *policyEvents) judge(ctx context.Context, instance, key string) {
	p := e.state.Get(key)
	if p == nil {
		delete(e.last, key)
		return
	}
	conds := netpolicy.Conditions(p, e.profile)
	now := judgement{uid: p.UID, unsupported: conds[0].Status == netpolicy.StatusFalse, problem: conds[1].Status == netpolicy.StatusTrue}
	before, seen := e.last[key]
	// A policy deleted and created again under the same name while the
	// watch was down is a new policy.
	seen = seen && before.uid == p.UID
	e.last[key] = now
	for _, c := range []struct {
		bad, wasBad bool
		reason      string
		cond        netpolicy.Condition
	}{
		{now.unsupported, before.unsupported, ReasonEventUnsupported, conds[0]},
		{now.problem, before.problem, ReasonEventProblem, conds[1]},
	} {
		switch {
		case !c.bad:
			continue
		case seen && c.wasBad:
			continue
		case !seen && e.written[string(p.UID)+"/"+c.reason]:
			// Reported by an earlier run, and the Event is still there.
			continue
		}
		if err := e.limiter.Wait(ctx); err != nil {
			return
		}
		note := fmt.Sprintf("%s=%s (%s): %s", c.cond.Type, c.cond.Status, c.cond.Reason, c.cond.Message)
		if len(note) > maxEventNote {
			note = strings.ToValidUTF8(note[:maxEventNote-len("...")], "") + "..."
		}
		ref := corev1.ObjectReference{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy", Namespace: p.Namespace, Name: p.Name, UID: p.UID}
		now := time.Now()
		ev := &eventsv1.Event{
			// Named as client-go's events recorder names them.
			ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%s.%x", p.Name, now.UnixNano()), Namespace: p.Namespace},
			EventTime:           metav1.NewMicroTime(now),
			ReportingController: eventsController,
			ReportingInstance:   instance,
			Action:              eventAction,
			Reason:              c.reason,
			Regarding:           ref,
			Note:                note,
			Type:                corev1.EventTypeWarning,
		}
		if err := e.write(ctx, ev); err != nil {
			e.log.Error("Writing a NetworkPolicy event failed", "namespace", p.Namespace, "networkpolicy", p.Name, "reason", c.reason, "err", err)
			continue
		}
		e.log.Info("NetworkPolicy event", "namespace", p.Namespace, "networkpolicy", p.Name, "reason", c.reason, "condition", string(c.cond.Type), "conditionReason", c.cond.Reason)
	}
}

// eventAttempts and eventRetry bound how long write retries an Event the
// API server refused or did not answer, as client-go's recorder retries
// (12 times, 10 s apart): the worker waits meanwhile, and the policies
// behind it are judged later.
const (
	eventAttempts = 6
	eventRetry    = 5 * time.Second
	eventTimeout  = 10 * time.Second
)

// write creates ev, trying again a few times; an Event that already exists
// (a retry of a create that succeeded) is written.
func (e *policyEvents) write(ctx context.Context, ev *eventsv1.Event) error {
	var err error
	for attempt := range eventAttempts {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(eventRetry):
			}
		}
		wctx, cancel := context.WithTimeout(ctx, eventTimeout)
		_, err = e.client.Create(wctx, kube.EventsV1, ev.Namespace, ev)
		cancel()
		if err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsNotFound(err) {
			// Trying again changes nothing: no RBAC, or a namespace
			// being deleted.
			return err
		}
	}
	return err
}
