package informers

import (
	"fmt"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/podslo/podslo/lifecycle"
)

// defaultClassAnnotation marks the default StorageClass.
const defaultClassAnnotation = "storageclass.kubernetes.io/is-default-class"

// trimmer keeps, of each object, only the fields podslo reads, so that the
// informer cache costs hundreds of bytes per pod instead of kilobytes. Pods
// become *lifecycle.Pod. It must be idempotent: client-go may run it on an
// object it already trimmed.
type trimmer struct {
	podLabels      map[string]bool
	podAnnotations map[string]bool
	// allPodLabels keeps every label of a pod, for counting the pods a
	// NetworkPolicy selects.
	allPodLabels bool
	// controllerRef keeps a pod's controller reference (its API version,
	// kind and UID), which the owner-kind resolution reads.
	controllerRef bool
	// conditionTypes maps each condition type podslo reads to itself, so
	// that the cached pods share one copy of each type string.
	conditionTypes map[corev1.PodConditionType]corev1.PodConditionType
}

func (t *trimmer) transform(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		return t.pod(o)
	case *lifecycle.Pod:
		return o, nil
	case *corev1.Event:
		// What the user-error filter and the image pulls read: which pod
		// (and container), what went wrong or how long a pull took, and
		// which node's kubelet said so. Without the host, per-node mode
		// would hand on every node's events, and the pipeline would hold
		// each for a pod it never sees.
		return &corev1.Event{
			ObjectMeta:     trimMeta(&o.ObjectMeta, nil, nil),
			InvolvedObject: corev1.ObjectReference{Kind: o.InvolvedObject.Kind, Namespace: o.InvolvedObject.Namespace, Name: o.InvolvedObject.Name, UID: o.InvolvedObject.UID, FieldPath: o.InvolvedObject.FieldPath},
			Reason:         o.Reason,
			Message:        o.Message,
			Source:         corev1.EventSource{Host: o.Source.Host},
		}, nil
	case *corev1.PersistentVolumeClaim:
		return &corev1.PersistentVolumeClaim{
			ObjectMeta: trimMeta(&o.ObjectMeta, nil, nil),
			Spec:       corev1.PersistentVolumeClaimSpec{StorageClassName: o.Spec.StorageClassName},
		}, nil
	case *storagev1.StorageClass:
		sc := &storagev1.StorageClass{ObjectMeta: trimMeta(&o.ObjectMeta, nil, nil)}
		if v, ok := o.Annotations[defaultClassAnnotation]; ok {
			sc.Annotations = map[string]string{defaultClassAnnotation: v}
		}
		return sc, nil
	}
	// Tombstones and anything else pass through untouched.
	return obj, nil
}

// pod trims a whole pod. The protobuf decoder (decodePod, podproto.go) is
// the one list of what podslo reads of a pod: a pod that arrives decoded
// (a JSON response, a fake clientset in tests) is encoded and read by it,
// so that a field declared there is read on every path. The Marshal is
// paid only off the exporter's protobuf watch, which decodes straight
// into the trimmed form.
func (t *trimmer) pod(p *corev1.Pod) (*lifecycle.Pod, error) {
	raw, err := p.Marshal()
	if err != nil {
		return nil, fmt.Errorf("encode pod %s/%s to trim it: %w", p.Namespace, p.Name, err)
	}
	return t.decodePod(raw)
}

func internStatus(s corev1.ConditionStatus) corev1.ConditionStatus {
	switch s {
	case corev1.ConditionTrue:
		return corev1.ConditionTrue
	case corev1.ConditionFalse:
		return corev1.ConditionFalse
	case corev1.ConditionUnknown:
		return corev1.ConditionUnknown
	}
	// Malformed: kept as is, so that lifecycle can count it.
	return s
}

func unixOrZero(t metav1.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.Unix()
}

func trimMeta(m *metav1.ObjectMeta, labels, annotations map[string]bool) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:              m.Name,
		Namespace:         m.Namespace,
		UID:               m.UID,
		ResourceVersion:   m.ResourceVersion,
		CreationTimestamp: m.CreationTimestamp,
		Labels:            pick(m.Labels, labels),
		Annotations:       pick(m.Annotations, annotations),
	}
}

func pick(all map[string]string, keep map[string]bool) map[string]string {
	var out map[string]string
	for k := range keep {
		if v, ok := all[k]; ok {
			if out == nil {
				out = make(map[string]string, len(keep))
			}
			out[k] = v
		}
	}
	return out
}

// containerTimes is what the SLIs read of one container status, in Unix
// seconds (0: not set), as the pod decoder collects it.
type containerTimes struct {
	running           bool
	started           int64 // state.running.startedAt
	terminatedStarted int64 // state.terminated.startedAt
	lastStarted       int64 // lastState.terminated.startedAt
	finished          int64 // state.terminated.finishedAt
	exitCode          int32 // state.terminated.exitCode
	oomKilled         bool  // state.terminated.reason is OOMKilled
	restarted         bool  // restartCount > 0
}

// sigkillExit is the exit code of a process killed by SIGKILL (128 + 9),
// which the kubelet sends when a container outlives its grace period.
const sigkillExit = 137

func (c containerTimes) into(p *lifecycle.Pod, init bool) {
	if !init && c.running {
		p.ContainersRunning = saturatingInc(p.ContainersRunning)
	}
	if !init && c.running && c.started > p.ContainersStarted {
		p.ContainersStarted = c.started
	}
	for _, t := range []int64{c.started, c.terminatedStarted, c.lastStarted} {
		if t != 0 && (p.FirstContainerStart == 0 || t < p.FirstContainerStart) {
			p.FirstContainerStart = t
		}
	}
	p.ContainersRestarted = p.ContainersRestarted || c.restarted
	// Init containers too: the kubelet kills a native sidecar (an init
	// container with restartPolicy Always) last, and SIGKILLs it when it
	// outlives what is left of the grace period. Only a kill at or after
	// the end of the grace period counts as over grace (lifecycle), so an
	// earlier SIGKILL, of any container, is no evidence.
	if c.exitCode == sigkillExit && !c.oomKilled && c.finished > p.ContainerKilled {
		p.ContainerKilled = c.finished
	}
}
