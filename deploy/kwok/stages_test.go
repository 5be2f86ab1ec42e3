package kwok_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	nodev1 "k8s.io/api/node/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/podslo/podslo/internal/testenv"
)

// The real kubelet's sequences, recorded by e2e/realnode (-args -record).
const fixtures = "../../e2e/realnode/testdata"

const nodeName = "kwok-node"

// The pod annotations pod-stages.yaml reads (README.md).
const (
	annotationCrash      = "kwok.podslo.io/sandbox-crash"
	annotationIgnoreTerm = "kwok.podslo.io/ignore-sigterm"
	annotationPreStop    = "kwok.podslo.io/prestop"
	annotationExitAfter  = "kwok.podslo.io/exit-after"
	annotationCrashAfter = "kwok.podslo.io/crash-after"
	annotationUnready    = "kwok.podslo.io/unready"
	annotationInitRun    = "kwok.podslo.io/init-run"
	annotationBackoff    = "kwok.podslo.io/pull-backoff"
)

// scenarios gives each pod of the fixtures its kwok equivalent: what the
// real test's pod spec made the real kubelet do, said in the annotations
// the stages read. Every pod of every fixture must have an entry, so that
// a new fixture cannot pass unreplayed.
var scenarios = map[string]map[string]podOption{
	"TestSandboxCreationOnARealNode": {
		"runc-0": inClass("runc"), "runc-1": inClass("runc"),
		"plain-0": nil, "plain-1": nil, "plain-2": nil,
		// runOnce("apiserver"): restartPolicy Never, a container that
		// reaches the API server and exits 0 within its first second.
		"apiserver-client": exitsAfter(0),
	},
	"TestFreshStateAfterRecreations": {"crashed-0": nil, "crashed-1": nil, "crashed-2": nil},
	"TestExporterSIGKILLedOnARealNode": {
		"before-0": nil, "before-1": nil, "during-0": nil, "during-1": nil,
	},
	"TestTerminationsOnARealNode": {
		"prompt": nil,
		// withPreStop(2 * time.Second)
		"prestop": annotated(annotationPreStop, "2"),
		// ignoringSIGTERM(10), ignoringSIGTERM(2)
		"shortened":  ignoringSIGTERM(10),
		"forced":     nil,
		"killed-0-0": ignoringSIGTERM(2), "killed-0-1": ignoringSIGTERM(2), "killed-0-2": ignoringSIGTERM(2),
	},
	// The claims are left out: kwok mounts nothing, and the real kubelet's
	// sequence with a claim is the one without (testdata/README.md).
	"TestPVCBackedPodsOnARealNode": {"hostpath-0": nil, "hostpath-1": nil, "local-0": nil, "plain": nil},
	"TestPodShapesOnARealNode": {
		// withInit("setup", "sleep", "2s"), withInit("migrate", "sleep",
		// "1s"), withSidecar("proxy")
		"init-sidecar": withInitAndSidecar,
		// withLateContainer: a second container whose image the real
		// test pushed after the kubelet's first failed pull.
		"late-image": withLateImage,
		// withGate: created gated, bound once the gate is lifted.
		"gated":    withGate,
		"hostpath": nil,
		// withArgs("sleep", "8s") under restartPolicy Always: exits 0
		// after 8 s, restarted at once the first time, exits again 8 s
		// later (the test ended within the back-off that follows).
		"crashloop": annotated(annotationCrashAfter, "8,8"),
		// withFailingReadiness: a probe every second, failing 6 s after
		// the start for 4 s.
		"flap": flapping(6, 4),
	},
}

// notReplayed are the fixtures the stages do not imitate at all, and why:
// each is listed as a difference in both READMEs.
var notReplayed = map[string]string{
	"TestFailedMountOnARealNode": "kwok has no volume manager: the kubelet's FailedMount events and retries, and a sandbox that waits for a missing Secret or ConfigMap",
}

// knownDifferences are what the stages do not imitate in these fixtures,
// each checked to still differ (so that a fix shows here and in README.md
// and e2e/realnode/testdata/README.md). The sequences themselves are equal.
var knownDifferences = map[string]func(t *testing.T, real, kwok []state){
	// The real kubelet keeps the first grace period when a second delete
	// shortens it: its SIGKILL came at the first request + 10 s. kwok
	// reads only the current deletionTimestamp, which the second delete
	// moved, and kills at once.
	"TestTerminationsOnARealNode/shortened": func(t *testing.T, real, kwok []state) {
		realKill, realShortened := firstWith(real, "phase=Failed "), firstWith(real, "grace=1 ")
		kwokKill, kwokShortened := firstWith(kwok, "phase=Failed "), firstWith(kwok, "grace=1 ")
		require.True(t, realKill != nil && realShortened != nil && kwokKill != nil && kwokShortened != nil)
		assert.Greater(t, realKill.seen.Sub(realShortened.seen), 5*time.Second, "the real kubelet killed at the first grace's end")
		assert.Less(t, kwokKill.seen.Sub(kwokShortened.seen), 5*time.Second,
			"kwok now keeps the first grace period: remove this known difference from the test and the READMEs")
	},
}

type podOption func(*corev1.Pod)

func inClass(class string) podOption {
	return func(p *corev1.Pod) { p.Spec.RuntimeClassName = &class }
}

func annotated(key, value string) podOption {
	return func(p *corev1.Pod) { p.Annotations[key] = value }
}

func ignoringSIGTERM(grace int64) podOption {
	return func(p *corev1.Pod) {
		p.Spec.TerminationGracePeriodSeconds = &grace
		p.Annotations[annotationIgnoreTerm] = "true"
	}
}

func exitsAfter(seconds int) podOption {
	return func(p *corev1.Pod) {
		p.Spec.RestartPolicy = corev1.RestartPolicyNever
		p.Annotations[annotationExitAfter] = strconv.Itoa(seconds)
	}
}

func withInitAndSidecar(p *corev1.Pod) {
	always := corev1.ContainerRestartPolicyAlways
	p.Spec.InitContainers = []corev1.Container{
		{Name: "setup", Image: "registry.k8s.io/pause:3.10"},
		{Name: "migrate", Image: "registry.k8s.io/pause:3.10"},
		{Name: "proxy", Image: "registry.k8s.io/pause:3.10", RestartPolicy: &always},
	}
	p.Annotations[annotationInitRun] = "2,1"
}

func withLateImage(p *corev1.Pod) {
	p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: "late", Image: "registry.k8s.io/pause:3.10"})
	p.Annotations[annotationBackoff] = "late"
	p.Annotations[annotationPulls] = "0,0,39"
}

func withGate(p *corev1.Pod) {
	p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "podslo.test/hold"}}
}

// flapping is a readiness probe every second that fails after seconds
// for more seconds, as the annotation tells the stages.
func flapping(after, more int) podOption {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
			ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}},
			PeriodSeconds: 1, FailureThreshold: 1, SuccessThreshold: 1, TimeoutSeconds: 1,
		}
		p.Annotations[annotationUnready] = fmt.Sprintf("%d,%d", after, more)
	}
}

// fixture is e2e/realnode's record of one test: its actions and every
// distinct state of each pod, as its watch saw them.
type fixture struct {
	Test    string `json:"test"`
	Actions []struct {
		At   time.Time `json:"at"`
		Pod  string    `json:"pod"`
		What string    `json:"what"`
	} `json:"actions"`
	Pods []struct {
		Pod      string     `json:"pod"`
		Timeline []snapshot `json:"timeline"`
	} `json:"pods"`
}

type snapshot struct {
	Seen time.Time `json:"seen"`
	// UID tells apart pods of one name (the fixtures leave it out).
	UID               types.UID    `json:"uid,omitempty"`
	Deleted           bool         `json:"deleted,omitempty"`
	DeletionTimestamp *metav1.Time `json:"deletionTimestamp,omitempty"`
	GracePeriod       *int64       `json:"deletionGracePeriodSeconds,omitempty"`
	Phase             string       `json:"phase,omitempty"`
	Conditions        []struct {
		Type   string `json:"type"`
		Status string `json:"status"`
		Reason string `json:"reason,omitempty"`
	} `json:"conditions,omitempty"`
	Containers     []containerStatus `json:"containerStatuses,omitempty"`
	InitContainers []containerStatus `json:"initContainerStatuses,omitempty"`
}

type containerStatus struct {
	Name         string                `json:"name"`
	Ready        bool                  `json:"ready"`
	RestartCount int32                 `json:"restartCount"`
	State        corev1.ContainerState `json:"state"`
	LastState    corev1.ContainerState `json:"lastState"`
}

// state is a snapshot without its times: what the sequences compare.
type state struct {
	text string
	seen time.Time
}

// normalize keeps what podslo and the comparison read of a state: phase,
// each condition's status and reason, each container's state kind, exit
// code and reason, readiness, restart count and last state, the deletion's
// grace period and the deletion itself. Times are left out: kwok's delays
// are configured, not the real kubelet's.
func normalize(s snapshot) string {
	var b strings.Builder
	fmt.Fprintf(&b, "phase=%s", s.Phase)
	conds := append(s.Conditions[:0:0], s.Conditions...)
	sort.Slice(conds, func(i, j int) bool { return conds[i].Type < conds[j].Type })
	for _, c := range conds {
		fmt.Fprintf(&b, " %s=%s", c.Type, c.Status)
		if c.Reason != "" {
			fmt.Fprintf(&b, "/%s", c.Reason)
		}
	}
	for _, c := range s.Containers {
		fmt.Fprintf(&b, " %s:[%s ready=%v restarts=%d", c.Name, containerState(c.State), c.Ready, c.RestartCount)
		if last := containerState(c.LastState); last != "" {
			fmt.Fprintf(&b, " last=%s", last)
		}
		b.WriteString("]")
	}
	for _, c := range s.InitContainers {
		fmt.Fprintf(&b, " init/%s:[%s ready=%v restarts=%d]", c.Name, containerState(c.State), c.Ready, c.RestartCount)
	}
	if s.DeletionTimestamp != nil {
		grace := int64(-1)
		if s.GracePeriod != nil {
			grace = *s.GracePeriod
		}
		fmt.Fprintf(&b, " deleting:grace=%d", grace)
	}
	if s.Deleted {
		b.WriteString(" deleted")
	}
	return b.String()
}

func containerState(s corev1.ContainerState) string {
	switch {
	case s.Running != nil:
		return "running"
	case s.Waiting != nil:
		return "waiting/" + s.Waiting.Reason
	case s.Terminated != nil:
		return fmt.Sprintf("terminated/%d/%s", s.Terminated.ExitCode, s.Terminated.Reason)
	}
	return ""
}

// states turns a timeline into its distinct normalized states, each seen
// when it first appeared.
func states(timeline []snapshot) []state {
	var out []state
	for _, s := range timeline {
		text := normalize(s)
		if n := len(out); n == 0 || out[n-1].text != text {
			out = append(out, state{text: text, seen: s.Seen})
		}
	}
	return out
}

func texts(ss []state) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.text
	}
	return out
}

// firstWith is the first state whose text holds part, a whole word when
// part ends with a space.
func firstWith(ss []state, part string) *state {
	for i := range ss {
		if strings.Contains(ss[i].text+" ", part) {
			return &ss[i]
		}
	}
	return nil
}

func snapshotOf(pod *corev1.Pod, deleted bool) snapshot {
	s := snapshot{Seen: time.Now(), UID: pod.UID, Deleted: deleted, DeletionTimestamp: pod.DeletionTimestamp,
		GracePeriod: pod.DeletionGracePeriodSeconds, Phase: string(pod.Status.Phase)}
	for _, c := range pod.Status.Conditions {
		s.Conditions = append(s.Conditions, struct {
			Type   string `json:"type"`
			Status string `json:"status"`
			Reason string `json:"reason,omitempty"`
		}{string(c.Type), string(c.Status), c.Reason})
	}
	for _, c := range pod.Status.ContainerStatuses {
		s.Containers = append(s.Containers, containerStatus{c.Name, c.Ready, c.RestartCount, c.State, c.LastTerminationState})
	}
	for _, c := range pod.Status.InitContainerStatuses {
		s.InitContainers = append(s.InitContainers, containerStatus{c.Name, c.Ready, c.RestartCount, c.State, c.LastTerminationState})
	}
	return s
}

// recorder is the test's own watch of the kwok pods, by namespace/name.
type recorder struct {
	mu   sync.Mutex
	pods map[string][]snapshot
	last map[string]*corev1.Pod
}

func (r *recorder) observe(obj any, deleted bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	key := pod.Namespace + "/" + pod.Name
	r.pods[key] = append(r.pods[key], snapshotOf(pod, deleted))
	r.last[key] = pod
}

func (r *recorder) states(key string) []state {
	r.mu.Lock()
	defer r.mu.Unlock()
	return states(r.pods[key])
}

func (r *recorder) pod(key string) *corev1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last[key]
}

// startKwok runs etcd, kube-apiserver and kwok with pod-stages.yaml on
// one fake node, and watches the pods.
func startKwok(t *testing.T) (kubernetes.Interface, *recorder) {
	env := testenv.Start(t)
	runKwok(t, env, env.Kubeconfig)
	return env.Client, watchPods(t, env.Client)
}

// runKwok creates the fake node and the runc RuntimeClass, and runs kwok
// with pod-stages.yaml, reaching the API server through kubeconfig, until
// it made the node Ready.
func runKwok(t *testing.T, env *testenv.Env, kubeconfig string) {
	c := env.Client
	ctx := context.Background()
	_, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: nodeName, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
	}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = c.NodeV1().RuntimeClasses().Create(ctx, &nodev1.RuntimeClass{ObjectMeta: metav1.ObjectMeta{Name: "runc"}, Handler: "runc"}, metav1.CreateOptions{})
	require.NoError(t, err)

	cmd := exec.Command(kwokBinary(t), "--kubeconfig", kubeconfig,
		"--config", "pod-stages.yaml", "--config", "node-stages.yaml",
		"--manage-single-node", nodeName)
	testenv.StartCommand(t, "kwok", cmd)
	// kwok plays no pod stage on a node it has not taken up: wait until
	// node-stages.yaml made it Ready.
	require.Eventually(t, func() bool {
		n, err := c.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	}, time.Minute, 50*time.Millisecond, "kwok never made its node Ready")
}

// watchPods records every pod's states, by namespace/name.
func watchPods(t *testing.T, c kubernetes.Interface) *recorder {
	rec := &recorder{pods: map[string][]snapshot{}, last: map[string]*corev1.Pod{}}
	factory := informers.NewSharedInformerFactory(c, 0)
	inf := factory.Core().V1().Pods().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { rec.observe(obj, false) },
		UpdateFunc: func(_, obj any) { rec.observe(obj, false) },
		DeleteFunc: func(obj any) { rec.observe(obj, true) },
	})
	require.NoError(t, err)
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	factory.Start(stop)
	require.True(t, cache.WaitForCacheSync(stop, inf.HasSynced))
	return rec
}

// kwokBinary is $PODSLO_KWOKBIN/kwok, or kwok-<version of hack/kwok/go.mod>
// beside the control-plane binaries, as make kwokbin builds it. A missing
// binary fails the test: CI must never pass by skipping it.
func kwokBinary(t *testing.T) string {
	dir := os.Getenv("PODSLO_KWOKBIN")
	if dir == "" {
		bin, err := testenv.BinDir()
		require.NoError(t, err)
		mod, err := os.ReadFile(filepath.Join("..", "..", "hack", "kwok", "go.mod"))
		require.NoError(t, err)
		m := regexp.MustCompile(`(?m)^\s*(?:require\s+)?sigs\.k8s\.io/kwok\s+(v\S+)`).FindSubmatch(mod)
		require.NotNil(t, m, "sigs.k8s.io/kwok not required in hack/kwok/go.mod")
		dir = filepath.Join(bin, "kwok-"+string(m[1]))
	}
	path := filepath.Join(dir, "kwok")
	_, err := os.Stat(path)
	require.NoError(t, err, "kwok missing (run `make kwokbin`)")
	return path
}

func loadFixtures(t *testing.T) []fixture {
	files, err := filepath.Glob(filepath.Join(fixtures, "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	var out []fixture
	for _, f := range files {
		raw, err := os.ReadFile(f)
		require.NoError(t, err)
		var fx fixture
		require.NoError(t, json.Unmarshal(raw, &fx), f)
		out = append(out, fx)
	}
	return out
}

// TestStagesWriteTheRealKubeletsSequences replays every pod of the real
// node's fixtures on kwok with pod-stages.yaml: the same pod created and
// bound, the same deletions, and a sandbox crash (the stages' annotation)
// where the real test killed the sandbox through containerd, each once the
// pod reached the state the real pod was in. The sequence of distinct
// states kwok writes (phase, conditions, containers, deletion) must equal
// the real kubelet's, state by state: the same changes, grouped in the same
// updates. Only the times differ, kwok's being configured.
func TestStagesWriteTheRealKubeletsSequences(t *testing.T) {
	fxs := loadFixtures(t)
	c, rec := startKwok(t)
	for _, fx := range fxs {
		ns := strings.ToLower(fx.Test)
		_, err := c.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
		if why, ok := notReplayed[fx.Test]; ok {
			t.Logf("%s: not replayed: %s", fx.Test, why)
			continue
		}
		opts, ok := scenarios[fx.Test]
		require.True(t, ok, "fixture %s has no scenarios in this test", fx.Test)
		for _, p := range fx.Pods {
			opt, ok := opts[p.Pod]
			require.True(t, ok, "pod %s of %s has no kwok scenario in this test", p.Pod, fx.Test)
			real := states(p.Timeline)
			var actions []action
			for _, a := range fx.Actions {
				switch {
				case a.Pod == "":
					// "SIGKILL podslo": the exporter's, not the pods'.
					require.Equal(t, "SIGKILL podslo", a.What, "an action on no pod in %s", fx.Test)
				case a.Pod == p.Pod:
					act := action{what: a.What}
					for _, s := range real {
						if s.seen.Before(a.At) {
							act.after++
						}
					}
					actions = append(actions, act)
				}
			}
			name := fx.Test + "/" + p.Pod
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				kwok := replay(t, c, rec, ns, p.Pod, opt, real, actions)
				if check, ok := knownDifferences[name]; ok {
					check(t, real, kwok)
				}
			})
		}
	}
}

// action is a fixture's action on a pod, done once the kwok pod went
// through as many states as the real one had before it.
type action struct {
	what  string
	after int
}

var deleteAction = regexp.MustCompile(`^delete, grace (\d+) s$`)

func replay(t *testing.T, c kubernetes.Interface, rec *recorder, ns, name string, opt podOption, real []state, actions []action) []state {
	ctx := context.Background()
	key := ns + "/" + name
	// reached waits until the kwok pod went through n states, and fails at
	// once if they already differ from the real ones.
	reached := func(n int) []state {
		var got []state
		ok := assert.Eventually(t, func() bool {
			got = rec.states(key)
			if len(got) > len(real) || !assert.ObjectsAreEqual(texts(real[:min(len(got), len(real))]), texts(got[:min(len(got), len(real))])) {
				return true
			}
			return len(got) >= n
		}, time.Minute, 20*time.Millisecond)
		require.True(t, ok, "kwok's pod went through %d of %d states:\n%s", len(got), n, strings.Join(texts(got), "\n"))
		require.Equal(t, texts(real[:min(len(got), len(real))]), texts(got[:min(len(got), len(real))]), "kwok's sequence differs from the real kubelet's")
		return got
	}
	for _, a := range actions {
		if a.what != "create" {
			reached(a.after)
		}
		switch m := deleteAction.FindStringSubmatch(a.what); {
		case a.what == "create":
			createAndBind(t, c, ns, name, opt)
		case a.what == "push the late image":
			// The stages' back-off (kwok.podslo.io/pull-backoff) stands
			// for the kubelet's retry once the image is there.
		case a.what == "kill the sandbox through containerd":
			crash(t, c, rec, ns, name)
		case a.what == "lift the scheduling gate":
			_, err := c.CoreV1().Pods(ns).Patch(ctx, name, types.JSONPatchType, []byte(`[{"op":"remove","path":"/spec/schedulingGates"}]`), metav1.PatchOptions{})
			require.NoError(t, err)
			bind(t, c, ns, name, rec.pod(key).UID)
		case m != nil:
			grace, _ := strconv.ParseInt(m[1], 10, 64)
			redelete(t, rec, key, grace)
			require.NoError(t, c.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace}))
		default:
			t.Fatalf("action %q: not known to this test", a.what)
		}
	}
	got := reached(len(real))
	require.Equal(t, texts(real), texts(got))
	return got
}

// createAndBind creates the pod unbound, as the real test did, and binds it
// as kube-scheduler does (the binding writes PodScheduled).
func createAndBind(t *testing.T, c kubernetes.Interface, ns, name string, opt podOption) {
	ctx := context.Background()
	no := false
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{}},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: &no,
			Containers:                   []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
	if opt != nil {
		opt(pod)
	}
	created, err := c.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	require.NoError(t, err)
	if len(pod.Spec.SchedulingGates) == 0 {
		// A gated pod is bound when its gate is lifted, as the scheduler
		// would.
		bind(t, c, ns, name, created.UID)
	}
}

// bind binds the pod to the kwok node, as kube-scheduler does (the binding
// writes PodScheduled).
func bind(t *testing.T, c kubernetes.Interface, ns, name string, uid types.UID) {
	require.NoError(t, c.CoreV1().Pods(ns).Bind(context.Background(), &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: uid},
		Target:     corev1.ObjectReference{Kind: "Node", Name: nodeName},
	}, metav1.CreateOptions{}))
}

// crash adds one entry to the pod's sandbox-crash annotation: one more
// crash, at once (Ready + 0 is past), or in the second after the
// containers' newest start if that is later, as the real test waited a
// second after it.
func crash(t *testing.T, c kubernetes.Interface, rec *recorder, ns, name string) {
	pod := rec.pod(ns + "/" + name)
	require.NotNil(t, pod)
	var at []string
	if v := pod.Annotations[annotationCrash]; v != "" {
		at = strings.Split(v, ",")
	}
	at = append(at, "0")
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{annotationCrash: strings.Join(at, ",")}}})
	require.NoError(t, err)
	_, err = c.CoreV1().Pods(ns).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{})
	require.NoError(t, err)
}

// redelete prepares a second delete of a pod being deleted: the real test
// made it when the first request + its new grace was past already, so the
// API server clamped deletionTimestamp to now and the grace to 1 s. Made
// earlier, it would keep the new grace: wait until that time is past.
func redelete(t *testing.T, rec *recorder, key string, grace int64) {
	pod := rec.pod(key)
	if pod == nil || pod.DeletionTimestamp == nil || pod.DeletionGracePeriodSeconds == nil {
		return
	}
	clampFrom := pod.DeletionTimestamp.Add(time.Duration(grace-*pod.DeletionGracePeriodSeconds) * time.Second)
	require.Eventually(t, func() bool { return time.Now().After(clampFrom.Add(100 * time.Millisecond)) },
		time.Duration(grace+2)*time.Second, 20*time.Millisecond)
}
