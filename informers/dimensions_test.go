package informers

import (
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/podslo/podslo/lifecycle"
)

func objMeta(name string, uid types.UID, labels map[string]string, controller ...metav1.OwnerReference) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: uid, Labels: labels, OwnerReferences: controller}}
}

func ctrl(apiVersion, kind string, uid types.UID) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: "owner", UID: uid, Controller: &yes}
}

// TestNodeLabels: the Node store keeps only the requested keys, follows
// label changes and deletions, and a relist replaces it whole.
func TestNodeLabels(t *testing.T) {
	var events []string
	n := newNodeLabels([]string{"zone", "pool"}, func(e string) { events = append(events, e) })
	assert.False(t, n.HasSynced())
	require.NoError(t, n.Replace([]any{
		objMeta("a", "ua", map[string]string{"zone": "z1", "pool": "gpu", "kubernetes.io/hostname": "a"}),
		objMeta("b", "ub", map[string]string{"other": "x"}),
	}, "1"))
	assert.True(t, n.HasSynced())
	assert.Equal(t, map[string]string{"zone": "z1", "pool": "gpu"}, n.of("a"), "only the requested keys")
	assert.Nil(t, n.of("b"), "none of them")
	assert.Nil(t, n.of(""), "an unscheduled pod")
	kept := n.of("a")

	require.NoError(t, n.Update(objMeta("a", "ua", map[string]string{"zone": "z2"})))
	assert.Equal(t, map[string]string{"zone": "z2"}, n.of("a"), "a changed label")
	assert.Equal(t, map[string]string{"zone": "z1", "pool": "gpu"}, kept, "a map handed out is never changed")
	require.NoError(t, n.Add(objMeta("c", "uc", map[string]string{"zone": "z3"})))
	require.NoError(t, n.Delete(cache.DeletedFinalStateUnknown{Key: "c", Obj: objMeta("c", "uc", nil)}))
	assert.Nil(t, n.of("c"), "a deleted node is unknown")
	require.NoError(t, n.Replace([]any{objMeta("b", "ub", map[string]string{"zone": "z9"})}, "2"))
	assert.Nil(t, n.of("a"), "gone from the relist")
	assert.Equal(t, map[string]string{"zone": "z9"}, n.of("b"))
	assert.Equal(t, []string{"add", "add", "update", "add", "delete", "update", "delete"}, events, "a list counts as a shared informer's handlers would")
	assert.Error(t, n.Add("not metadata"))
}

// TestOwnerKind resolves every kind of owner, exactly: through a
// ReplicaSet or a Job to its controller, never by name.
func TestOwnerKind(t *testing.T) {
	now := time.Unix(1700000000, 0)
	clock := func() time.Time { return now }
	rs, jobs := newOwners(clock, func(string) {}), newOwners(clock, func(string) {})
	require.NoError(t, rs.Replace([]any{
		objMeta("web-7d9f8", "rs-deploy", nil, ctrl("apps/v1", "Deployment", "d1")),
		objMeta("bare", "rs-bare", nil),
		objMeta("rollout-abc", "rs-rollout", nil, ctrl("argoproj.io/v1alpha1", "Rollout", "r1")),
		// A reference that is not a controller does not count.
		objMeta("adopted", "rs-ref", nil, metav1.OwnerReference{APIVersion: "apps/v1", Kind: "Deployment", UID: "d2"}),
	}, "1"))
	require.NoError(t, jobs.Replace([]any{
		objMeta("nightly-28000000", "job-cron", nil, ctrl("batch/v1", "CronJob", "c1")),
		objMeta("once", "job-bare", nil),
	}, "1"))
	r := &ownerResolver{replicaSets: map[string]*owners{"": rs}, jobs: map[string]*owners{"": jobs}}
	pod := func(refs ...metav1.OwnerReference) *lifecycle.Pod {
		return &lifecycle.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", OwnerReferences: refs}}
	}
	for name, tc := range map[string]struct {
		pod  *lifecycle.Pod
		want string
	}{
		"Deployment through its ReplicaSet":  {pod(ctrl("apps/v1", "ReplicaSet", "rs-deploy")), "Deployment"},
		"a bare ReplicaSet":                  {pod(ctrl("apps/v1", "ReplicaSet", "rs-bare")), "ReplicaSet"},
		"another controller's ReplicaSet":    {pod(ctrl("apps/v1", "ReplicaSet", "rs-rollout")), "Rollout"},
		"a ReplicaSet owned, not controlled": {pod(ctrl("apps/v1", "ReplicaSet", "rs-ref")), "ReplicaSet"},
		"an unknown ReplicaSet":              {pod(ctrl("apps/v1", "ReplicaSet", "rs-unknown")), "ReplicaSet"},
		"a ReplicaSet of another group":      {pod(ctrl("example.com/v1", "ReplicaSet", "rs-deploy")), "ReplicaSet"},
		"CronJob through its Job":            {pod(ctrl("batch/v1", "Job", "job-cron")), "CronJob"},
		"a bare Job":                         {pod(ctrl("batch/v1", "Job", "job-bare")), "Job"},
		"a StatefulSet":                      {pod(ctrl("apps/v1", "StatefulSet", "s1")), "StatefulSet"},
		"a DaemonSet":                        {pod(ctrl("apps/v1", "DaemonSet", "ds1")), "DaemonSet"},
		"a static pod's mirror":              {pod(ctrl("v1", "Node", "n1")), "Node"},
		"another controller, as is":          {pod(ctrl("example.com/v1", "Workflow", "w1")), "Workflow"},
		"no controller":                      {pod(), OwnerNone},
	} {
		assert.Equal(t, tc.want, r.kind(tc.pod), name)
	}
	// Per namespace: a namespace's watch knows only its own owners.
	scoped := &ownerResolver{replicaSets: map[string]*owners{"other": rs}, jobs: map[string]*owners{}}
	assert.Equal(t, "ReplicaSet", scoped.kind(pod(ctrl("apps/v1", "ReplicaSet", "rs-deploy"))), "the pod's namespace has no watch")
}

// TestOwnerDeleted: a deleted ReplicaSet's controller is remembered for
// ownerMemory, also when the deletion is seen only as a relist's absence;
// then the pod's own owner kind remains.
func TestOwnerDeleted(t *testing.T) {
	now := time.Unix(1700000000, 0)
	var events []string
	rs := newOwners(func() time.Time { return now }, func(e string) { events = append(events, e) })
	require.NoError(t, rs.Replace([]any{objMeta("a", "rs-a", nil, ctrl("apps/v1", "Deployment", "d"))}, "1"))
	require.NoError(t, rs.Add(objMeta("b", "rs-b", nil, ctrl("apps/v1", "Deployment", "d"))))
	r := &ownerResolver{replicaSets: map[string]*owners{"": rs}}
	pod := func(uid types.UID) *lifecycle.Pod {
		return &lifecycle.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", OwnerReferences: []metav1.OwnerReference{ctrl("apps/v1", "ReplicaSet", uid)}}}
	}

	now = now.Add(2 * time.Minute)
	require.NoError(t, rs.Delete(objMeta("a", "rs-a", nil, ctrl("apps/v1", "Deployment", "d"))))
	require.NoError(t, rs.Replace(nil, "2"), "b deleted while the watch was down")
	assert.Equal(t, "Deployment", r.kind(pod("rs-a")), "just deleted: remembered")
	assert.Equal(t, "Deployment", r.kind(pod("rs-b")), "gone from a relist: remembered")

	now = now.Add(ownerMemory - time.Second)
	require.NoError(t, rs.Delete(objMeta("x", "rs-x", nil)), "a purge pass")
	assert.Equal(t, "Deployment", r.kind(pod("rs-a")), "still within the memory")

	now = now.Add(2 * time.Second)
	assert.Equal(t, "ReplicaSet", r.kind(pod("rs-a")), "forgotten: the pod's own owner kind")
	assert.Equal(t, "ReplicaSet", r.kind(pod("rs-b")))
	now = now.Add(time.Minute)
	require.NoError(t, rs.Delete(objMeta("x", "rs-x", nil)), "the next purge pass")
	rs.mu.RLock()
	assert.Empty(t, rs.byUID, "nothing deleted is kept past the memory")
	rs.mu.RUnlock()

	require.NoError(t, rs.Add(objMeta("a", "rs-a", nil, ctrl("apps/v1", "Deployment", "d"))))
	require.NoError(t, rs.Delete(objMeta("a", "rs-a", nil)))
	require.NoError(t, rs.Add(objMeta("a", "rs-a", nil, ctrl("apps/v1", "Deployment", "d"))))
	now = now.Add(2 * ownerMemory)
	require.NoError(t, rs.Delete(objMeta("x", "rs-x", nil)))
	assert.Equal(t, "Deployment", r.kind(pod("rs-a")), "seen again after its deletion: it exists")
	assert.Equal(t, []string{"add", "add", "delete", "delete", "delete", "delete", "add", "delete", "add", "delete"}, events, "a relist counts the owners it no longer has")
}

func TestInternKind(t *testing.T) {
	a := internKind(string([]byte("Workflow")))
	b := internKind(string([]byte("Workflow")))
	assert.Equal(t, "Workflow", a)
	assert.Equal(t, unsafe.StringData(a), unsafe.StringData(b), "one copy of a kind")
}

// TestNodeSelector: per-node mode watches its own node only.
func TestNodeSelector(t *testing.T) {
	assert.Equal(t, "metadata.name=node-a", nodeSelector("node-a"))
	assert.Equal(t, "", nodeSelector(""), "every node")
}
