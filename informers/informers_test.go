package informers

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	storagelisters "k8s.io/client-go/listers/storage/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/podslo/podslo/internal/kube/kubetest"
	"github.com/podslo/podslo/lifecycle"
)

func ptr[T any](v T) *T { return &v }

func resolver(t testing.TB, objs ...any) *classResolver {
	t.Helper()
	pvcs := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	classes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	for _, o := range objs {
		switch o.(type) {
		case *corev1.PersistentVolumeClaim:
			require.NoError(t, pvcs.Add(o))
		case *storagev1.StorageClass:
			require.NoError(t, classes.Add(o))
		}
	}
	return &classResolver{pvcs: corelisters.NewPersistentVolumeClaimLister(pvcs), classes: storagelisters.NewStorageClassLister(classes)}
}

func pvc(name string, class *string) *corev1.PersistentVolumeClaim {
	return &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: class}}
}

func class(name string, isDefault bool, created time.Time) *storagev1.StorageClass {
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(created)}}
	if isDefault {
		sc.Annotations = map[string]string{defaultClassAnnotation: "true"}
	}
	return sc
}

// podWithVolumes is the trimmed form of a pod with these volumes.
func podWithVolumes(vols ...corev1.Volume) *lifecycle.Pod {
	full := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}, Spec: corev1.PodSpec{Volumes: vols}}
	return (&trimmer{}).mustPod(full)
}

func claimVol(claim string) corev1.Volume {
	return corev1.Volume{Name: "v-" + claim, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}
}

func ephemeralVol(name string, class *string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{
		VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: class}},
	}}}
}

func TestStorageClass(t *testing.T) {
	t0 := time.Unix(1700000000, 0)
	tests := []struct {
		name string
		objs []any
		pod  *lifecycle.Pod
		want string
	}{
		{"no volumes", nil, podWithVolumes(), "none"},
		{"only non-PVC volumes", nil, podWithVolumes(corev1.Volume{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}), "none"},
		{"one claim", []any{pvc("data", ptr("fast"))}, podWithVolumes(claimVol("data")), "fast"},
		{"missing claim", nil, podWithVolumes(claimVol("data")), "unknown"},
		{"claim without class takes the default", []any{pvc("data", nil), class("fast", true, t0)}, podWithVolumes(claimVol("data")), "fast"},
		{"claim with empty class and no default", []any{pvc("data", ptr(""))}, podWithVolumes(claimVol("data")), "unknown"},
		{"newest of two defaults wins", []any{pvc("data", nil), class("old", true, t0), class("new", true, t0.Add(time.Hour)), class("other", false, t0.Add(2*time.Hour))}, podWithVolumes(claimVol("data")), "new"},
		{"sorted, unique, comma-joined", []any{pvc("a", ptr("slow")), pvc("b", ptr("fast")), pvc("c", ptr("slow"))}, podWithVolumes(claimVol("a"), claimVol("b"), claimVol("c")), "fast,slow"},
		{"ephemeral before its claim exists: the template", nil, podWithVolumes(ephemeralVol("scratch", ptr("local"))), "local"},
		{"ephemeral claim exists: the claim", []any{pvc("web-scratch", ptr("retro"))}, podWithVolumes(ephemeralVol("scratch", ptr("local"))), "retro"},
		{"ephemeral without class: the default", []any{class("fast", true, t0)}, podWithVolumes(ephemeralVol("scratch", nil)), "fast"},
		{"ephemeral without class, no default", nil, podWithVolumes(ephemeralVol("scratch", nil)), "unknown"},
		{"mixed known and unknown", []any{pvc("a", ptr("fast"))}, podWithVolumes(claimVol("a"), claimVol("gone")), "fast,unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, resolver(t, tt.objs...).StorageClass(tt.pod))
		})
	}
}

func TestRuntimeClass(t *testing.T) {
	tr := &trimmer{}
	assert.Equal(t, "none", RuntimeClass(tr.mustPod(&corev1.Pod{})))
	assert.Equal(t, "none", RuntimeClass(tr.mustPod(&corev1.Pod{Spec: corev1.PodSpec{RuntimeClassName: ptr("")}})))
	assert.Equal(t, "kata", RuntimeClass(tr.mustPod(&corev1.Pod{Spec: corev1.PodSpec{RuntimeClassName: ptr("kata")}})))
}

func TestTransformKeepsOnlyWhatTheSLIsRead(t *testing.T) {
	w, err := New(kubetest.Wrap(fake.NewClientset()), nil, Options{
		PodLabels:      []string{"app"},
		PodAnnotations: []string{"example.com/tier"},
	})
	require.NoError(t, err)
	at := metav1.NewTime(time.Unix(1700000000, 0))
	full := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "ns", UID: "u", ResourceVersion: "7", CreationTimestamp: at,
			Labels:          map[string]string{"app": "web", "pod-template-hash": "abc"},
			Annotations:     map[string]string{"example.com/tier": "gold", "kubectl.kubernetes.io/last-applied-configuration": "{...}"},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
			OwnerReferences: []metav1.OwnerReference{{Name: "rs"}},
		},
		Spec: corev1.PodSpec{
			NodeName: "n1", RuntimeClassName: ptr("kata"),
			Containers: []corev1.Container{{Name: "c", Image: "img", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}},
			Volumes:    []corev1.Volume{claimVol("data"), {Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}}, ephemeralVol("scratch", ptr("local"))},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: "10.0.0.1",
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: at, Reason: "r", Message: "m"},
				{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: at},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: at},
			},
		},
	}
	want := &lifecycle.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web", Namespace: "ns", UID: "u", ResourceVersion: "7", CreationTimestamp: at,
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"example.com/tier": "gold"},
		},
		NodeName: "n1", RuntimeClassName: "kata", Containers: 1, StatefulVolume: true,
		Volumes: []lifecycle.Volume{{Claim: "data"}, {Claim: "web-scratch", Ephemeral: true, TemplateClass: ptr("local")}},
		Conditions: []lifecycle.Condition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: at.Unix()},
			{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: at.Unix()},
		},
	}
	got, err := w.trim.transform(full)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	again, err := w.trim.transform(got)
	require.NoError(t, err)
	assert.Equal(t, want, again, "idempotent")
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/web", Obj: full}
	same, err := w.trim.transform(tomb)
	require.NoError(t, err)
	assert.Equal(t, tomb, same, "tombstones pass through")
}

// TestStatefulAsTheKubeletTellsIt: a pod is stateful for the start-up SLI
// when it has a volume other than a Secret, ConfigMap, downward API,
// EmptyDir or projected one, as the kubelet's tracker tells (1.37,
// pod_startup_latency_tracker.go, isStatefulPod); a PVC is not needed.
func TestStatefulAsTheKubeletTellsIt(t *testing.T) {
	w, err := New(kubetest.Wrap(fake.NewClientset()), nil, Options{})
	require.NoError(t, err)
	src := func(vs corev1.VolumeSource) corev1.Volume { return corev1.Volume{Name: "v", VolumeSource: vs} }
	stateless := []corev1.Volume{
		src(corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}),
		src(corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}),
		src(corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{}}),
		src(corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}),
		src(corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}),
	}
	for _, tc := range []struct {
		name    string
		volumes []corev1.Volume
		want    bool
	}{
		{"no volume", nil, false},
		{"secret, configMap, downwardAPI, emptyDir, projected token", stateless, false},
		{"a PVC", []corev1.Volume{claimVol("data")}, true},
		{"a generic ephemeral volume", []corev1.Volume{ephemeralVol("scratch", nil)}, true},
		{"hostPath beside stateless ones", append(slices.Clone(stateless), src(corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/data"}})), true},
		{"NFS", []corev1.Volume{src(corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs", Path: "/"}})}, true},
		{"CSI inline", []corev1.Volume{src(corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "secrets-store.csi.k8s.io"}})}, true},
		{"image volume", []corev1.Volume{src(corev1.VolumeSource{Image: &corev1.ImageVolumeSource{Reference: "registry.example/data:1"}})}, true},
	} {
		got, err := w.trim.pod(&corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c"}}, Volumes: tc.volumes},
		})
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.want, got.StatefulVolume, tc.name)
	}
}
