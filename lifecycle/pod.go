package lifecycle

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Pod is the part of a pod that the SLIs read, and what the informer cache
// holds instead of a corev1.Pod: a corev1.Pod struct alone is 1,192 bytes
// before any content, which at 100k pods would be most of podslo's memory.
type Pod struct {
	// ObjectMeta keeps name, namespace, UID, resourceVersion, the creation
	// and deletion fields, and only the labels and annotations podslo uses.
	metav1.ObjectMeta
	NodeName         string
	RuntimeClassName string
	// Volumes are the PVC-backed volumes only.
	Volumes []Volume
	// Conditions are the condition types podslo reads only.
	Conditions []Condition
	// ContainersStarted is the newest state.running.startedAt of the
	// containers, in Unix seconds; 0 when none is running.
	ContainersStarted int64
	// FirstContainerStart is the earliest start time any container or init
	// container shows, running, terminated or in its last state, in Unix
	// seconds; 0 when none started. Containers start only once their
	// sandbox is ready, so one that started before the sandbox's current
	// readiness ran in an earlier sandbox.
	FirstContainerStart int64
	// ContainerKilled is the newest finishedAt of a container or init
	// container that was killed by SIGKILL (exit code 137, not
	// OOMKilled): what the kubelet does to a container, or a native
	// sidecar, that outlives its grace period. 0 when none.
	ContainerKilled int64
	// HasInitContainers: the pod spec has init containers.
	HasInitContainers bool
	// StatefulVolume: the pod has a volume other than a Secret, ConfigMap,
	// downward API, EmptyDir or projected one (a PVC, a generic ephemeral
	// volume, hostPath, NFS, CSI inline, an image volume...): a stateful
	// pod in sig-scalability's start-up SLI, as the kubelet's tracker
	// tells them (isStatefulPod).
	StatefulVolume bool
	// ContainersRestarted: a container or init container shows a
	// restartCount above 0. A lost sandbox's re-creation restarts every
	// container (sandbox.go).
	ContainersRestarted bool
	// Listed: this object came from a list (a first list, or a relist
	// after an outage or an expired watch), which shows only a pod's
	// current state, not from a watch event, which shows every change in
	// turn (readiness.go, restartsUnseen).
	Listed bool
	// Containers and InitContainers count the pod spec's containers and
	// init containers: each has its image pulled, or found present, once
	// before it first starts (pulls.go). ContainersRunning counts the
	// containers (not init containers) whose state is running: all of them
	// end the start-up SLI (startup.go).
	Containers, InitContainers, ContainersRunning uint16
	// Received is when podslo's pod watch received this object, in Unix
	// milliseconds, if the watch was current then (informers); 0 for an
	// object from a list, a relist, or a watch just resumed, which may show
	// transitions that happened long before. See precise.go.
	Received int64
	// RuntimeClass and StorageClass are the pod's runtime_class and
	// storage_class label values, resolved by the watch when it delivers
	// the pod (the storage class needs the PVC and StorageClass caches).
	RuntimeClass, StorageClass string
	// NodeLabels are the labels of the pod's node that the histogram
	// labels read (--histogram-label NAME=node-label:KEY), as the Node
	// watch shows them when it delivers the pod; nil when none is
	// configured or the node is unknown. Shared with the watch: read only.
	NodeLabels map[string]string
	// OwnerKind is the pod's workload kind (--histogram-label
	// NAME=owner-kind), resolved by the watch; empty when not configured.
	OwnerKind string
}

// Condition is a pod condition without the human-readable reason and
// message.
type Condition struct {
	Type   corev1.PodConditionType
	Status corev1.ConditionStatus
	// LastTransitionTime is in Unix seconds, the precision the API keeps;
	// 0 when unset.
	LastTransitionTime int64
}

// Volume is a PVC-backed volume: a persistentVolumeClaim, or a generic
// ephemeral volume whose claim the ephemeral volume controller creates.
type Volume struct {
	// Claim is the PVC name; for an ephemeral volume, <pod>-<volume>.
	Claim string
	// Ephemeral marks a generic ephemeral volume; TemplateClass is then
	// the storageClassName of its claim template, nil when unset.
	Ephemeral     bool
	TemplateClass *string
}

// Condition returns the first condition of the given types present, in the
// order of types, or nil.
func (p *Pod) Condition(types ...corev1.PodConditionType) *Condition {
	for _, t := range types {
		for i := range p.Conditions {
			if p.Conditions[i].Type == t {
				return &p.Conditions[i]
			}
		}
	}
	return nil
}

// GetObjectKind implements runtime.Object, so that client-go's listers and
// tools accept a Pod.
func (p *Pod) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object.
func (p *Pod) DeepCopyObject() runtime.Object {
	if p == nil {
		return nil
	}
	c := *p
	p.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	c.Volumes = append([]Volume(nil), p.Volumes...)
	for i := range c.Volumes {
		if tc := c.Volumes[i].TemplateClass; tc != nil {
			v := *tc
			c.Volumes[i].TemplateClass = &v
		}
	}
	c.Conditions = append([]Condition(nil), p.Conditions...)
	c.NodeLabels = maps.Clone(p.NodeLabels)
	return &c
}
