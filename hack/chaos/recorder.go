package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
)

// The ground truth comes from etcd, not from a watch through
// kube-apiserver: an API watch relists after the outage and after a 410,
// exactly as the exporter does, and would miss the same revisions. etcd's
// own watch of the pod keys delivers every revision of every pod, in
// order, through the outage too; the run compacts etcd only at a revision
// the recorder has already read.
const podPrefix = "/registry/pods/"

// cond is one pod condition: its status and lastTransitionTime in Unix
// seconds, the precision the API keeps. The zero cond is "absent".
type cond struct {
	Status string `json:"s,omitempty"`
	Time   int64  `json:"t,omitempty"`
}

func (c cond) isTrue() bool  { return c.Status == string(corev1.ConditionTrue) }
func (c cond) isFalse() bool { return c.Status == string(corev1.ConditionFalse) }

// revision is what the SLIs read of one revision of a pod object.
type revision struct {
	// At is when the recorder received it from etcd; Rev is etcd's
	// revision.
	At  time.Time `json:"at"`
	Rev int64     `json:"rev"`

	Scheduled, Sandbox, Ready, Initialized cond
	// Started is the newest state.running.startedAt of the containers, in
	// Unix seconds; 0 when none runs.
	Started int64 `json:"started,omitempty"`
	// Restarts sums the containers' restartCount.
	Restarts int32 `json:"restarts,omitempty"`
	// Ran is the earliest start time any container or init container
	// shows, in its state (running or terminated) or its last state, in
	// Unix seconds; 0 when none ever started. Containers start only in a
	// ready sandbox: a start while no sandbox of the pod was ever ready
	// is a contradiction of the fake kubelet's (contradiction).
	Ran int64 `json:"ran,omitempty"`
	// Killed is the newest finishedAt of a container killed by SIGKILL
	// (exit code 137, not OOMKilled), in Unix seconds: the kubelet's kill
	// at the end of the grace period. 0 when none.
	Killed int64 `json:"killed,omitempty"`
	// Deletion is deletionTimestamp in Unix seconds, 0 when unset; Grace
	// is deletionGracePeriodSeconds.
	Deletion int64 `json:"deletion,omitempty"`
	Grace    int64 `json:"grace,omitempty"`
	NodeName string
}

// same reports whether two revisions read the same to the SLIs.
func (r *revision) same(o *revision) bool {
	a, b := *r, *o
	a.At, a.Rev, b.At, b.Rev = time.Time{}, 0, time.Time{}, 0
	return a == b
}

// history is every revision of one pod UID, as the recorder saw them.
type history struct {
	UID       types.UID `json:"uid"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	// Created is creationTimestamp in Unix seconds.
	Created      int64    `json:"created"`
	RuntimeClass string   `json:"runtimeClass,omitempty"`
	Claims       []string `json:"claims,omitempty"`
	HasInit      bool     `json:"hasInit,omitempty"`
	// Containers counts the containers and init containers.
	Containers int  `json:"containers,omitempty"`
	Crash      bool `json:"crash,omitempty"` // annotated to lose its sandbox once
	// CrashLoop and Flap: annotated to restart its container in its
	// sandbox once, and not to be Ready for a while once.
	CrashLoop bool `json:"crashLoop,omitempty"`
	Flap      bool `json:"flap,omitempty"`
	Stuck     bool `json:"stuck,omitempty"` // annotated never to get a sandbox
	// Revs holds the revisions that changed what the SLIs read; each
	// starts a state that lasts until the next one (or Removed).
	Revs []revision `json:"revs"`
	// Removed is when the pod was deleted from etcd; zero while it exists.
	Removed    time.Time `json:"removed,omitzero"`
	RemovedRev int64     `json:"removedRev,omitempty"`
}

func (h *history) last() *revision {
	if len(h.Revs) == 0 {
		return nil
	}
	return &h.Revs[len(h.Revs)-1]
}

// recorder keeps the history of every pod from etcd's watch.
type recorder struct {
	cli *clientv3.Client
	log *slog.Logger

	mu sync.Mutex
	// pods holds every UID ever seen; byKey the UID currently at each etcd
	// key.
	pods  map[types.UID]*history
	byKey map[string]types.UID
	// rev is the newest etcd revision whose events have all been applied.
	rev int64
	// failed is set when the watch broke: the history is then incomplete
	// and the run cannot judge anything.
	failed error
	// changed is closed and replaced on every applied event.
	changed chan struct{}
}

func newRecorder(cli *clientv3.Client, log *slog.Logger) *recorder {
	return &recorder{cli: cli, log: log, pods: map[types.UID]*history{}, byKey: map[string]types.UID{}, changed: make(chan struct{})}
}

// start reads the pods that exist now and then follows every change until
// ctx ends. It returns once the initial read is done.
func (r *recorder) start(ctx context.Context) error {
	resp, err := r.cli.Get(ctx, podPrefix, clientv3.WithPrefix())
	if err != nil {
		return fmt.Errorf("read the pods from etcd: %w", err)
	}
	now := time.Now()
	r.mu.Lock()
	for _, kv := range resp.Kvs {
		if err := r.put(now, kv.ModRevision, string(kv.Key), kv.Value); err != nil {
			r.mu.Unlock()
			return err
		}
	}
	r.rev = resp.Header.Revision
	r.mu.Unlock()
	wch := r.cli.Watch(clientv3.WithRequireLeader(ctx), podPrefix, clientv3.WithPrefix(),
		clientv3.WithRev(resp.Header.Revision+1), clientv3.WithProgressNotify())
	go r.follow(ctx, wch)
	return nil
}

func (r *recorder) follow(ctx context.Context, wch clientv3.WatchChan) {
	for resp := range wch {
		if err := resp.Err(); err != nil {
			r.fail(fmt.Errorf("etcd watch of %s: %w", podPrefix, err))
			return
		}
		now := time.Now()
		r.mu.Lock()
		for _, ev := range resp.Events {
			key := string(ev.Kv.Key)
			switch ev.Type {
			case clientv3.EventTypePut:
				if err := r.put(now, ev.Kv.ModRevision, key, ev.Kv.Value); err != nil {
					r.mu.Unlock()
					r.fail(err)
					return
				}
			case clientv3.EventTypeDelete:
				if uid, ok := r.byKey[key]; ok {
					h := r.pods[uid]
					h.Removed, h.RemovedRev = now, ev.Kv.ModRevision
					delete(r.byKey, key)
				}
			}
		}
		// A progress notification carries only the header: every event up
		// to that revision has been delivered.
		if resp.Header.Revision > r.rev {
			r.rev = resp.Header.Revision
		}
		close(r.changed)
		r.changed = make(chan struct{})
		r.mu.Unlock()
	}
	if ctx.Err() == nil {
		r.fail(errors.New("etcd watch of the pods ended"))
	}
}

func (r *recorder) fail(err error) {
	r.log.Error("The ground truth is incomplete", "err", err)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failed == nil {
		r.failed = err
	}
	close(r.changed)
	r.changed = make(chan struct{})
}

// put applies one pod object; r.mu is held.
func (r *recorder) put(at time.Time, rev int64, key string, value []byte) error {
	obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(value, nil, nil)
	if err != nil {
		return fmt.Errorf("decode %s at revision %d: %w", key, rev, err)
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return fmt.Errorf("%s at revision %d is a %T, not a pod", key, rev, obj)
	}
	if old, ok := r.byKey[key]; ok && old != pod.UID {
		// etcd deletes the old object first; a put over it would be a bug
		// of the recorder's reading of the watch.
		return fmt.Errorf("%s changed UID from %s to %s without a delete at revision %d", key, old, pod.UID, rev)
	}
	r.byKey[key] = pod.UID
	h := r.pods[pod.UID]
	if h == nil {
		h = newHistory(pod)
		r.pods[pod.UID] = h
	}
	next := readRevision(pod)
	next.At, next.Rev = at, rev
	if last := h.last(); last == nil || !last.same(&next) {
		h.Revs = append(h.Revs, next)
	}
	return nil
}

func newHistory(pod *corev1.Pod) *history {
	h := &history{
		UID: pod.UID, Namespace: pod.Namespace, Name: pod.Name,
		Created:    pod.CreationTimestamp.Unix(),
		HasInit:    len(pod.Spec.InitContainers) > 0,
		Containers: len(pod.Spec.Containers) + len(pod.Spec.InitContainers),
		Crash:      pod.Annotations[annotationCrash] != "",
		CrashLoop:  pod.Annotations[annotationCrashAfter] != "",
		Flap:       pod.Annotations[annotationUnready] != "",
		Stuck:      pod.Annotations[annotationSandbox] == "never",
	}
	if rc := pod.Spec.RuntimeClassName; rc != nil {
		h.RuntimeClass = *rc
	}
	for _, v := range pod.Spec.Volumes {
		if v.PersistentVolumeClaim != nil {
			h.Claims = append(h.Claims, v.PersistentVolumeClaim.ClaimName)
		}
	}
	return h
}

func readRevision(pod *corev1.Pod) revision {
	var r revision
	for _, c := range pod.Status.Conditions {
		v := cond{Status: string(c.Status)}
		if !c.LastTransitionTime.IsZero() {
			v.Time = c.LastTransitionTime.Unix()
		}
		switch c.Type {
		case corev1.PodScheduled:
			r.Scheduled = v
		case corev1.PodReadyToStartContainers:
			r.Sandbox = v
		case corev1.PodReady:
			r.Ready = v
		case corev1.PodInitialized:
			r.Initialized = v
		}
	}
	ran := func(t metav1.Time) {
		if !t.IsZero() && (r.Ran == 0 || t.Unix() < r.Ran) {
			r.Ran = t.Unix()
		}
	}
	for _, cs := range append(slices.Clone(pod.Status.ContainerStatuses), pod.Status.InitContainerStatuses...) {
		if run := cs.State.Running; run != nil {
			ran(run.StartedAt)
		}
		if term := cs.State.Terminated; term != nil {
			ran(term.StartedAt)
			// The kubelet's kill at the end of the grace period, of a
			// container or a native sidecar (docs/metrics.md).
			if term.ExitCode == 137 && term.Reason != "OOMKilled" && term.FinishedAt.Unix() > r.Killed {
				r.Killed = term.FinishedAt.Unix()
			}
		}
		if last := cs.LastTerminationState.Terminated; last != nil {
			ran(last.StartedAt)
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if run := cs.State.Running; run != nil && !run.StartedAt.IsZero() && run.StartedAt.Unix() > r.Started {
			r.Started = run.StartedAt.Unix()
		}
		r.Restarts += cs.RestartCount
	}
	if dt := pod.DeletionTimestamp; dt != nil {
		r.Deletion = dt.Unix()
		if g := pod.DeletionGracePeriodSeconds; g != nil {
			r.Grace = *g
		}
	}
	r.NodeName = pod.Spec.NodeName
	return r
}

// position is the newest etcd revision the recorder has fully applied, and
// the error that stopped it, if any.
func (r *recorder) position() (int64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rev, r.failed
}

// catchUp waits until the recorder has applied every revision up to
// etcd's current one.
func (r *recorder) catchUp(ctx context.Context) error {
	resp, err := r.cli.Get(ctx, podPrefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		return fmt.Errorf("read etcd's revision: %w", err)
	}
	want := resp.Header.Revision
	for {
		// Ask for a progress notification so that an idle watch moves on.
		_ = r.cli.RequestProgress(clientv3.WithRequireLeader(ctx))
		r.mu.Lock()
		rev, failed, changed := r.rev, r.failed, r.changed
		r.mu.Unlock()
		if failed != nil {
			return failed
		}
		if rev >= want {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// snapshot returns a deep copy of every history.
func (r *recorder) snapshot() map[types.UID]*history {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[types.UID]*history, len(r.pods))
	for uid, h := range r.pods {
		c := *h
		c.Revs = append([]revision(nil), h.Revs...)
		c.Claims = append([]string(nil), h.Claims...)
		out[uid] = &c
	}
	return out
}

// view calls fn with the live history of every pod that exists now, under
// the recorder's lock: fn must not keep them.
func (r *recorder) view(fn func(h *history)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, uid := range r.byKey {
		fn(r.pods[uid])
	}
}

// keyOf is a pod's etcd key.
func keyOf(namespace, name string) string { return podPrefix + namespace + "/" + name }

// uidAt returns the UID of the pod at namespace/name, if one exists.
func (r *recorder) uidAt(namespace, name string) (types.UID, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	uid, ok := r.byKey[keyOf(namespace, name)]
	return uid, ok
}
