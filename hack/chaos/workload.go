package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/podslo/podslo/deploy/kwok"
	"github.com/podslo/podslo/hack/harness"
)

const (
	namespaces = 10
	// The annotations deploy/kwok's stages read (deploy/kwok/README.md).
	annotationSandbox = "kwok.podslo.io/sandbox"
	annotationCrash   = "kwok.podslo.io/sandbox-crash"
	// annotationCrashAfter and annotationUnready: deploy/kwok/README.md.
	annotationCrashAfter = "kwok.podslo.io/crash-after"
	annotationUnready    = "kwok.podslo.io/unready"
	annotationPulls      = "kwok.podslo.io/pulls"
	annotationInitRun    = "kwok.podslo.io/init-run"
	annotationBackoff    = "kwok.podslo.io/pull-backoff"
	// flapFor is how long a flapping pod is not Ready.
	flapFor = 5 * time.Second
	// claimsPerClass PVCs of each StorageClass per namespace, shared by
	// the pods: nothing binds them (there is no kube-controller-manager),
	// and neither kwok nor podslo needs them bound.
	claimsPerClass = 5
	// fastClass is a second StorageClass beside deploy/kwok's "standard",
	// so that pods with claims of both show as storage_class="fast,standard".
	fastClass = "fast"
	// missingSecret is the Secret user-error pods mount and nobody creates.
	missingSecret = "missing-secret"
)

func nodeName(i int) string     { return fmt.Sprintf("kwok-node-%04d", i) }
func podNamespace(i int) string { return fmt.Sprintf("chaos-%02d", i%namespaces) }
func podName(i int) string      { return fmt.Sprintf("pod-%05d", i) }
func claimName(class string, i int) string {
	return fmt.Sprintf("%s-%02d", class, i%claimsPerClass)
}

// podKind is what a new pod is made to go through.
type podKind struct {
	RuntimeClass string   // "", "runc" or "kata"
	Claims       []string // StorageClasses of its PVCs
	Init         bool     // has an init container
	Multi        bool     // has three containers
	// Pulls are the image events the harness writes for the pod, one
	// per container: kwok's one Pulled event names no container, which
	// counts for a one-container pod only (deploy/kwok/README.md).
	Pulls     []plannedPull
	Crash     bool // loses its sandbox once, MinLife after Ready
	CrashLoop bool // its container exits MinLife after its start and restarts in the same sandbox
	Flap      bool // not Ready for flapFor, MinLife after its start
	Stuck     bool // never gets a sandbox
	UserError bool // stuck, mounts a missing Secret, and gets a FailedMount event
}

// client wraps the API calls of the run, retried through the outage.
type client struct {
	cs *kubernetes.Clientset
}

// retry retries fn through the outage (kube-apiserver may be down) until
// it succeeds, fails in a way retrying cannot fix, or ctx ends.
func retry(ctx context.Context, fn func() error) error {
	return harness.Retry(ctx, harness.Unavailable, 0, fn)
}

// setUp creates deploy/kwok/classes.yaml's classes and the second
// StorageClass, the namespaces with their default ServiceAccounts (no
// kube-controller-manager creates them, and admission refuses pods
// without), the PVCs and the nodes. It returns each claim's class.
func (c *client) setUp(ctx context.Context, repo string, nodes int) (map[string]string, error) {
	if err := kwok.ApplyClasses(ctx, c.cs, kwok.ClassesFile(repo)); err != nil {
		return nil, err
	}
	fast := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: fastClass}, Provisioner: "kubernetes.io/no-provisioner"}
	if _, err := c.cs.StorageV1().StorageClasses().Create(ctx, fast, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	claimClass := map[string]string{}
	for i := range namespaces {
		ns := podNamespace(i)
		if err := harness.CreateNamespaces(ctx, c.cs, ns); err != nil {
			return nil, err
		}
		for _, class := range []string{"standard", fastClass} {
			for j := range claimsPerClass {
				name := claimName(class, j)
				pvc := &corev1.PersistentVolumeClaim{
					ObjectMeta: metav1.ObjectMeta{Name: name},
					Spec: corev1.PersistentVolumeClaimSpec{
						StorageClassName: &class,
						AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
						Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
					},
				}
				if _, err := c.cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, pvc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
					return nil, err
				}
				claimClass[ns+"/"+name] = class
			}
		}
	}
	err := harness.Parallel(ctx, 0, nodes, 8, func(ctx context.Context, i int) error {
		node := harness.Node(nodeName(i), 110)
		return retry(ctx, func() error {
			_, err := c.cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		})
	})
	return claimClass, err
}

// newPod is the pod of slot i: one container (and an init container for
// some), on the slot's node once bound, with the annotations and volumes
// of its kind.
func newPod(i int, k podKind, crashAfter time.Duration) *corev1.Pod {
	no := false
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: podName(i), Namespace: podNamespace(i),
			Labels:      map[string]string{"app": fmt.Sprintf("app-%02d", i%50)},
			Annotations: map[string]string{},
		},
		Spec: corev1.PodSpec{
			AutomountServiceAccountToken: &no,
			Containers:                   []corev1.Container{{Name: "app", Image: "registry.example/app:1.0"}},
		},
	}
	if k.RuntimeClass != "" {
		rc := k.RuntimeClass
		pod.Spec.RuntimeClassName = &rc
	}
	if k.Init {
		// Two, which kwok runs one after another (annotationInitRun).
		pod.Spec.InitContainers = []corev1.Container{
			{Name: "init", Image: "registry.example/init:1.0"},
			{Name: "migrate", Image: "registry.example/migrate:1.0"},
		}
	}
	if k.Multi {
		pod.Spec.Containers = append(pod.Spec.Containers,
			corev1.Container{Name: "proxy", Image: "registry.example/proxy:1.0"},
			corev1.Container{Name: "logs", Image: "registry.example/logs:1.0"})
	}
	for _, class := range k.Claims {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "data-" + class, VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claimName(class, i)}}})
	}
	if k.Crash {
		pod.Annotations[annotationCrash] = strconv.Itoa(int(crashAfter / time.Second))
	}
	if k.CrashLoop {
		pod.Annotations[annotationCrashAfter] = strconv.Itoa(int(crashAfter / time.Second))
	}
	if k.Flap {
		pod.Annotations[annotationUnready] = fmt.Sprintf("%d,%d", int(crashAfter/time.Second), int(flapFor/time.Second))
	}
	if k.Stuck {
		pod.Annotations[annotationSandbox] = "never"
	}
	if k.UserError {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "creds", VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: missingSecret}}})
	}
	return pod
}

// createPod creates the pod, binds it to its node through the binding
// subresource (which writes PodScheduled, as kube-scheduler's bind does)
// and records the kubelet's events kwok cannot write: FailedMount for a
// user-error pod, and the image events of k.Pulls. It returns the pod's
// UID.
func (c *client) createPod(ctx context.Context, pod *corev1.Pod, node string, k podKind) (types.UID, error) {
	var created *corev1.Pod
	err := retry(ctx, func() error {
		var err error
		created, err = c.cs.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// A retried create whose first attempt went through.
			created, err = c.cs.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		}
		return err
	})
	if err != nil {
		return "", fmt.Errorf("create pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	err = retry(ctx, func() error {
		err := c.cs.CoreV1().Pods(pod.Namespace).Bind(ctx, &corev1.Binding{
			ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: created.UID},
			Target:     corev1.ObjectReference{Kind: "Node", Name: node},
		}, metav1.CreateOptions{})
		if apierrors.IsConflict(err) { // bound already (a retried request)
			return nil
		}
		return err
	})
	if err != nil {
		return created.UID, fmt.Errorf("bind pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	record := func(fieldPath, reason, typ, msg string) error {
		now := metav1.Now()
		ev := &corev1.Event{
			ObjectMeta:     metav1.ObjectMeta{GenerateName: pod.Name + "-", Namespace: pod.Namespace},
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: created.UID, FieldPath: fieldPath},
			Reason:         reason, Type: typ, Message: msg,
			Source:         corev1.EventSource{Component: "kubelet", Host: node},
			FirstTimestamp: now, LastTimestamp: now, Count: 1,
		}
		err := retry(ctx, func() error {
			_, err := c.cs.CoreV1().Events(pod.Namespace).Create(ctx, ev, metav1.CreateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("record the %s event of %s/%s: %w", reason, pod.Namespace, pod.Name, err)
		}
		return nil
	}
	if k.UserError {
		if err := record("", "FailedMount", corev1.EventTypeWarning, fmt.Sprintf(`MountVolume.SetUp failed for volume "creds" : secret %q not found`, missingSecret)); err != nil {
			return created.UID, err
		}
	}
	// The kubelet pulls a pod's images one after another, each before it
	// starts that container, and kwok starts them after the sandbox and
	// the pulls (kwok.podslo.io/pulls): the events come before.
	for _, pl := range k.Pulls {
		if pl.FailFirst {
			if err := record(pl.FieldPath, "Failed", corev1.EventTypeWarning, pl.failedMessage()); err != nil {
				return created.UID, err
			}
		}
		if err := record(pl.FieldPath, "Pulled", corev1.EventTypeNormal, pl.message()); err != nil {
			return created.UID, err
		}
	}
	return created.UID, nil
}

// plannedPull is one image event the harness writes for a container, as
// the kubelet writes it (pulls.go reads them back).
type plannedPull struct {
	FieldPath string // spec.containers{app}, spec.initContainers{init}
	Image     string
	Cached    bool // "already present on machine"
	// Ms is the pull alone and WaitMs the pull with its wait in the
	// kubelet's pull queue, which podslo counts.
	Ms, WaitMs int64
	Bytes      uint64
	// FailFirst: a Failed event (ErrImagePull) comes before the pull.
	FailFirst bool
}

func (p plannedPull) message() string {
	if p.Cached {
		return fmt.Sprintf("Container image %q already present on machine", p.Image)
	}
	// The kubelet truncates both durations to the millisecond and prints
	// them as Go durations.
	return fmt.Sprintf("Successfully pulled image %q in %s (%s including waiting). Image size: %d bytes.", p.Image,
		time.Duration(p.Ms)*time.Millisecond, time.Duration(p.WaitMs)*time.Millisecond, p.Bytes)
}

func (p plannedPull) failedMessage() string {
	return fmt.Sprintf("Failed to pull image %q: rpc error: code = Unknown desc = failed to pull and unpack image %q: unexpected status from HEAD request: 503 Service Unavailable", p.Image, p.Image)
}

// imageBackOff is the kubelet's first back-off after a failed pull
// (ImagePullBackOff), before it pulls again.
const imageBackOff = 10 * time.Second

// pullsAnnotation is deploy/kwok's kwok.podslo.io/pulls for the planned
// pulls: how long the init containers' pulls, the containers' and the
// pulls after a back-off take, the "including waiting" durations the
// events say. kwok then starts the containers after them, as the kubelet
// does, so that no start-up is shorter than the pulls podslo takes off
// it. An init container's failed attempt adds the kubelet's back-off to
// the init containers' pulls; a container's failed attempt leaves it
// waiting while the others start (backoffAnnotation), and kwok adds the
// back-off itself.
func pullsAnnotation(pulls []plannedPull) string {
	var init, containers, late int64
	for _, p := range pulls {
		switch {
		case strings.HasPrefix(p.FieldPath, "spec.initContainers{"):
			init += p.WaitMs
			if p.FailFirst {
				init += imageBackOff.Milliseconds()
			}
		case p.FailFirst:
			late += p.WaitMs
		default:
			containers += p.WaitMs
		}
	}
	return fmt.Sprintf("%d,%d,%d", init, containers, late)
}

// backoffAnnotation is deploy/kwok's kwok.podslo.io/pull-backoff: the
// containers whose first pull failed, which start after the kubelet's
// back-off while the others run; empty for none.
func backoffAnnotation(pulls []plannedPull) string {
	var names []string
	for _, p := range pulls {
		if name, ok := strings.CutPrefix(p.FieldPath, "spec.containers{"); ok && p.FailFirst {
			names = append(names, strings.TrimSuffix(name, "}"))
		}
	}
	return strings.Join(names, ",")
}

// planPulls draws the image events of the pod's containers: a cache hit
// for 3 in 10, else a pull of 50 ms to 3 s that waited up to 1 s more in
// the pull queue, with a failed attempt first for 1 pull in 20.
func planPulls(rng *rand.Rand, pod *corev1.Pod) []plannedPull {
	var out []plannedPull
	add := func(path string, c corev1.Container) {
		p := plannedPull{FieldPath: fmt.Sprintf("%s{%s}", path, c.Name), Image: c.Image}
		if rng.Float64() < 0.3 {
			p.Cached = true
		} else {
			p.Ms = 50 + rng.Int64N(2950)
			p.WaitMs = p.Ms + rng.Int64N(1000)
			p.Bytes = 1 + rng.Uint64N(200<<20)
			p.FailFirst = rng.Float64() < 0.05
		}
		out = append(out, p)
	}
	for _, c := range pod.Spec.InitContainers {
		add("spec.initContainers", c)
	}
	for _, c := range pod.Spec.Containers {
		add("spec.containers", c)
	}
	return out
}

// deletePod deletes the pod with UID uid (never a newer pod of the same
// name) with the grace period given.
func (c *client) deletePod(ctx context.Context, namespace, name string, uid types.UID, grace int64) error {
	err := retry(ctx, func() error {
		return c.cs.CoreV1().Pods(namespace).Delete(ctx, name, metav1.DeleteOptions{
			GracePeriodSeconds: &grace,
			Preconditions:      &metav1.Preconditions{UID: &uid},
		})
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone already, or replaced
	}
	return err
}

// watchFrom starts a watch of every pod from resource version rv and says
// what the API server answered: "410 Gone" when rv is too old to resume
// from (compacted, or older than its watch cache), so that a watcher must
// list again.
func (c *client) watchFrom(ctx context.Context, rv int64) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	w, err := c.cs.CoreV1().Pods(metav1.NamespaceAll).Watch(ctx, metav1.ListOptions{ResourceVersion: strconv.FormatInt(rv, 10)})
	switch {
	case apierrors.IsResourceExpired(err) || apierrors.IsGone(err):
		return "410 Gone"
	case err != nil:
		return "error: " + err.Error()
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if ev.Type != watch.Error {
			return fmt.Sprintf("resumed (first event %s)", ev.Type)
		}
		if st, ok := ev.Object.(*metav1.Status); ok && (st.Code == http.StatusGone || st.Reason == metav1.StatusReasonExpired) {
			return "410 Gone"
		}
		return fmt.Sprintf("error event %v", ev.Object)
	}
	return "resumed (no event within 10s)"
}
