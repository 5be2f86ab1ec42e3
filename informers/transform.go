package informers

import (
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// defaultClassAnnotation marks the default StorageClass.
const defaultClassAnnotation = "storageclass.kubernetes.io/is-default-class"

// trimmer keeps, of each object, only the fields podslo reads, so that the
// informer cache costs bytes per pod instead of kilobytes. It must be
// idempotent: client-go may run it on an object it already trimmed.
type trimmer struct {
	podLabels      map[string]bool
	podAnnotations map[string]bool
	conditionTypes map[corev1.PodConditionType]bool
}

func (t *trimmer) transform(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.Pod:
		return t.pod(o), nil
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

func (t *trimmer) pod(p *corev1.Pod) *corev1.Pod {
	out := &corev1.Pod{
		ObjectMeta: trimMeta(&p.ObjectMeta, t.podLabels, t.podAnnotations),
		Spec: corev1.PodSpec{
			NodeName:         p.Spec.NodeName,
			RuntimeClassName: p.Spec.RuntimeClassName,
		},
	}
	out.DeletionTimestamp = p.DeletionTimestamp
	out.DeletionGracePeriodSeconds = p.DeletionGracePeriodSeconds
	for _, v := range p.Spec.Volumes {
		switch {
		case v.PersistentVolumeClaim != nil:
			out.Spec.Volumes = append(out.Spec.Volumes, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: v.PersistentVolumeClaim.ClaimName},
			}})
		case v.Ephemeral != nil:
			var class *string
			if tpl := v.Ephemeral.VolumeClaimTemplate; tpl != nil {
				class = tpl.Spec.StorageClassName
			}
			out.Spec.Volumes = append(out.Spec.Volumes, corev1.Volume{Name: v.Name, VolumeSource: corev1.VolumeSource{
				Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{
					Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: class},
				}},
			}})
		}
	}
	for _, c := range p.Status.Conditions {
		if t.conditionTypes[c.Type] {
			// Reason and message are for humans; the SLIs read type, status
			// and time only.
			out.Status.Conditions = append(out.Status.Conditions, corev1.PodCondition{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime})
		}
	}
	return out
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
