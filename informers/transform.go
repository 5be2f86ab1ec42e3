package informers

import (
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
	// conditionTypes maps each condition type podslo reads to itself, so
	// that the cached pods share one copy of each type string.
	conditionTypes map[corev1.PodConditionType]corev1.PodConditionType
}

func (t *trimmer) transform(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		return t.pod(o), nil
	case *lifecycle.Pod:
		return o, nil
	case *corev1.Event:
		// What the user-error filter reads: which pod, what went wrong, and
		// which node's kubelet said so. Without the host, per-node mode
		// would hand on every node's events, and the pipeline would hold
		// each for a pod it never sees.
		return &corev1.Event{
			ObjectMeta:     trimMeta(&o.ObjectMeta, nil, nil),
			InvolvedObject: corev1.ObjectReference{Kind: o.InvolvedObject.Kind, Namespace: o.InvolvedObject.Namespace, Name: o.InvolvedObject.Name, UID: o.InvolvedObject.UID},
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

// pod converts a pod to the compact lifecycle.Pod. Strings that repeat in
// every pod (condition types and statuses) are replaced by constants, so
// that a cached pod does not keep its own copies of "True".
func (t *trimmer) pod(p *corev1.Pod) *lifecycle.Pod {
	out := &lifecycle.Pod{
		ObjectMeta: trimMeta(&p.ObjectMeta, t.podLabels, t.podAnnotations),
		NodeName:   p.Spec.NodeName,
	}
	if t.allPodLabels {
		out.Labels = internLabels(p.Labels)
	}
	out.DeletionTimestamp = p.DeletionTimestamp
	out.DeletionGracePeriodSeconds = p.DeletionGracePeriodSeconds
	if rc := p.Spec.RuntimeClassName; rc != nil {
		out.RuntimeClassName = *rc
	}
	for _, v := range p.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			out.Volumes = append(out.Volumes, lifecycle.Volume{Claim: v.PersistentVolumeClaim.ClaimName})
		case v.Ephemeral != nil:
			vol := lifecycle.Volume{Claim: p.Name + "-" + v.Name, Ephemeral: true}
			if tpl := v.Ephemeral.VolumeClaimTemplate; tpl != nil {
				vol.TemplateClass = tpl.Spec.StorageClassName
			}
			out.Volumes = append(out.Volumes, vol)
		}
	}
	out.HasInitContainers = len(p.Spec.InitContainers) > 0
	for i := range p.Status.ContainerStatuses {
		timesOf(&p.Status.ContainerStatuses[i]).into(out, false)
	}
	for i := range p.Status.InitContainerStatuses {
		timesOf(&p.Status.InitContainerStatuses[i]).into(out, true)
	}
	n := 0
	for i := range p.Status.Conditions {
		if t.conditionTypes[p.Status.Conditions[i].Type] != "" {
			n++
		}
	}
	if n > 0 {
		out.Conditions = make([]lifecycle.Condition, 0, n)
	}
	for i := range p.Status.Conditions {
		c := &p.Status.Conditions[i]
		if typ := t.conditionTypes[c.Type]; typ != "" {
			out.Conditions = append(out.Conditions, lifecycle.Condition{Type: typ, Status: internStatus(c.Status), LastTransitionTime: unixOrZero(c.LastTransitionTime)})
		}
	}
	return out
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
// seconds (0: not set). Both pod decoders fill it and hand it to into, so
// that they agree by construction.
type containerTimes struct {
	running           bool
	started           int64 // state.running.startedAt
	terminatedStarted int64 // state.terminated.startedAt
	lastStarted       int64 // lastState.terminated.startedAt
	finished          int64 // state.terminated.finishedAt
	exitCode          int32 // state.terminated.exitCode
	oomKilled         bool  // state.terminated.reason is OOMKilled
}

func timesOf(cs *corev1.ContainerStatus) containerTimes {
	var c containerTimes
	if r := cs.State.Running; r != nil {
		c.running, c.started = true, unixOrZero(r.StartedAt)
	}
	if t := cs.State.Terminated; t != nil {
		c.terminatedStarted, c.finished = unixOrZero(t.StartedAt), unixOrZero(t.FinishedAt)
		c.exitCode, c.oomKilled = t.ExitCode, t.Reason == "OOMKilled"
	}
	if t := cs.LastTerminationState.Terminated; t != nil {
		c.lastStarted = unixOrZero(t.StartedAt)
	}
	return c
}

// sigkillExit is the exit code of a process killed by SIGKILL (128 + 9),
// which the kubelet sends when a container outlives its grace period.
const sigkillExit = 137

func (c containerTimes) into(p *lifecycle.Pod, init bool) {
	if !init && c.running && c.started > p.ContainersStarted {
		p.ContainersStarted = c.started
	}
	for _, t := range []int64{c.started, c.terminatedStarted, c.lastStarted} {
		if t != 0 && (p.FirstContainerStart == 0 || t < p.FirstContainerStart) {
			p.FirstContainerStart = t
		}
	}
	if !init && c.exitCode == sigkillExit && !c.oomKilled && c.finished > p.ContainerKilled {
		p.ContainerKilled = c.finished
	}
}
