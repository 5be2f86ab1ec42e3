package realnode_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/podslo/podslo/exporter"
	"github.com/podslo/podslo/internal/realnode"
	"github.com/podslo/podslo/internal/testenv"
)

// record rewrites the fixtures in testdata with what the real kubelet
// wrote in this run: `go test ./e2e/realnode -args -record`.
var record = flag.Bool("record", false, "write the pods' observed status sequences to testdata")

const (
	sandboxCondition = corev1.PodConditionType("PodReadyToStartContainers")
	ns               = "default"
)

// suite is one real node with the test's own watch of its pods.
type suite struct {
	t    *testing.T
	node *realnode.Node
	tr   *truth
}

// startSuite starts a real node, with further options of its control
// plane, and the watch that records the truth.
func startSuite(t *testing.T, opts ...testenv.Option) *suite {
	began := time.Now()
	node := realnode.Start(t, opts...)
	t.Logf("real node ready after %v", time.Since(began).Round(time.Millisecond))
	tr := &truth{pods: map[types.UID]*podTruth{}, claims: map[string]string{}, mounts: map[types.UID][]mountEvent{}, images: map[types.UID][]imageEvent{}}
	factory := informers.NewSharedInformerFactoryWithOptions(node.Client, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { tr.observe(obj, false) },
		UpdateFunc: func(_, obj any) { tr.observe(obj, false) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			tr.observe(obj, true)
		},
	})
	require.NoError(t, err)
	// The kubelet's FailedMount events, which podslo reads to tell the
	// pod author's missing Secret or ConfigMap from the platform's delay,
	// and its image events (observeEvent).
	events := informers.NewSharedInformerFactoryWithOptions(node.Client, 0, informers.WithNamespace(ns))
	evInf := events.Core().V1().Events().Informer()
	_, err = evInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    tr.observeEvent,
		UpdateFunc: func(_, obj any) { tr.observeEvent(obj) },
	})
	require.NoError(t, err)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	factory.Start(stop)
	events.Start(stop)
	require.True(t, cache.WaitForCacheSync(stop, inf.HasSynced, evInf.HasSynced))
	s := &suite{t: t, node: node, tr: tr}
	if *record {
		// Registered after the node's cleanup, so it runs before the
		// teardown deletes the pods the test left.
		t.Cleanup(func() { s.tr.writeFixture(t) })
	}
	return s
}

// startExporter runs podslo's exporter in this process on state dir and
// returns its URL once ready. stop ends it early, as a graceful shutdown.
func (s *suite) startExporter(state string) string {
	return s.startExporterWith(state, nil)
}

// startExporterWith is startExporter with options of the test's own:
// configure changes the exporter's Options, with adds constructor options.
func (s *suite) startExporterWith(state string, configure func(*exporter.Options), with ...exporter.Option) string {
	url := "http://" + testenv.RunComponent(s.t, "exporter", func(lis net.Listener) (testenv.Component, error) {
		// The widest watch tolerance: on a loaded machine an update can
		// arrive more than the default 250 ms after its second, and would
		// rightly be measured in seconds; the tests expect milliseconds
		// and compare them with their own watch within msTolerance.
		opts := exporter.Options{Kubeconfig: s.node.Kubeconfig, StateDir: state, Logger: testenv.Logger(s.t), WatchTolerance: watchTolerance}
		if configure != nil {
			configure(&opts)
		}
		return exporter.New(opts, append([]exporter.Option{exporter.WithListener(lis)}, with...)...)
	})
	testenv.WaitReady(s.t, url, "exporter")
	waitCurrent(s.t, url)
	return url
}

// truth is what the test's own watch of the pods and of their FailedMount
// events saw.
type truth struct {
	mu      sync.Mutex
	pods    map[types.UID]*podTruth
	actions []action
	// claims is the StorageClass of each claim the test made, for the
	// pods' storage class: set before a pod that mounts the claim is
	// created.
	claims map[string]string
	// mounts is each distinct state of the FailedMount events of a pod,
	// in the order seen.
	mounts map[types.UID][]mountEvent
	// images is each distinct state of a pod's image events (Pulling,
	// Pulled, Failed, BackOff), in the order seen, for the fixtures: the
	// chaos harness writes such events itself, as kwok cannot.
	images map[types.UID][]imageEvent
}

// imageEvent is one state of a kubelet's image event of a pod.
type imageEvent struct {
	Seen      time.Time `json:"seen"`
	Reason    string    `json:"reason"`
	FieldPath string    `json:"fieldPath"`
	Message   string    `json:"message"`
	Count     int32     `json:"count"`
}

// mountEvent is one state of a FailedMount event as the kubelet wrote it:
// its events recorder folds repeats into one event and counts them.
type mountEvent struct {
	Seen    time.Time   `json:"seen"`
	Message string      `json:"message"`
	Count   int32       `json:"count"`
	First   metav1.Time `json:"firstTimestamp"`
	Last    metav1.Time `json:"lastTimestamp"`
}

// action is something the test did to a pod, for the fixtures.
type action struct {
	At   time.Time `json:"at"`
	Pod  string    `json:"pod"`
	What string    `json:"what"`
}

type podTruth struct {
	// class is the runtime class, storage the storage class ("none"
	// without a claim).
	name, class, storage string
	created              time.Time
	scheduled            time.Time
	// ready is the first Ready=True's lastTransitionTime.
	ready time.Time
	// sandboxReady holds each distinct lastTransitionTime of the sandbox
	// condition turning True, in the order seen: the first is the first
	// sandbox, each later one a re-created sandbox.
	sandboxReady []time.Time
	// restarts is the app container's restartCount; started its current
	// start, zero unless running.
	restarts int32
	started  time.Time
	// firstStarted is the first running container's startedAt seen.
	firstStarted time.Time
	// The first deletion request seen (deletionTimestamp minus the grace
	// period), and the end of its grace period: the first
	// deletionTimestamp seen. The kubelet kills at that end, though the
	// API server moves deletionTimestamp (to now on a second, shorter
	// delete past its end, and on the kubelet's final grace-0 delete).
	requested, deadline time.Time
	// sandboxGone is the first sandbox False at or after the request.
	sandboxGone time.Time
	// killed is set when a container ended with the kubelet's SIGKILL
	// (exit code 137, not OOMKilled); finished is when it ended.
	killed   bool
	finished time.Time
	deleted  bool
	timeline []snapshot
	// seen holds when the test's watch received the first update showing
	// each transition (seenScheduled...): podslo's millisecond SLIs are
	// compared with these.
	seen map[string]time.Time
}

// The transitions whose receive times podTruth.seen holds.
const (
	seenScheduled    = "scheduled"
	seenSandboxReady = "sandbox ready"
	seenStarted      = "container started"
	seenReady        = "ready"
	seenRequested    = "deletion requested"
	seenGone         = "sandbox gone"
)

// between is the time between the receive times of two transitions, and
// whether both were seen.
func (p podTruth) between(from, to string) (float64, bool) {
	s, ok1 := p.seen[from]
	e, ok2 := p.seen[to]
	return e.Sub(s).Seconds(), ok1 && ok2
}

// statusTime is a transition's time as the pod's status gives it, in
// whole seconds.
func (p podTruth) statusTime(what string) time.Time {
	switch what {
	case seenScheduled:
		return p.scheduled
	case seenSandboxReady:
		if len(p.sandboxReady) > 0 {
			return p.sandboxReady[0]
		}
	case seenStarted:
		return p.firstStarted
	case seenReady:
		return p.ready
	case seenRequested:
		return p.requested
	case seenGone:
		return p.sandboxGone
	}
	return time.Time{}
}

// seenLate reports whether the test's watch received a transition so long
// after its second that podslo, whose watch receives it within a few
// milliseconds of the test's, may take it for no evidence of its time:
// more than a second and the watch tolerance after it, less 100 ms for
// the two watches' difference (lifecycle/precise.go).
func (p podTruth) seenLate(what string) bool {
	at, ok := p.seen[what]
	second := p.statusTime(what).Truncate(time.Second)
	return ok && !second.IsZero() && at.Sub(second) >= time.Second+watchTolerance-100*time.Millisecond
}

// note records the receive time of a transition the first time it shows.
func (p *podTruth) note(what string, at time.Time) {
	if _, ok := p.seen[what]; !ok {
		p.seen[what] = at
	}
}

func (tr *truth) act(pod, what string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.actions = append(tr.actions, action{At: time.Now().UTC(), Pod: pod, What: what})
}

func (tr *truth) observe(obj any, deleted bool) {
	at := time.Now()
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	p := tr.pods[pod.UID]
	if p == nil {
		p = &podTruth{name: pod.Name, class: "none", storage: tr.storageOf(pod), created: pod.CreationTimestamp.Time, seen: map[string]time.Time{}}
		if rc := pod.Spec.RuntimeClassName; rc != nil {
			p.class = *rc
		}
		tr.pods[pod.UID] = p
	}
	snap := snapshotOf(pod, deleted)
	if n := len(p.timeline); n == 0 || !snap.sameAs(p.timeline[n-1]) {
		p.timeline = append(p.timeline, snap)
	}
	p.deleted = p.deleted || deleted
	if dt := pod.DeletionTimestamp; dt != nil && pod.DeletionGracePeriodSeconds != nil {
		if p.requested.IsZero() {
			p.requested = dt.Add(-time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second)
			p.deadline = dt.Time
			p.note(seenRequested, at)
		}
	}
	for _, c := range pod.Status.Conditions {
		switch {
		case c.Type == corev1.PodScheduled && c.Status == corev1.ConditionTrue:
			if p.scheduled.IsZero() {
				p.scheduled = c.LastTransitionTime.Time
				p.note(seenScheduled, at)
			}
		case c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue:
			if p.ready.IsZero() {
				p.ready = c.LastTransitionTime.Time
			}
			p.note(seenReady, at)
		case c.Type == sandboxCondition && c.Status == corev1.ConditionTrue:
			if n := len(p.sandboxReady); n == 0 || !p.sandboxReady[n-1].Equal(c.LastTransitionTime.Time) {
				p.sandboxReady = append(p.sandboxReady, c.LastTransitionTime.Time)
				p.note(seenSandboxReady, at)
			}
		case c.Type == sandboxCondition && c.Status == corev1.ConditionFalse:
			if !p.requested.IsZero() && p.sandboxGone.IsZero() && !c.LastTransitionTime.Time.Before(p.requested) {
				p.sandboxGone = c.LastTransitionTime.Time
				p.note(seenGone, at)
			}
		}
	}
	for _, c := range pod.Status.ContainerStatuses {
		p.restarts = c.RestartCount
		p.started = time.Time{}
		if r := c.State.Running; r != nil {
			p.started = r.StartedAt.Time
			if p.firstStarted.IsZero() {
				p.firstStarted = p.started
			}
			p.note(seenStarted, at)
		}
		if term := c.State.Terminated; term != nil && term.ExitCode == 137 && term.Reason != "OOMKilled" {
			p.killed, p.finished = true, term.FinishedAt.Time
		}
	}
}

// storageOf is the pod's storage class as the test made it: the sorted,
// comma-joined classes of its claims, "none" without one.
func (tr *truth) storageOf(pod *corev1.Pod) string {
	var classes []string
	for _, v := range pod.Spec.Volumes {
		if c := v.PersistentVolumeClaim; c != nil {
			class, ok := tr.claims[c.ClaimName]
			if !ok {
				class = "unknown"
			}
			classes = append(classes, class)
		}
	}
	if len(classes) == 0 {
		return "none"
	}
	sort.Strings(classes)
	return strings.Join(slices.Compact(classes), ",")
}

// claimOf records that the test's claim is of StorageClass class.
func (tr *truth) claimOf(claim, class string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.claims[claim] = class
}

func (tr *truth) observeEvent(obj any) {
	ev, ok := obj.(*corev1.Event)
	if !ok || ev.InvolvedObject.Kind != "Pod" {
		return
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	uid := ev.InvolvedObject.UID
	switch ev.Reason {
	case "Pulling", "Pulled", "Failed", "BackOff":
		tr.images[uid] = append(tr.images[uid], imageEvent{Seen: time.Now().UTC(), Reason: ev.Reason,
			FieldPath: ev.InvolvedObject.FieldPath, Message: ev.Message, Count: ev.Count})
		return
	case "FailedMount":
	default:
		return
	}
	e := mountEvent{Seen: time.Now().UTC(), Message: ev.Message, Count: ev.Count, First: ev.FirstTimestamp, Last: ev.LastTimestamp}
	tr.mounts[uid] = append(tr.mounts[uid], e)
}

// failedMounts is the distinct messages of a pod's FailedMount events
// and their highest count, summed over messages.
func (tr *truth) failedMounts(uid types.UID) (messages []string, count int32) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	highest := map[string]int32{}
	for _, e := range tr.mounts[uid] {
		if _, ok := highest[e.Message]; !ok {
			messages = append(messages, e.Message)
		}
		highest[e.Message] = max(highest[e.Message], e.Count)
	}
	for _, n := range highest {
		count += n
	}
	return messages, count
}

// get is what the watch saw of a pod so far; nothing before it saw the
// pod's creation.
func (tr *truth) get(uid types.UID) podTruth {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if p := tr.pods[uid]; p != nil {
		c := *p
		// The watch goes on writing the pod's map: the copy gets its own.
		c.seen = maps.Clone(p.seen)
		return c
	}
	return podTruth{}
}

// creations is, per runtime class, the number of first sandboxes and the
// sum of their creation times (PodScheduled to the first sandbox ready),
// and the number of re-created sandboxes.
func (tr *truth) creations() (count map[string]uint64, sum map[string]float64, recreations map[string]int, ready int) {
	return tr.creationsBy(func(p *podTruth) string { return p.class })
}

// creationsBy is creations per the key of each pod (its runtime class,
// its storage class); the pods whose key is "" are left out.
func (tr *truth) creationsBy(key func(*podTruth) string) (count map[string]uint64, sum map[string]float64, recreations map[string]int, ready int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	count, sum, recreations = map[string]uint64{}, map[string]float64{}, map[string]int{}
	for _, p := range tr.pods {
		if p.scheduled.IsZero() || len(p.sandboxReady) == 0 {
			continue
		}
		ready++
		k := key(p)
		if k == "" {
			continue
		}
		count[k]++
		sum[k] += p.sandboxReady[0].Sub(p.scheduled).Seconds()
		recreations[k] += len(p.sandboxReady) - 1
	}
	return count, sum, recreations, ready
}

// creationsInMs is, per runtime class, the sum of the first sandboxes'
// creation times from the test's own receive times of PodScheduled and the
// first sandbox readiness: what podslo measures in milliseconds.
func (tr *truth) creationsInMs() map[string]float64 {
	return tr.creationsInMsBy(func(p *podTruth) string { return p.class })
}

// creationsInMsBy is creationsInMs keyed by key; a pod whose key is empty
// is left out.
func (tr *truth) creationsInMsBy(key func(*podTruth) string) map[string]float64 {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	sum := map[string]float64{}
	for _, p := range tr.pods {
		if d, ok := p.between(seenScheduled, seenSandboxReady); ok && key(p) != "" {
			sum[key(p)] += d
		}
	}
	return sum
}

// watchTolerance is the exporters' --watch-time-tolerance here: the widest.
const watchTolerance = 999 * time.Millisecond

// msTolerance is how far podslo's millisecond SLIs may be from the test's
// own watch, per pod: both receive the same API server's updates on this
// machine, so only their delivery jitter differs. Measured: under 5 ms
// (docs/reliability.md).
const msTolerance = 0.05

// msMedianTolerance and msWorstTolerance bound, over a burst of pods, the
// median and the largest difference between podslo's milliseconds and the
// test's own watch: two clients of one API server on a loaded machine
// (TestMillisecondsOnARealNode).
const (
	msMedianTolerance = 0.01
	msWorstTolerance  = 0.1
)

// assertSumsInMs checks podslo's sums against the test's, class by class,
// within msTolerance per observation.
func assertSumsInMs(t assert.TestingT, count map[string]uint64, want, got map[string]float64, what string) {
	for class, n := range count {
		assert.InDelta(t, want[class], got[class], msTolerance*float64(n), "%s: class %s", what, class)
	}
}

// waitCurrent waits until podslo at url says its pod watch is current:
// from then on it times what it receives to the millisecond.
func waitCurrent(t *testing.T, url string) {
	t.Helper()
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		f := scrape(ct, url)["podslo_informer_pods_watch_current"]
		require.NotNil(ct, f)
		assert.Equal(ct, 1.0, f.GetMetric()[0].GetGauge().GetValue())
	}, 30*time.Second, 50*time.Millisecond, "podslo's pod watch never current")
}

// snapshot is one distinct state of a pod as the watch saw it: what the
// kubelet wrote, in the order it arrived, for calibrating kwok's stages.
type snapshot struct {
	Seen              time.Time         `json:"seen"`
	Deleted           bool              `json:"deleted,omitempty"`
	DeletionTimestamp *metav1.Time      `json:"deletionTimestamp,omitempty"`
	GracePeriod       *int64            `json:"deletionGracePeriodSeconds,omitempty"`
	Phase             corev1.PodPhase   `json:"phase,omitempty"`
	Conditions        []condition       `json:"conditions,omitempty"`
	Containers        []containerStatus `json:"containerStatuses,omitempty"`
	// InitContainers are the init containers' and native sidecars'
	// statuses (recorded since 2026-11-28, for the stages' init
	// containers that run one after another).
	InitContainers []containerStatus `json:"initContainerStatuses,omitempty"`
}

type condition struct {
	Type               corev1.PodConditionType `json:"type"`
	Status             corev1.ConditionStatus  `json:"status"`
	Reason             string                  `json:"reason,omitempty"`
	LastTransitionTime metav1.Time             `json:"lastTransitionTime"`
}

type containerStatus struct {
	Name         string                `json:"name"`
	Ready        bool                  `json:"ready"`
	RestartCount int32                 `json:"restartCount"`
	State        corev1.ContainerState `json:"state"`
	LastState    corev1.ContainerState `json:"lastState"`
}

func snapshotOf(pod *corev1.Pod, deleted bool) snapshot {
	s := snapshot{Seen: time.Now().UTC(), Deleted: deleted, DeletionTimestamp: pod.DeletionTimestamp,
		GracePeriod: pod.DeletionGracePeriodSeconds, Phase: pod.Status.Phase}
	for _, c := range pod.Status.Conditions {
		s.Conditions = append(s.Conditions, condition{Type: c.Type, Status: c.Status, Reason: c.Reason, LastTransitionTime: c.LastTransitionTime})
	}
	sort.Slice(s.Conditions, func(i, j int) bool { return s.Conditions[i].Type < s.Conditions[j].Type })
	s.Containers = containerStatuses(pod.Status.ContainerStatuses)
	s.InitContainers = containerStatuses(pod.Status.InitContainerStatuses)
	return s
}

func containerStatuses(statuses []corev1.ContainerStatus) []containerStatus {
	var out []containerStatus
	for _, c := range statuses {
		cs := containerStatus{Name: c.Name, Ready: c.Ready, RestartCount: c.RestartCount, State: c.State, LastState: c.LastTerminationState}
		// The container ID changes nothing podslo reads.
		for _, st := range []*corev1.ContainerState{&cs.State, &cs.LastState} {
			if st.Terminated != nil {
				term := *st.Terminated
				term.ContainerID = ""
				st.Terminated = &term
			}
		}
		out = append(out, cs)
	}
	return out
}

// sameAs ignores when the state was seen: an update that changed only
// the resourceVersion or managed fields is no new state.
func (s snapshot) sameAs(o snapshot) bool {
	s.Seen, o.Seen = time.Time{}, time.Time{}
	a, _ := json.Marshal(s)
	b, _ := json.Marshal(o)
	return string(a) == string(b)
}

// writeFixture writes every pod's timeline and the test's actions to
// testdata/<test>.json.
func (tr *truth) writeFixture(t *testing.T) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	type podTimeline struct {
		Pod      string     `json:"pod"`
		Timeline []snapshot `json:"timeline"`
		// FailedMount is every distinct state of the pod's FailedMount
		// events, in the order seen.
		FailedMount []mountEvent `json:"failedMountEvents,omitempty"`
		// Images is every distinct state of the pod's image events.
		Images []imageEvent `json:"imageEvents,omitempty"`
	}
	out := struct {
		Test    string        `json:"test"`
		Kubelet string        `json:"kubelet"`
		Actions []action      `json:"actions"`
		Pods    []podTimeline `json:"pods"`
	}{Test: t.Name(), Actions: tr.actions}
	if v, err := testenv.KubernetesVersion(); err == nil {
		out.Kubelet = v
	}
	for uid, p := range tr.pods {
		out.Pods = append(out.Pods, podTimeline{Pod: p.name, Timeline: p.timeline, FailedMount: tr.mounts[uid], Images: tr.images[uid]})
	}
	sort.Slice(out.Pods, func(i, j int) bool { return out.Pods[i].Pod < out.Pods[j].Pod })
	b, err := json.MarshalIndent(out, "", "  ")
	require.NoError(t, err)
	path := filepath.Join("testdata", strings.ReplaceAll(t.Name(), "/", "_")+".json")
	require.NoError(t, os.MkdirAll("testdata", 0o755))
	require.NoError(t, os.WriteFile(path, append(b, '\n'), 0o644))
	t.Logf("wrote %s", path)
}

// kubeletMinor is the minor version of the node's kubelet (37 for
// v1.37.2): where the kubelet's behaviour changed between versions, the
// test's ground truth follows the one it runs.
func kubeletMinor(t *testing.T) int {
	t.Helper()
	v, err := testenv.KubernetesVersion()
	require.NoError(t, err)
	var major, minor int
	_, err = fmt.Sscanf(v, "v%d.%d.", &major, &minor)
	require.NoError(t, err, "kubelet version %q", v)
	require.Equal(t, 1, major, "kubelet version %q", v)
	return minor
}

// podStatus is a pod's status, for a failure message.
func podStatus(t *testing.T, node *realnode.Node, name string) corev1.PodStatus {
	p, err := node.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Logf("get pod %s: %v", name, err)
		return corev1.PodStatus{}
	}
	return p.Status
}

// podOption changes a test pod before it is created.
type podOption func(*corev1.Pod)

// inClass runs the pod in RuntimeClass class.
func inClass(class string) podOption {
	return func(p *corev1.Pod) { p.Spec.RuntimeClassName = &class }
}

// runOnce makes the pod run the sleeper with args once (restartPolicy Never).
func runOnce(args ...string) podOption {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Args = args
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
	}
}

// ignoringSIGTERM makes the container outlive SIGTERM: only the kubelet's
// SIGKILL at the end of grace seconds ends it.
func ignoringSIGTERM(grace int64) podOption {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Args = []string{"ignore-term"}
		p.Spec.TerminationGracePeriodSeconds = &grace
	}
}

// withPreStop gives the container a preStop exec hook that takes d.
func withPreStop(d time.Duration) podOption {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{
			Exec: &corev1.ExecAction{Command: []string{"/pause", "sleep", d.String()}},
		}}
	}
}

// withVolume mounts volume v in the container at /mnt/<its name>.
func withVolume(v corev1.Volume) podOption {
	return func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, v)
		c := &p.Spec.Containers[0]
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: v.Name, MountPath: "/mnt/" + v.Name})
	}
}

// createPod creates a pod of the sleeper image.
func (s *suite) createPod(name string, opts ...podOption) *corev1.Pod {
	s.t.Helper()
	no := false
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: &no,
			Containers:                   []corev1.Container{{Name: "app", Image: realnode.Image, ImagePullPolicy: corev1.PullNever}},
		},
	}
	for _, o := range opts {
		o(pod)
	}
	created, err := s.node.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
	require.NoError(s.t, err)
	s.tr.act(name, "create")
	return created
}

// deletePod deletes a pod with a grace period of grace seconds.
func (s *suite) deletePod(name string, grace int64) {
	s.t.Helper()
	s.tr.act(name, fmt.Sprintf("delete, grace %d s", grace))
	require.NoError(s.t, s.node.Client.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &grace}))
}

// waitRunning waits until every pod's sandbox is ready and its container
// runs, and then until a second has passed since both: a sandbox killed
// within the second of its readiness or of its container's start would
// leave the same one-second times, and neither the test nor podslo could
// tell the new from the old.
func (s *suite) waitRunning(uids ...types.UID) {
	s.t.Helper()
	var last time.Time
	require.Eventually(s.t, func() bool {
		for _, uid := range uids {
			p := s.tr.get(uid)
			if len(p.sandboxReady) == 0 || p.started.IsZero() {
				return false
			}
			for _, at := range []time.Time{p.sandboxReady[len(p.sandboxReady)-1], p.started} {
				if at.After(last) {
					last = at
				}
			}
		}
		return true
	}, 2*time.Minute, 100*time.Millisecond, "the pods never all ran")
	require.Eventually(s.t, func() bool { return time.Now().After(last.Add(time.Second)) }, 3*time.Second, 10*time.Millisecond)
}

// killSandbox kills a pod's sandbox through containerd and waits until the
// kubelet re-created it and restarted the container in it.
func (s *suite) killSandbox(uid types.UID) {
	s.t.Helper()
	before := s.tr.get(uid)
	s.tr.act(before.name, "kill the sandbox through containerd")
	require.NoError(s.t, s.node.KillSandbox(string(uid)))
	if !assertEventually(s.t, func() bool {
		p := s.tr.get(uid)
		return len(p.sandboxReady) == len(before.sandboxReady)+1 && p.restarts == before.restarts+1 && !p.started.IsZero()
	}, 2*time.Minute) {
		s.t.Fatalf("the killed sandbox of %s never ran its container again; ready at %v; the pod: %+v", before.name,
			s.tr.get(uid).sandboxReady, podStatus(s.t, s.node, before.name))
	}
}

// assertEventually is require.Eventually's condition without the failure,
// so that the caller can say what it saw.
func assertEventually(t *testing.T, cond func() bool, within time.Duration) bool {
	deadline := time.Now().Add(within)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for range tick.C {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
	return false
}

func scrape(t require.TestingT, url string) map[string]*dto.MetricFamily {
	resp, err := http.Get(url + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	require.NoError(t, err)
	return fams
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// histogramByClass adds up a histogram's series per runtime_class.
func histogramByClass(f *dto.MetricFamily) (map[string]uint64, map[string]float64) {
	return histogramBy(f, "runtime_class")
}

// histogramBy adds up a histogram's non-empty series per value of a label.
func histogramBy(f *dto.MetricFamily, name string) (map[string]uint64, map[string]float64) {
	count, sum := map[string]uint64{}, map[string]float64{}
	for _, m := range f.GetMetric() {
		if m.GetHistogram().GetSampleCount() == 0 {
			continue
		}
		v := label(m, name)
		count[v] += m.GetHistogram().GetSampleCount()
		sum[v] += m.GetHistogram().GetSampleSum()
	}
	return count, sum
}

// histogramTotal adds up all of a histogram's series.
func histogramTotal(f *dto.MetricFamily) (count uint64, sum float64) {
	for _, m := range f.GetMetric() {
		count += m.GetHistogram().GetSampleCount()
		sum += m.GetHistogram().GetSampleSum()
	}
	return count, sum
}

// counterByClass adds up a counter's non-zero series per runtime_class.
func counterByClass(f *dto.MetricFamily) map[string]float64 {
	return counterBy(f, "runtime_class")
}

// counterBy adds up a counter's non-zero series per value of the labels
// named, joined by ",".
func counterBy(f *dto.MetricFamily, labels ...string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range f.GetMetric() {
		if v := m.GetCounter().GetValue(); v != 0 {
			var key []string
			for _, l := range labels {
				key = append(key, label(m, l))
			}
			out[strings.Join(key, ",")] += v
		}
	}
	return out
}

// gaugeBy adds up a gauge's non-zero series per value of the labels named,
// joined by ",".
func gaugeBy(f *dto.MetricFamily, labels ...string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range f.GetMetric() {
		if v := m.GetGauge().GetValue(); v != 0 {
			var key []string
			for _, l := range labels {
				key = append(key, label(m, l))
			}
			out[strings.Join(key, ",")] += v
		}
	}
	return out
}

// perPod is a per-pod gauge's value per pod name, zeros included.
func perPod(f *dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for _, m := range f.GetMetric() {
		out[label(m, "pod")] = m.GetGauge().GetValue()
	}
	return out
}

// counterTotal adds up all of a counter's series; an absent family is 0.
func counterTotal(f *dto.MetricFamily) float64 {
	var v float64
	for _, m := range f.GetMetric() {
		v += m.GetCounter().GetValue()
	}
	return v
}

// kubeletSandboxRuns is the kubelet's own count of RunPodSandbox calls.
func kubeletSandboxRuns(t require.TestingT, node *realnode.Node) uint64 {
	raw, err := node.KubeletMetrics(context.Background())
	require.NoError(t, err)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(raw)))
	require.NoError(t, err)
	f := fams["kubelet_runtime_operations_duration_seconds"]
	require.NotNil(t, f, "kubelet_runtime_operations_duration_seconds not in the kubelet's /metrics")
	for _, m := range f.GetMetric() {
		if label(m, "operation_type") == "run_podsandbox" {
			return m.GetHistogram().GetSampleCount()
		}
	}
	require.Fail(t, fmt.Sprintf("no run_podsandbox series in %d", len(f.GetMetric())))
	return 0
}
