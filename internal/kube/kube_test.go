package kube_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/podslo/podslo/internal/kube"
	"github.com/podslo/podslo/internal/kube/kubetest"
	"github.com/podslo/podslo/internal/serve"
	"github.com/podslo/podslo/internal/testenv"
)

// The scheme holds the groups the exporter reads and no other: that is
// what keeps the rest of k8s.io/api out of its binary.
func TestSchemeIsNarrow(t *testing.T) {
	for _, obj := range []runtime.Object{&corev1.Pod{}, &corev1.PodList{}, &corev1.Event{}, &storagev1.StorageClass{}, &networkingv1.NetworkPolicyList{}, &appsv1.StatefulSet{}, &eventsv1.Event{}, &metav1.Status{}} {
		_, _, err := kube.Scheme.ObjectKinds(obj)
		assert.NoError(t, err, "%T", obj)
	}
	_, _, err := kube.Scheme.ObjectKinds(&batchv1.Job{})
	assert.Error(t, err, "batch/v1 is not the exporter's")
	_, err = kube.New(kube.Resource{GroupVersionResource: batchv1.SchemeGroupVersion.WithResource("jobs"), Kind: "Job"}, false)
	assert.Error(t, err)
}

// Each resource, through the REST client, on a real API server: the
// objects the typed clients write come back the same through List, Get
// and Watch, and an events.k8s.io Event is created as the recorder wrote
// them.
func TestClientOnAPIServer(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	cs := env.Client
	const ns = "kube-test"
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	cfg, err := serve.RestConfig(env.Kubeconfig, "podslo-test")
	require.NoError(t, err)
	c, err := kube.NewForConfig(cfg)
	require.NoError(t, err)

	pod, err := cs.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.CoreV1().PersistentVolumeClaims(ns).Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim"},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "kube-test"}, Provisioner: "example.com/x"}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = cs.NetworkingV1().NetworkPolicies(ns).Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "np"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	labels := map[string]string{"app": "s"}
	_, err = cs.AppsV1().StatefulSets(ns).Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: appsv1.StatefulSetSpec{
		Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}}}, metav1.CreateOptions{})
	require.NoError(t, err)

	names := func(obj runtime.Object) []string {
		var out []string
		switch l := obj.(type) {
		case *corev1.PodList:
			for _, x := range l.Items {
				out = append(out, x.Name)
			}
		case *corev1.PersistentVolumeClaimList:
			for _, x := range l.Items {
				out = append(out, x.Name)
			}
		case *storagev1.StorageClassList:
			for _, x := range l.Items {
				out = append(out, x.Name)
			}
		case *networkingv1.NetworkPolicyList:
			for _, x := range l.Items {
				out = append(out, x.Name)
			}
		case *appsv1.StatefulSetList:
			for _, x := range l.Items {
				out = append(out, x.Name)
			}
		default:
			t.Fatalf("list of %T", obj)
		}
		return out
	}
	for _, tc := range []struct {
		r    kube.Resource
		ns   string
		want string
	}{{kube.Pods, ns, "p"}, {kube.PersistentVolumeClaims, ns, "claim"}, {kube.StorageClasses, "", "kube-test"}, {kube.NetworkPolicies, ns, "np"}, {kube.StatefulSets, ns, "s"}} {
		list, err := c.List(ctx, tc.r, tc.ns, metav1.ListOptions{})
		require.NoError(t, err, tc.r.Resource)
		assert.Equal(t, []string{tc.want}, names(list), tc.r.Resource)
		obj, err := c.Get(ctx, tc.r, tc.ns, tc.want, metav1.GetOptions{})
		require.NoError(t, err, tc.r.Resource)
		m, err := meta.Accessor(obj)
		require.NoError(t, err)
		assert.Equal(t, tc.want, m.GetName(), tc.r.Resource)
	}
	// A field selector narrows on the server, as the watches use it.
	list, err := c.List(ctx, kube.Pods, "", metav1.ListOptions{FieldSelector: "metadata.name=other"})
	require.NoError(t, err)
	assert.Empty(t, names(list))
	_, err = c.Get(ctx, kube.Pods, ns, "missing", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "a missing object is the API server's NotFound: %v", err)

	// Watch from the pod's version sees its update.
	w, err := c.Watch(ctx, kube.Pods, ns, metav1.ListOptions{ResourceVersion: pod.ResourceVersion})
	require.NoError(t, err)
	defer w.Stop()
	pod.Labels = map[string]string{"changed": "yes"}
	_, err = cs.CoreV1().Pods(ns).Update(ctx, pod, metav1.UpdateOptions{})
	require.NoError(t, err)
	select {
	case ev := <-w.ResultChan():
		require.Equal(t, watch.Modified, ev.Type)
		assert.Equal(t, "yes", ev.Object.(*corev1.Pod).Labels["changed"])
	case <-time.After(30 * time.Second):
		t.Fatal("no watch event within 30s")
	}

	// An Event as --networkpolicy-events writes it, read back through
	// core/v1 as the exporter lists its earlier ones.
	now := time.Now()
	_, err = c.Create(ctx, kube.EventsV1, ns, &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Name: "np.1", Namespace: ns}, EventTime: metav1.NewMicroTime(now),
		ReportingController: "podslo-exporter", ReportingInstance: "podslo-exporter-test", Action: "Judged", Reason: "NetworkPolicyProblem",
		Regarding: corev1.ObjectReference{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy", Namespace: ns, Name: "np"}, Note: "n", Type: corev1.EventTypeWarning})
	require.NoError(t, err)
	events, err := c.List(ctx, kube.Events, "", metav1.ListOptions{FieldSelector: "reportingComponent=podslo-exporter"})
	require.NoError(t, err)
	require.Len(t, events.(*corev1.EventList).Items, 1)
	assert.Equal(t, "NetworkPolicyProblem", events.(*corev1.EventList).Items[0].Reason)
	assert.Equal(t, "np", events.(*corev1.EventList).Items[0].InvolvedObject.Name)
}

// kubetest serves the same resources through a fake clientset, and
// refuses one it does not know, as Client does.
func TestKubetest(t *testing.T) {
	ctx := context.Background()
	c := kubetest.Wrap(fake.NewClientset(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "n"}}))
	list, err := c.List(ctx, kube.Pods, "n", metav1.ListOptions{})
	require.NoError(t, err)
	assert.Len(t, list.(*corev1.PodList).Items, 1)
	assert.True(t, c.IsWatchListSemanticsUnSupported(), "the fake clientset does not stream lists")
	jobs := kube.Resource{GroupVersionResource: batchv1.SchemeGroupVersion.WithResource("jobs"), Kind: "Job", Namespaced: true}
	_, err = c.List(ctx, jobs, "n", metav1.ListOptions{})
	var unknown kube.ErrUnknownResource
	assert.True(t, errors.As(err, &unknown), "%v", err)
	real, err := kube.NewForConfig(&rest.Config{Host: "https://127.0.0.1:1"})
	require.NoError(t, err)
	_, err = real.List(ctx, jobs, "n", metav1.ListOptions{})
	assert.True(t, errors.As(err, &unknown), "%v", err)
}
