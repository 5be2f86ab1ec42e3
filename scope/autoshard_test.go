package scope

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/podslo/podslo/internal/kube/kubetest"
)

func statefulSetAndPod(name string, replicas int32, ordinal string) (*appsv1.StatefulSet, *corev1.Pod) {
	set := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "monitoring", Name: name, UID: "set"}, Spec: appsv1.StatefulSetSpec{Replicas: &replicas}}
	yes := true
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "monitoring", Name: name + "-" + ordinal, OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "apps/v1", Kind: "StatefulSet", Name: name, UID: "set", Controller: &yes},
	}}}
	return set, pod
}

func TestAutoshardResolve(t *testing.T) {
	for _, tc := range []struct {
		name               string
		replicas           int32
		ordinal            string
		shard, total       int
		err                string
		notControlled      bool
		podMissing, setGet bool
	}{
		{name: "second of three", replicas: 3, ordinal: "1", shard: 1, total: 3},
		{name: "scaled away", replicas: 2, ordinal: "2", err: `pod "podslo-exporter-2" has ordinal 2, past the StatefulSet's 2 replicas`},
		{name: "no ordinal", replicas: 2, ordinal: "x", err: `pod "podslo-exporter-x" has no ordinal of StatefulSet "podslo-exporter"`},
		{name: "not a StatefulSet pod", replicas: 2, ordinal: "0", notControlled: true, err: "is not controlled by a StatefulSet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set, pod := statefulSetAndPod("podslo-exporter", tc.replicas, tc.ordinal)
			if tc.notControlled {
				pod.OwnerReferences = nil
			}
			client := fake.NewClientset(set, pod)
			shard, total, name, err := Autoshard{Pod: pod.Name, Namespace: "monitoring"}.Resolve(context.Background(), kubetest.Wrap(client))
			if tc.err != "" {
				assert.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, []any{tc.shard, tc.total, "podslo-exporter"}, []any{shard, total, name})
		})
	}
	_, _, _, err := Autoshard{Pod: "gone", Namespace: "monitoring"}.Resolve(context.Background(), kubetest.Wrap(fake.NewClientset()))
	assert.ErrorContains(t, err, "autosharding: get own pod monitoring/gone")
	assert.ErrorContains(t, Autoshard{Pod: "p"}.Validate(), "--pod and --pod-namespace go together")
	assert.NoError(t, Autoshard{}.Validate())
}

// Scaling the StatefulSet stops the exporter with ErrShardingChanged.
func TestAutoshardWatchReplicas(t *testing.T) {
	set, pod := statefulSetAndPod("podslo-exporter", 2, "0")
	client := fake.NewClientset(set, pod)
	a := Autoshard{Pod: pod.Name, Namespace: "monitoring"}
	done := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { done <- a.WatchReplicas(ctx, kubetest.Wrap(client), set.Name, 2) }()
	scaled := set.DeepCopy()
	three := int32(3)
	scaled.Spec.Replicas = &three
	_, err := client.AppsV1().StatefulSets("monitoring").Update(context.Background(), scaled, metav1.UpdateOptions{})
	require.NoError(t, err)
	select {
	case err := <-done:
		assert.ErrorIs(t, err, ErrShardingChanged)
	case <-time.After(30 * time.Second):
		t.Fatal("no ErrShardingChanged after scaling")
	}
}
