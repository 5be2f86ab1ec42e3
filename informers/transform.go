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
		if r := p.Status.ContainerStatuses[i].State.Running; r != nil && r.StartedAt.Unix() > out.ContainersStarted && !r.StartedAt.IsZero() {
			out.ContainersStarted = r.StartedAt.Unix()
		}
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
