package agent

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	appslisters "k8s.io/client-go/listers/apps/v1"
	"k8s.io/client-go/tools/cache"
)

// testOwners holds one ReplicaSet, StatefulSet and DaemonSet in namespace
// "apps", as the informer caches would after trimOwner.
func testOwners(t *testing.T) owners {
	t.Helper()
	index := func(objs ...any) cache.Indexer {
		i := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		for _, o := range objs {
			trimmed, err := trimOwner(o)
			require.NoError(t, err)
			require.NoError(t, i.Add(trimmed))
		}
		return i
	}
	meta := func(name, uid string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: "apps", UID: types.UID(uid), Labels: map[string]string{"dropped": "by trimOwner"}}
	}
	return owners{
		replicaSets:  appslisters.NewReplicaSetLister(index(&appsv1.ReplicaSet{ObjectMeta: meta("web-7d9f", "rs-uid"), Spec: appsv1.ReplicaSetSpec{MinReadySeconds: 10}})),
		statefulSets: appslisters.NewStatefulSetLister(index(&appsv1.StatefulSet{ObjectMeta: meta("db", "sts-uid"), Spec: appsv1.StatefulSetSpec{MinReadySeconds: 20}})),
		daemonSets:   appslisters.NewDaemonSetLister(index(&appsv1.DaemonSet{ObjectMeta: meta("logs", "ds-uid"), Spec: appsv1.DaemonSetSpec{MinReadySeconds: 30}})),
	}
}

func ownedPod(annotation *string, apiVersion, kind, name, uid string) *corev1.Pod {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "apps", UID: "pod-uid"}}
	if annotation != nil {
		pod.Annotations = map[string]string{MinReadySecondsAnnotation: *annotation}
	}
	if kind != "" {
		controller := true
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, UID: types.UID(uid), Controller: &controller}}
	}
	return pod
}

func TestMinReadySeconds(t *testing.T) {
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		name                    string
		annotation              *string
		apiVersion, kind, owner string
		uid                     string
		want                    minReady
		wantErr                 string
	}{
		{name: "no annotation, no owner: the proposal's default", want: minReady{seconds: 0, from: fromDefault}},
		{name: "annotation", annotation: str("7"), want: minReady{seconds: 7, from: fromAnnotation}},
		{name: "annotation 0", annotation: str("0"), want: minReady{seconds: 0, from: fromAnnotation}},
		{name: "annotation at the int32 limit", annotation: str("2147483647"), want: minReady{seconds: 2147483647, from: fromAnnotation}},
		{name: "annotation beats the owner", annotation: str("3"), apiVersion: "apps/v1", kind: "ReplicaSet", owner: "web-7d9f", uid: "rs-uid", want: minReady{seconds: 3, from: fromAnnotation}},
		{name: "ReplicaSet", apiVersion: "apps/v1", kind: "ReplicaSet", owner: "web-7d9f", uid: "rs-uid", want: minReady{seconds: 10, from: fromReplicaSet}},
		{name: "StatefulSet", apiVersion: "apps/v1", kind: "StatefulSet", owner: "db", uid: "sts-uid", want: minReady{seconds: 20, from: fromStatefulSet}},
		{name: "DaemonSet", apiVersion: "apps/v1", kind: "DaemonSet", owner: "logs", uid: "ds-uid", want: minReady{seconds: 30, from: fromDaemonSet}},
		{name: "deleted owner", apiVersion: "apps/v1", kind: "ReplicaSet", owner: "web-gone", uid: "gone-uid", want: minReady{from: fromDefault}},
		{name: "owner recreated under the same name", apiVersion: "apps/v1", kind: "StatefulSet", owner: "db", uid: "old-sts-uid", want: minReady{from: fromDefault}},
		{name: "other owner kind", apiVersion: "batch/v1", kind: "Job", owner: "migrate", uid: "job-uid", want: minReady{from: fromDefault}},
		{name: "same kind, other group", apiVersion: "example.com/v1", kind: "ReplicaSet", owner: "web-7d9f", uid: "rs-uid", want: minReady{from: fromDefault}},
		{
			name: "bad annotation falls back to the owner", annotation: str("2m"), apiVersion: "apps/v1", kind: "DaemonSet", owner: "logs", uid: "ds-uid",
			want:    minReady{seconds: 30, from: fromDaemonSet},
			wantErr: `invalid minReadySeconds "2m": want a whole number of seconds from 0 to 2147483647`,
		},
		{
			name: "bad annotation without owner falls back to 0", annotation: str("-1"),
			want:    minReady{from: fromDefault},
			wantErr: `invalid minReadySeconds "-1": want a whole number of seconds from 0 to 2147483647`,
		},
		{
			name: "annotation over int32", annotation: str("2147483648"),
			want:    minReady{from: fromDefault},
			wantErr: `invalid minReadySeconds "2147483648": want a whole number of seconds from 0 to 2147483647`,
		},
		{
			name: "empty annotation", annotation: str(""), apiVersion: "apps/v1", kind: "ReplicaSet", owner: "web-7d9f", uid: "rs-uid",
			want:    minReady{seconds: 10, from: fromReplicaSet},
			wantErr: `invalid minReadySeconds "": want a whole number of seconds from 0 to 2147483647`,
		},
		{
			name: "annotation with spaces", annotation: str(" 5"),
			want:    minReady{from: fromDefault},
			wantErr: `invalid minReadySeconds " 5": want a whole number of seconds from 0 to 2147483647`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := testOwners(t).minReadySeconds(ownedPod(tc.annotation, tc.apiVersion, tc.kind, tc.owner, tc.uid))
			if tc.wantErr == "" {
				assert.NoError(t, got.badAnnotation)
			} else {
				assert.EqualError(t, got.badAnnotation, tc.wantErr)
				assert.ErrorIs(t, got.badAnnotation, ErrInvalidMinReadySeconds)
			}
			got.badAnnotation = nil
			assert.Equal(t, tc.want, got)
		})
	}
}

// TestBadAnnotationLoggedOnce: the pod is synced at every status update, and
// one line per bad value tells the operator all there is to know.
func TestBadAnnotationLoggedOnce(t *testing.T) {
	var logs bytes.Buffer
	c := &controller{owners: testOwners(t), log: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))}
	bad := "ten"
	pod := ownedPod(&bad, "apps/v1", "ReplicaSet", "web-7d9f", "rs-uid")
	mem := &podMemory{uid: pod.UID}

	assert.Equal(t, int32(10), c.minReadySeconds(pod, mem))
	assert.Equal(t, int32(10), c.minReadySeconds(pod, mem))
	assert.Equal(t, `level=WARN msg="Ignoring the pod's minReadySeconds annotation" pod=apps/p annotation=podslo.io/min-ready-seconds value=ten minReadySeconds=10 from=ReplicaSet err="invalid minReadySeconds \"ten\": want a whole number of seconds from 0 to 2147483647"`+"\n", logs.String())

	logs.Reset()
	pod.Annotations[MinReadySecondsAnnotation] = "4"
	assert.Equal(t, int32(4), c.minReadySeconds(pod, mem))
	assert.Empty(t, logs.String())

	// Bad again, even with the same value as before: a new line.
	pod.Annotations[MinReadySecondsAnnotation] = "ten"
	assert.Equal(t, int32(10), c.minReadySeconds(pod, mem))
	assert.Contains(t, logs.String(), `value=ten minReadySeconds=10 from=ReplicaSet`)
}

func TestTrimOwner(t *testing.T) {
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps", UID: "u", ResourceVersion: "42", Labels: map[string]string{"a": "b"}},
		Spec:       appsv1.ReplicaSetSpec{MinReadySeconds: 5, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}}}},
		Status:     appsv1.ReplicaSetStatus{Replicas: 3},
	}
	got, err := trimOwner(rs)
	require.NoError(t, err)
	assert.Equal(t, &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "apps", UID: "u", ResourceVersion: "42"},
		Spec:       appsv1.ReplicaSetSpec{MinReadySeconds: 5},
	}, got)
	tomb := cache.DeletedFinalStateUnknown{Key: "apps/web", Obj: rs}
	got, err = trimOwner(tomb)
	require.NoError(t, err)
	assert.Equal(t, tomb, got)
}
