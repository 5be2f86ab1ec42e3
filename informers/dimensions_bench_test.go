package informers

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podslo/podslo/lifecycle"
)

// benchNode is a node's metadata as the metadata watch sends it: the
// labels a cloud node carries, annotations and managed fields, none of
// which but the requested labels the store keeps.
func benchNode(i int) *metav1.PartialObjectMetadata {
	name := fmt.Sprintf("ip-10-0-%d-%d.eu-west-1.compute.internal", i/250, i%250)
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: name, UID: types.UID(uuid.NewString()), ResourceVersion: fmt.Sprint(1000 + i),
		Labels: map[string]string{
			"beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
			"kubernetes.io/hostname": name, "node.kubernetes.io/instance-type": "m6i.2xlarge",
			"topology.kubernetes.io/region": "eu-west-1", "topology.kubernetes.io/zone": fmt.Sprintf("eu-west-1%c", 'a'+i%3),
			"eks.amazonaws.com/nodegroup": fmt.Sprintf("pool-%d", i%4), "eks.amazonaws.com/capacityType": "ON_DEMAND",
		},
		Annotations:   map[string]string{"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: "Update"}, {Manager: "kube-controller-manager", Operation: "Update"}},
	}}
}

// benchReplicaSet is a Deployment's ReplicaSet's metadata as the metadata
// watch sends it.
func benchReplicaSet(i int) *metav1.PartialObjectMetadata {
	yes := true
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
		Name: fmt.Sprintf("web-%05d-7d9f8b6c5d", i), Namespace: "team-payments", UID: types.UID(uuid.NewString()), ResourceVersion: fmt.Sprint(1000 + i),
		Labels:          map[string]string{"app.kubernetes.io/name": "web", "pod-template-hash": "7d9f8b6c5d"},
		Annotations:     map[string]string{"deployment.kubernetes.io/desired-replicas": "3", "deployment.kubernetes.io/max-replicas": "4", "deployment.kubernetes.io/revision": "7"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "Deployment", Name: fmt.Sprintf("web-%05d", i), UID: types.UID(uuid.NewString()), Controller: &yes, BlockOwnerDeletion: &yes}},
		ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: "Update"}},
	}}
}

// BenchmarkDimensionMemory reports the live heap the node-label and
// owner-kind watches keep per object: a node's requested labels (here
// topology.kubernetes.io/zone and a node pool label) by name, and a
// ReplicaSet's (or Job's) controller kind by UID. Each object arrives as
// the metadata watch decodes it and becomes garbage but for what the
// store keeps.
func BenchmarkDimensionMemory(b *testing.B) {
	b.Run("nodes=5000", func(b *testing.B) {
		const n = 5000
		for range b.N {
			nodes := newNodeLabels([]string{"topology.kubernetes.io/zone", "eks.amazonaws.com/nodegroup"}, func(string) {})
			before := heapInUse()
			for i := range n {
				if err := nodes.Add(benchNode(i)); err != nil {
					b.Fatal(err)
				}
			}
			after := heapInUse()
			runtime.KeepAlive(nodes)
			b.ReportMetric(float64(after-before)/n, "heap-B/node")
		}
	})
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("replicasets=%d", n), func(b *testing.B) {
			for range b.N {
				rs := newOwners(time.Now, func(string) {})
				before := heapInUse()
				for i := range n {
					if err := rs.Add(benchReplicaSet(i)); err != nil {
						b.Fatal(err)
					}
				}
				after := heapInUse()
				runtime.KeepAlive(rs)
				b.ReportMetric(float64(after-before)/float64(n), "heap-B/replicaset")
			}
		})
	}
}

// BenchmarkResolveDimensions is what the node-label and owner-kind labels
// add to each pod the watch delivers: the node's labels by name and the
// owner kind through the pod's ReplicaSet, among 100k ReplicaSets and 5000
// nodes.
func BenchmarkResolveDimensions(b *testing.B) {
	nodes := newNodeLabels([]string{"topology.kubernetes.io/zone"}, func(string) {})
	rs := newOwners(time.Now, func(string) {})
	var uids []types.UID
	for i := range 100_000 {
		m := benchReplicaSet(i)
		uids = append(uids, m.UID)
		if err := rs.Add(m); err != nil {
			b.Fatal(err)
		}
	}
	var names []string
	for i := range 5000 {
		m := benchNode(i)
		names = append(names, m.Name)
		if err := nodes.Add(m); err != nil {
			b.Fatal(err)
		}
	}
	r := &ownerResolver{replicaSets: map[string]*owners{"": rs}, jobs: map[string]*owners{"": newOwners(time.Now, func(string) {})}}
	yes := true
	pods := make([]*lifecycle.Pod, 1000)
	for i := range pods {
		pods[i] = &lifecycle.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team-payments", OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", UID: uids[i*97], Controller: &yes}}},
			NodeName:   names[i%len(names)],
		}
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		p := pods[i%len(pods)]
		p.NodeLabels = nodes.of(p.NodeName)
		p.OwnerKind = r.kind(p)
		i++
	}
	if pods[0].OwnerKind != "Deployment" || pods[0].NodeLabels["topology.kubernetes.io/zone"] == "" {
		b.Fatalf("resolved %q, %v", pods[0].OwnerKind, pods[0].NodeLabels)
	}
}

// BenchmarkDecodePodControllerRef is the pod decoder without and with the
// controller reference the owner-kind label reads.
func BenchmarkDecodePodControllerRef(b *testing.B) {
	full := benchPod(1)
	yes := true
	full.OwnerReferences[0].Controller = &yes
	raw, err := full.Marshal()
	if err != nil {
		b.Fatal(err)
	}
	for _, keep := range []bool{false, true} {
		b.Run(fmt.Sprintf("controllerRef=%t", keep), func(b *testing.B) {
			t := &trimmer{controllerRef: keep, conditionTypes: trimmers(b)["defaults"].conditionTypes}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := t.decodePod(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEventWatchMemory reports the live heap each event watch keeps
// per event it has delivered: its key (namespace/name, the name the
// kubelet's recorder makes of the pod's and a hex suffix) and UID, what
// the bare reflector's DeltaFIFO needs to tell a relist's deletions
// (podKeys, as the pod watch keeps). The event itself is trimmed, handed
// on and dropped. The Pulled and Failed watches keep the events of the
// last hour (the API server's event TTL): about one Pulled event per
// container started in that hour.
func BenchmarkEventWatchMemory(b *testing.B) {
	const n = 100_000
	for range b.N {
		keys := newPodKeys()
		before := heapInUse()
		for i := range n {
			keys.set(fmt.Sprintf("team-payments/web-%05d-7d9f8b6c5d-x2k9p.%016x", i, 0x17d8a3f5c2b1e4a0+i), types.UID(uuid.NewString()))
		}
		after := heapInUse()
		runtime.KeepAlive(keys)
		b.ReportMetric(float64(after-before)/n, "heap-B/event")
	}
}
