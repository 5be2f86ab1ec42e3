package informers

import (
	"context"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/podslo/podslo/internal/kube/kubetest"
	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/scope"
)

// dimensions records each delivered pod's node labels and owner kind.
type dimensions struct {
	mu     sync.Mutex
	byName map[string]string
	synced chan struct{}
}

func (d *dimensions) Pod(p *lifecycle.Pod) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.byName[p.Name] = p.NodeLabels["zone"] + "/" + p.OwnerKind
}
func (d *dimensions) Deleted(types.UID, string, *lifecycle.Pod)        {}
func (d *dimensions) UserError(types.UID, string)                      {}
func (d *dimensions) ImagePull(types.UID, string, lifecycle.PullEvent) {}
func (d *dimensions) Synced(func() map[types.UID]struct{}, func() bool) {
	close(d.synced)
}

func metadataOf(apiVersion, kind, ns, name string, uid types.UID, labels map[string]string, owner ...metav1.OwnerReference) runtime.Object {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: apiVersion, Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: uid, Labels: labels, OwnerReferences: owner},
	}
}

// TestWatcherResolvesDimensions runs the Watcher with a namespace
// allowlist: the first pass over the pods already has every node's labels
// and every owner's controller (the watches sync first), and each
// namespace's pods are resolved by that namespace's ReplicaSet and Job
// watches only.
func TestWatcherResolvesDimensions(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset()
	pod := func(ns, name, node string, owner *metav1.OwnerReference) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(name)}, Spec: corev1.PodSpec{NodeName: node}}
		if owner != nil {
			p.OwnerReferences = []metav1.OwnerReference{*owner}
		}
		_, err := client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	rsA := ctrl("apps/v1", "ReplicaSet", "rs-a")
	job := ctrl("batch/v1", "Job", "job-b")
	pod("team-a", "web", "n1", &rsA)
	pod("team-b", "borrowed", "n2", &rsA)
	pod("team-b", "nightly", "n3", &job)
	sch := metadatafake.NewTestScheme()
	for _, gvk := range []schema.GroupVersionKind{{Version: "v1", Kind: "Node"}, {Group: "apps", Version: "v1", Kind: "ReplicaSet"}, {Group: "batch", Version: "v1", Kind: "Job"}} {
		sch.AddKnownTypeWithName(gvk, &metav1.PartialObjectMetadata{})
		sch.AddKnownTypeWithName(gvk.GroupVersion().WithKind(gvk.Kind+"List"), &metav1.PartialObjectMetadataList{})
	}
	md := metadatafake.NewSimpleMetadataClient(sch,
		metadataOf("v1", "Node", "", "n1", "n1", map[string]string{"zone": "z1", "other": "x"}),
		metadataOf("v1", "Node", "", "n2", "n2", nil),
		metadataOf("apps/v1", "ReplicaSet", "team-a", "web-1", "rs-a", nil, ctrl("apps/v1", "Deployment", "d")),
		metadataOf("batch/v1", "Job", "team-b", "nightly-1", "job-b", nil, ctrl("batch/v1", "CronJob", "c")),
	)
	h := &dimensions{byName: map[string]string{}, synced: make(chan struct{})}
	w, err := New(kubetest.Wrap(client), h, Options{
		NodeLabels: []string{"zone"}, OwnerKind: true, Metadata: md,
		Scope: scope.Scope{Namespaces: []string{"team-a", "team-b"}, TotalShards: 1},
	})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- w.Start(ctx) }()
	select {
	case <-h.synced:
	case err := <-done:
		t.Fatalf("watcher stopped: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("never synced")
	}
	h.mu.Lock()
	assert.Equal(t, map[string]string{
		"web":      "z1/Deployment",
		"borrowed": "/ReplicaSet", // no such label on n2; team-b's watch has no rs-a
		"nightly":  "/CronJob",    // n3 unknown
	}, h.byName)
	h.mu.Unlock()
	cancel()
	require.NoError(t, <-done)
}

// Without a histogram label that needs them, the Node, ReplicaSet and Job
// watches cost nothing: not one request reaches their client, and no
// metadata client is made.
func TestDimensionWatchesOnlyWhenUsed(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "p", UID: "p"}, Spec: corev1.PodSpec{NodeName: "n1"}})
	md := metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme())
	h := &dimensions{byName: map[string]string{}, synced: make(chan struct{})}
	w, err := New(kubetest.Wrap(client), h, Options{Metadata: md, Scope: scope.Scope{TotalShards: 1}})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- w.Start(ctx) }()
	select {
	case <-h.synced:
	case err := <-done:
		t.Fatalf("watcher stopped: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("never synced")
	}
	assert.Equal(t, map[string]string{"p": "/"}, func() map[string]string { h.mu.Lock(); defer h.mu.Unlock(); return maps.Clone(h.byName) }())
	assert.Empty(t, md.Actions(), "no Node, ReplicaSet or Job request without a histogram label that uses them")
	cancel()
	require.NoError(t, <-done)

	// And without Options.Metadata, none is needed.
	_, err = New(kubetest.Wrap(client), h, Options{})
	require.NoError(t, err)
	_, err = New(kubetest.Wrap(client), h, Options{OwnerKind: true})
	assert.ErrorContains(t, err, "need a metadata client")
}
