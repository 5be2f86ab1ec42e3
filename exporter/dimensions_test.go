package exporter

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/podslo/podslo/internal/testenv"
)

const zoneKey = "topology.kubernetes.io/zone"

func controllerRef(apiVersion, kind, name string, uid types.UID) *metav1.OwnerReference {
	yes := true
	return &metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: &yes}
}

func createNode(t *testing.T, c kubernetes.Interface, name string, labels map[string]string) {
	t.Helper()
	_, err := c.CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func labelNode(t *testing.T, c kubernetes.Interface, name string, labels map[string]string) {
	t.Helper()
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	require.NoError(t, err)
	_, err = c.CoreV1().Nodes().Patch(context.Background(), name, types.MergePatchType, body, metav1.PatchOptions{})
	require.NoError(t, err)
}

// createReplicaSet creates a ReplicaSet that owner, if set, controls. No
// controller manager runs: nothing creates its pods, nothing deletes them.
func createReplicaSet(t *testing.T, c kubernetes.Interface, ns, name string, owner *metav1.OwnerReference) *appsv1.ReplicaSet {
	t.Helper()
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: appsv1.ReplicaSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"rs": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"rs": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}
	if owner != nil {
		rs.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	created, err := c.AppsV1().ReplicaSets(ns).Create(context.Background(), rs, metav1.CreateOptions{})
	require.NoError(t, err)
	return created
}

func createJob(t *testing.T, c kubernetes.Interface, ns, name string, owner *metav1.OwnerReference) *batchv1.Job {
	t.Helper()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}},
		}}},
	}
	if owner != nil {
		job.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	created, err := c.BatchV1().Jobs(ns).Create(context.Background(), job, metav1.CreateOptions{})
	require.NoError(t, err)
	return created
}

// TestNodeAndOwnerDimensionsOnRealAPIServer: --histogram-label
// zone=node-label:topology.kubernetes.io/zone and kind=owner-kind on a real
// API server. The zone is the node's label when each observation is made:
// a pod observed before its node's label changes and one observed after
// are in different series, and the first pod's own termination, observed
// after the change, in the new one. The kind goes through the ReplicaSet
// to its Deployment and through the Job to its CronJob, exactly, and
// stays Deployment for the termination of a pod whose ReplicaSet was
// deleted first (as deleting a Deployment does).
func TestNodeAndOwnerDimensionsOnRealAPIServer(t *testing.T) {
	env := testenv.Start(t)
	c := env.Client
	const ns = "dims"
	testenv.CreateNamespace(t, c, ns, nil)
	createNode(t, c, "node-a", map[string]string{zoneKey: "z1", "kubernetes.io/hostname": "node-a"})
	// The owners exist before the exporter starts, and the first list of
	// the ReplicaSet and Job watches has them before any pod: the other
	// path, an owner created while it runs, is the web-2 ReplicaSet below.
	web := createReplicaSet(t, c, ns, "web-1", controllerRef("apps/v1", "Deployment", "web", "deployment-uid"))
	bare := createReplicaSet(t, c, ns, "bare", nil)
	nightly := createJob(t, c, ns, "nightly-29000000", controllerRef("batch/v1", "CronJob", "nightly", "cronjob-uid"))
	once := createJob(t, c, ns, "once", nil)

	url := startExporter(t, Options{
		Kubeconfig:      env.Kubeconfig,
		StateDir:        t.TempDir(),
		HistogramLabels: []string{"zone=node-label:" + zoneKey, "kind=owner-kind"},
	})

	// sandboxIn creates a pod on node whose sandbox was ready d seconds
	// after it was scheduled, in the past.
	sandboxIn := func(name, node string, owner *metav1.OwnerReference, d time.Duration) *corev1.Pod {
		p := testenv.CreatePod(t, c, ns, testenv.PodSpec{Name: name, Node: node, Owner: owner})
		ct := p.CreationTimestamp.Time
		kubelet(t, c, p, condAt(corev1.PodScheduled, corev1.ConditionTrue, ct.Add(-30*time.Second)), condAt(corev1.PodReadyToStartContainers, corev1.ConditionTrue, ct.Add(-30*time.Second+d)))
		eventuallyValue(t, url, "podslo_pod_sandbox_creation_seconds", map[string]string{"pod": name}, d.Seconds())
		return p
	}
	rsRef := func(rs *appsv1.ReplicaSet) *metav1.OwnerReference {
		return controllerRef("apps/v1", "ReplicaSet", rs.Name, rs.UID)
	}
	jobRef := func(j *batchv1.Job) *metav1.OwnerReference {
		return controllerRef("batch/v1", "Job", j.Name, j.UID)
	}

	first := sandboxIn("web-1-a", "node-a", rsRef(web), 2*time.Second)
	labelNode(t, c, "node-a", map[string]string{zoneKey: "z2"})
	eventuallyValue(t, url, "podslo_informer_events_total", map[string]string{"resource": "nodes", "event": "update"}, 1)
	sandboxIn("web-1-b", "node-a", rsRef(web), 3*time.Second)
	sandboxIn("lost", "node-gone", nil, 4*time.Second)
	sandboxIn("nightly-29000000-x", "node-a", jobRef(nightly), 5*time.Second)
	sandboxIn("once-x", "node-a", jobRef(once), 6*time.Second)
	sandboxIn("db-0", "node-a", controllerRef("apps/v1", "StatefulSet", "db", "statefulset-uid"), 8*time.Second)
	sandboxIn("bare-x", "node-a", rsRef(bare), 10*time.Second)
	// An owner created while the exporter runs (the third ReplicaSet the
	// watch adds): its pod is created once the watch has it, as the ReplicaSet controller creates pods only
	// after their ReplicaSet.
	web2 := createReplicaSet(t, c, ns, "web-2", controllerRef("apps/v1", "Deployment", "web", "deployment-uid"))
	eventuallyValue(t, url, "podslo_informer_events_total", map[string]string{"resource": "replicasets", "event": "add"}, 3)
	sandboxIn("web-2-a", "node-a", rsRef(web2), 20*time.Second)

	// The Deployment is deleted: the garbage collector deletes its
	// ReplicaSet, then its pods, which terminate after the ReplicaSet is
	// gone.
	require.NoError(t, c.AppsV1().ReplicaSets(ns).Delete(context.Background(), web.Name, metav1.DeleteOptions{}))
	eventuallyValue(t, url, "podslo_informer_events_total", map[string]string{"resource": "replicasets", "event": "delete"}, 1)
	r := deleteWithGrace(t, c, first, 30)
	kubelet(t, c, first, condAt(corev1.PodReadyToStartContainers, corev1.ConditionFalse, r.Add(4*time.Second)))

	const (
		creation    = "podslo_sandbox_creation_duration_seconds"
		termination = "podslo_termination_duration_seconds"
	)
	series := func(zone, kind string) string {
		return `kind="` + kind + `",runtime_class="none",storage_class="none",zone="` + zone + `"`
	}
	eventuallyMetrics(t, url, `
# HELP `+creation+` Time from PodScheduled to the first PodReadyToStartContainers=True of each pod (KEP-3085), observed once per pod UID.
# TYPE `+creation+` histogram
`+histogramText(creation, series("z1", "Deployment"), 2)+`
`+histogramText(creation, series("z2", "Deployment"), 3, 20)+`
`+histogramText(creation, series("", "none"), 4)+`
`+histogramText(creation, series("z2", "CronJob"), 5)+`
`+histogramText(creation, series("z2", "Job"), 6)+`
`+histogramText(creation, series("z2", "StatefulSet"), 8)+`
`+histogramText(creation, series("z2", "ReplicaSet"), 10)+`
# HELP `+termination+` Time from the deletion request (deletionTimestamp minus the grace period) to the sandbox condition turning False (KEP-3085 Story 5), observed once per pod UID.
# TYPE `+termination+` histogram
`+histogramText(termination, series("z2", "Deployment"), 4)+`
`, creation, termination)
}
