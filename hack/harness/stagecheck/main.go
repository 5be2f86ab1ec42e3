// Command stagecheck runs pods of every class through podslo's kwok stages
// (deploy/kwok/pod-stages.yaml) on a kwok cluster and compares the
// latencies their conditions show with the values deploy/kwok/README.md
// documents. It prints one line per pod and per check and exits 1 when a
// measured value is outside the configured range. It leaves its node,
// namespace, PersistentVolumes and classes behind: run it on a throwaway
// cluster (hack/kwok/cluster.sh up).
//
//	go run ./stagecheck --kubeconfig "$KWOK_WORKDIR/clusters/podslo/kubeconfig.yaml"
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/podslo/podslo/deploy/kwok"
)

// A case is a kind of pod and the latencies deploy/kwok/README.md gives
// it, as [min, max] whole seconds as the conditions show them.
type kase struct {
	name        string
	runtime     string // spec.runtimeClassName, "" for none
	pvc         bool
	annotations map[string]string
	initC       bool
	sandbox     [2]int64 // PodScheduled -> first PodReadyToStartContainers=True
	termination [2]int64 // deletion request -> PodReadyToStartContainers=False
	crash       bool     // the sandbox is lost after Ready and re-created
}

var (
	containers = [2]int64{1, 1} // sandbox (or Initialized) -> newest container start
	readiness  = [2]int64{2, 2} // newest container start -> Ready (the probe's initial delay)
	crashAfter = [2]int64{1, 1} // Ready -> sandbox False (annotation "1")
	recreate   = [2]int64{0, 1} // sandbox False -> sandbox True again (at once)
)

func cases() []kase {
	return []kase{
		{name: "runc", runtime: "runc", sandbox: [2]int64{1, 1}, termination: [2]int64{1, 1}},
		{name: "none", sandbox: [2]int64{1, 1}, termination: [2]int64{1, 1}},
		{name: "kata", runtime: "kata", annotations: map[string]string{"kwok.podslo.io/sandbox": "normal"}, sandbox: [2]int64{3, 4}, termination: [2]int64{3, 3}},
		{name: "kata-slow", runtime: "kata", annotations: map[string]string{"kwok.podslo.io/sandbox": "slow"}, sandbox: [2]int64{10, 14}, termination: [2]int64{3, 3}},
		{name: "runc-pvc", runtime: "runc", pvc: true, sandbox: [2]int64{3, 3}, termination: [2]int64{2, 2}},
		{name: "kata-pvc", runtime: "kata", pvc: true, annotations: map[string]string{"kwok.podslo.io/sandbox": "normal"}, sandbox: [2]int64{5, 6}, termination: [2]int64{4, 4}},
		{name: "runc-init", runtime: "runc", initC: true, sandbox: [2]int64{1, 1}, termination: [2]int64{1, 1}},
		{name: "runc-crash", runtime: "runc", annotations: map[string]string{"kwok.podslo.io/sandbox-crash": "1"}, crash: true, sandbox: [2]int64{1, 1}, termination: [2]int64{1, 1}},
	}
}

const (
	namespace = "stagecheck"
	node      = "kwok-node-0"
)

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the kwok cluster")
	classes := flag.String("classes", "../../deploy/kwok/classes.yaml", "RuntimeClasses and StorageClass to create")
	perCase := flag.Int("n", 3, "pods per case")
	timeout := flag.Duration("timeout", 3*time.Minute, "give up after")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := run(ctx, *kubeconfig, *classes, *perCase); err != nil {
		fmt.Fprintln(os.Stderr, "stagecheck:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, classes string, n int) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 100, 200
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := setUp(ctx, cs, classes); err != nil {
		return err
	}

	w, err := cs.CoreV1().Pods(namespace).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	defer w.Stop()
	pods := map[string]*history{}
	for _, c := range cases() {
		for i := range n {
			name := fmt.Sprintf("%s-%d", c.name, i)
			pods[name] = &history{kase: c}
			if err := createPod(ctx, cs, name, c); err != nil {
				return err
			}
		}
	}
	fmt.Printf("created %d pods\n", len(pods))
	if err := follow(ctx, w, pods, func() bool {
		for _, h := range pods {
			if !h.done() {
				return false
			}
		}
		return true
	}); err != nil {
		return err
	}
	fmt.Println("all pods ready; deleting them")
	for name := range pods {
		if err := cs.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			return err
		}
	}
	if err := follow(ctx, w, pods, func() bool {
		for _, h := range pods {
			if !h.gone {
				return false
			}
		}
		return true
	}); err != nil {
		return err
	}
	return report(pods)
}

func setUp(ctx context.Context, cs *kubernetes.Clientset, classes string) error {
	if err := kwok.ApplyClasses(ctx, cs, classes); err != nil {
		return err
	}
	_, err := cs.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:        node,
		Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
		Labels:      map[string]string{"type": "kwok"},
	}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	// Pods are refused until the node is Ready (scheduling) and the
	// namespace's default ServiceAccount exists (admission).
	for {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		_, saErr := cs.CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metav1.GetOptions{})
		if cond(n.Status.Conditions, corev1.NodeReady) && saErr == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s or ServiceAccount %s/default not ready: %w", node, namespace, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func cond(cs []corev1.NodeCondition, t corev1.NodeConditionType) bool {
	for _, c := range cs {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func createPod(ctx context.Context, cs *kubernetes.Clientset, name string, c kase) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Annotations: c.annotations, Labels: map[string]string{"case": c.name}},
		Spec: corev1.PodSpec{
			// The stages make a container with a readiness probe ready its
			// initialDelaySeconds after its start (readiness below), one
			// without at its start.
			Containers: []corev1.Container{{Name: "app", Image: "fake", ReadinessProbe: &corev1.Probe{
				ProbeHandler:        corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}},
				InitialDelaySeconds: int32(readiness[0]),
			}}, {Name: "sidecar", Image: "fake"}},
		},
	}
	if c.runtime != "" {
		pod.Spec.RuntimeClassName = &c.runtime
	}
	if c.initC {
		pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "fake"}}
	}
	if c.pvc {
		if err := createVolume(ctx, cs, name); err != nil {
			return err
		}
		pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name},
		}}}
	}
	_, err := cs.CoreV1().Pods(namespace).Create(ctx, pod, metav1.CreateOptions{})
	return err
}

// createVolume creates a PersistentVolume bound in advance to a claim of
// the same name.
func createVolume(ctx context.Context, cs *kubernetes.Clientset, name string) error {
	sc := "standard"
	size := resource.MustParse("1Gi")
	pvName := namespace + "-" + name
	_, err := cs.CoreV1().PersistentVolumes().Create(ctx, &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			StorageClassName:              sc,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/tmp/" + pvName}},
			ClaimRef:                      &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: namespace, Name: name},
		},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	_, err = cs.CoreV1().PersistentVolumeClaims(namespace).Create(ctx, &corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: &sc,
			VolumeName:       pvName,
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: size}},
		},
	}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// history is what the watch saw of one pod, in Unix seconds.
type history struct {
	kase
	scheduled, firstSandbox, initialized, lost, recreated int64
	started, ready                                        []int64 // each Ready (first and after re-creation)
	readyStart                                            []int64 // the newest container start at each Ready
	deleteRequested, down                                 int64
	gone                                                  bool
	restarts                                              int32
}

func (h *history) done() bool {
	if len(h.ready) == 0 {
		return false
	}
	return !h.crash || h.recreated != 0 && len(h.ready) == 2
}

func (h *history) observe(p *corev1.Pod) {
	get := func(t corev1.PodConditionType) *corev1.PodCondition {
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == t {
				return &p.Status.Conditions[i]
			}
		}
		return nil
	}
	if c := get(corev1.PodScheduled); c != nil && c.Status == corev1.ConditionTrue {
		h.scheduled = c.LastTransitionTime.Unix()
	}
	if c := get(corev1.PodInitialized); c != nil && c.Status == corev1.ConditionTrue && len(p.Spec.InitContainers) > 0 {
		h.initialized = c.LastTransitionTime.Unix()
	}
	sandbox := get(corev1.PodReadyToStartContainers)
	if sandbox != nil {
		t := sandbox.LastTransitionTime.Unix()
		switch {
		case sandbox.Status == corev1.ConditionTrue && h.firstSandbox == 0:
			h.firstSandbox = t
		case sandbox.Status == corev1.ConditionTrue && t > h.firstSandbox && h.lost != 0:
			h.recreated = t
		case sandbox.Status == corev1.ConditionFalse && p.DeletionTimestamp != nil && h.firstSandbox != 0:
			h.down = t
		case sandbox.Status == corev1.ConditionFalse && h.firstSandbox != 0 && h.lost == 0:
			h.lost = t
		}
	}
	if p.DeletionTimestamp != nil && h.deleteRequested == 0 {
		var grace int64
		if p.DeletionGracePeriodSeconds != nil {
			grace = *p.DeletionGracePeriodSeconds
		}
		h.deleteRequested = p.DeletionTimestamp.Unix() - grace
	}
	var newest int64
	for _, s := range p.Status.ContainerStatuses {
		if s.State.Running != nil {
			newest = max(newest, s.State.Running.StartedAt.Unix())
		}
		h.restarts = max(h.restarts, s.RestartCount)
	}
	if newest != 0 && !slices.Contains(h.started, newest) {
		h.started = append(h.started, newest)
	}
	if c := get(corev1.PodReady); c != nil && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
		if t := c.LastTransitionTime.Unix(); !slices.Contains(h.ready, t) {
			h.ready = append(h.ready, t)
			h.readyStart = append(h.readyStart, newest)
		}
	}
}

func follow(ctx context.Context, w watch.Interface, pods map[string]*history, done func() bool) error {
	for !done() {
		select {
		case <-ctx.Done():
			var missing []string
			for name, h := range pods {
				if !h.done() || h.deleteRequested != 0 && !h.gone {
					missing = append(missing, name)
				}
			}
			sort.Strings(missing)
			return fmt.Errorf("%w waiting for %s", ctx.Err(), strings.Join(missing, ", "))
		case ev, ok := <-w.ResultChan():
			if !ok {
				return errors.New("watch closed")
			}
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				return fmt.Errorf("watch: %v", ev.Object)
			}
			h := pods[p.Name]
			if h == nil {
				continue
			}
			h.observe(p)
			if ev.Type == watch.Deleted {
				h.gone = true
			}
		}
	}
	return nil
}

func report(pods map[string]*history) error {
	names := make([]string, 0, len(pods))
	for name := range pods {
		names = append(names, name)
	}
	sort.Strings(names)
	var bad []string
	check := func(pod, what string, got int64, want [2]int64) string {
		s := fmt.Sprintf("%s=%d", what, got)
		if got < want[0] || got > want[1] {
			bad = append(bad, fmt.Sprintf("%s: %s %d s, configured %d..%d s", pod, what, got, want[0], want[1]))
			s += "(!)"
		}
		return s
	}
	for _, name := range names {
		h := pods[name]
		line := []string{fmt.Sprintf("%-12s", name), check(name, "sandbox", h.firstSandbox-h.scheduled, h.sandbox)}
		if h.initC {
			// Init containers run in podslo-containers-start: Initialized
			// and the container start share its time.
			line = append(line,
				check(name, "init", h.initialized-h.firstSandbox, containers),
				check(name, "containers", h.started[0]-h.initialized, [2]int64{0, 0}))
		} else {
			line = append(line, check(name, "containers", h.started[0]-h.firstSandbox, containers))
		}
		line = append(line,
			check(name, "readiness", h.ready[0]-h.readyStart[0], readiness))
		if h.crash {
			line = append(line,
				check(name, "lost", h.lost-h.ready[0], crashAfter),
				check(name, "recreated", h.recreated-h.lost, recreate),
				check(name, "restarts", int64(h.restarts), [2]int64{1, 1}),
				check(name, "readiness2", h.ready[1]-h.readyStart[1], readiness))
		}
		line = append(line, check(name, "termination", h.down-h.deleteRequested, h.termination))
		fmt.Println(strings.Join(line, " "))
	}
	if len(bad) > 0 {
		return fmt.Errorf("%d values outside the configured range:\n%s", len(bad), strings.Join(bad, "\n"))
	}
	fmt.Println("all values as configured")
	return nil
}
