package informers

import (
	"slices"
	"strings"

	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"

	"github.com/podslo/podslo/lifecycle"
)

var everything = labels.Everything()

// pvcGetter finds a pod's claims: a PVC lister, or one per allowed
// namespace (pvcsByNamespace).
type pvcGetter interface {
	PersistentVolumeClaims(namespace string) corelisters.PersistentVolumeClaimNamespaceLister
}

// Label values of runtime_class and storage_class.
const (
	// ClassNone: no runtimeClassName, or no PVC-backed volume.
	ClassNone = "none"
	// StorageClassUnresolved: a PVC podslo cannot resolve to a StorageClass.
	StorageClassUnresolved = "unknown"
)

// RuntimeClass is the runtime_class label of a pod.
func RuntimeClass(p *lifecycle.Pod) string {
	if p.RuntimeClassName == "" {
		return ClassNone
	}
	return p.RuntimeClassName
}

// classResolver maps a pod to its storage_class label value from the PVC and
// StorageClass caches.
type classResolver struct {
	pvcs    pvcGetter
	classes storagelisters.StorageClassLister
}

// StorageClass is the sorted, unique, comma-joined StorageClass names of the
// pod's PVC and generic ephemeral volumes.
func (r *classResolver) StorageClass(p *lifecycle.Pod) string {
	if len(p.Volumes) == 0 {
		return ClassNone
	}
	names := make([]string, 0, len(p.Volumes))
	for i := range p.Volumes {
		v := &p.Volumes[i]
		// Before an ephemeral volume's claim exists, its template says what
		// it will be.
		names = append(names, r.claimClass(p.Namespace, v.Claim, v.TemplateClass, v.Ephemeral))
	}
	switch len(names) {
	case 0:
		return ClassNone
	case 1:
		return names[0]
	}
	slices.Sort(names)
	return strings.Join(slices.Compact(names), ",")
}

func (r *classResolver) claimClass(namespace, claim string, template *string, ephemeral bool) string {
	class := template
	pvc, err := r.pvcs.PersistentVolumeClaims(namespace).Get(claim)
	switch {
	case err == nil:
		class = pvc.Spec.StorageClassName
	case !ephemeral:
		return StorageClassUnresolved
	}
	if class != nil && *class != "" {
		return *class
	}
	// No class named: the DefaultStorageClass admission plugin, or the
	// retroactive default assignment, gives such a claim the default class.
	if d := r.defaultClass(); d != "" {
		return d
	}
	return StorageClassUnresolved
}

func (r *classResolver) defaultClass() string {
	all, err := r.classes.List(everything)
	if err != nil {
		return ""
	}
	// With several defaults the API server picks the newest; do the same.
	var best *storagev1.StorageClass
	for _, sc := range all {
		if sc.Annotations[defaultClassAnnotation] != "true" {
			continue
		}
		if best == nil || sc.CreationTimestamp.After(best.CreationTimestamp.Time) ||
			(sc.CreationTimestamp.Equal(&best.CreationTimestamp) && sc.Name < best.Name) {
			best = sc
		}
	}
	if best == nil {
		return ""
	}
	return best.Name
}
