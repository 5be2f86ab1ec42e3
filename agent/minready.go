package agent

import (
	"errors"
	"fmt"
	"math"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	appslisters "k8s.io/client-go/listers/apps/v1"
)

// MinReadySecondsAnnotation sets a pod's minReadySeconds, ahead of its
// owner's spec.minReadySeconds: the Stable Pods proposal puts the field in
// the pod spec, where no Kubernetes release has it yet.
const MinReadySecondsAnnotation = "podslo.io/min-ready-seconds"

// ErrInvalidMinReadySeconds means an annotation value that is not a whole
// number of seconds from 0 to 2147483647 (spec.minReadySeconds' range).
var ErrInvalidMinReadySeconds = errors.New("invalid minReadySeconds")

// Where a minReadySeconds came from, for logs.
const (
	fromAnnotation  = "annotation"
	fromReplicaSet  = "ReplicaSet"
	fromStatefulSet = "StatefulSet"
	fromDaemonSet   = "DaemonSet"
	// fromDefault: no annotation and no live owner; 0, the proposal's
	// default, under which a pod is stable as soon as it is Ready.
	fromDefault = "default"
)

type minReady struct {
	seconds int32
	from    string
	// badAnnotation is why the annotation was ignored; seconds then comes
	// from the owner or the default.
	badAnnotation error
}

// owners reads spec.minReadySeconds of pod owners from informer caches.
// Deployments need no lookup: they copy theirs into their ReplicaSets.
type owners struct {
	replicaSets  appslisters.ReplicaSetLister
	statefulSets appslisters.StatefulSetLister
	daemonSets   appslisters.DaemonSetLister
}

func (o owners) minReadySeconds(pod *corev1.Pod) minReady {
	var bad error
	if v, ok := pod.Annotations[MinReadySecondsAnnotation]; ok {
		n, err := parseMinReadySeconds(v)
		if err == nil {
			return minReady{seconds: n, from: fromAnnotation}
		}
		bad = err
	}
	m := o.fromOwner(pod)
	m.badAnnotation = bad
	return m
}

func parseMinReadySeconds(v string) (int32, error) {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%w %q: want a whole number of seconds from 0 to %d", ErrInvalidMinReadySeconds, v, math.MaxInt32)
	}
	return int32(n), nil
}

// fromOwner falls back to the default when the owner is gone from the
// cache or is a new object under the old name (a different UID): the pod is
// then an orphan, or about to be deleted with its owner.
func (o owners) fromOwner(pod *corev1.Pod) minReady {
	ref := metav1.GetControllerOf(pod)
	if ref == nil {
		return minReady{from: fromDefault}
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || gv.Group != appsv1.GroupName {
		return minReady{from: fromDefault}
	}
	var (
		meta    metav1.Object
		seconds int32
	)
	switch ref.Kind {
	case fromReplicaSet:
		rs, err := o.replicaSets.ReplicaSets(pod.Namespace).Get(ref.Name)
		if err != nil {
			return minReady{from: fromDefault}
		}
		meta, seconds = rs, rs.Spec.MinReadySeconds
	case fromStatefulSet:
		sts, err := o.statefulSets.StatefulSets(pod.Namespace).Get(ref.Name)
		if err != nil {
			return minReady{from: fromDefault}
		}
		meta, seconds = sts, sts.Spec.MinReadySeconds
	case fromDaemonSet:
		ds, err := o.daemonSets.DaemonSets(pod.Namespace).Get(ref.Name)
		if err != nil {
			return minReady{from: fromDefault}
		}
		meta, seconds = ds, ds.Spec.MinReadySeconds
	default:
		return minReady{from: fromDefault}
	}
	if meta.GetUID() != ref.UID {
		return minReady{from: fromDefault}
	}
	return minReady{seconds: seconds, from: ref.Kind}
}
