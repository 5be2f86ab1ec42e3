// Package kubetest adapts a clientset, such as client-go's fake one, to
// kube.Interface, for tests. The exporter's binary does not link it.
package kubetest

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/podslo/podslo/internal/kube"
)

// Client is kube.Interface through a clientset's typed clients.
type Client struct {
	kubernetes.Interface
}

// Wrap returns cs as a kube.Interface.
func Wrap(cs kubernetes.Interface) *Client { return &Client{cs} }

// IsWatchListSemanticsUnSupported says whether the clientset streams
// lists, as client-go's fake clientsets say they do not, so that
// reflectors list instead.
func (c *Client) IsWatchListSemanticsUnSupported() bool {
	u, ok := c.Interface.(interface{ IsWatchListSemanticsUnSupported() bool })
	return ok && u.IsWatchListSemanticsUnSupported()
}

// api is one resource's typed calls.
type api struct {
	list   func(context.Context, metav1.ListOptions) (runtime.Object, error)
	watch  func(context.Context, metav1.ListOptions) (watch.Interface, error)
	get    func(context.Context, string, metav1.GetOptions) (runtime.Object, error)
	create func(context.Context, runtime.Object) (runtime.Object, error)
}

// typed is what a clientset's typed client offers for one resource.
type typed[T, L runtime.Object] interface {
	List(context.Context, metav1.ListOptions) (L, error)
	Watch(context.Context, metav1.ListOptions) (watch.Interface, error)
	Get(context.Context, string, metav1.GetOptions) (T, error)
	Create(context.Context, T, metav1.CreateOptions) (T, error)
}

func apiOf[T, L runtime.Object](x typed[T, L]) api {
	return api{
		list:  func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return x.List(ctx, o) },
		watch: x.Watch,
		get: func(ctx context.Context, n string, o metav1.GetOptions) (runtime.Object, error) {
			return x.Get(ctx, n, o)
		},
		create: func(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
			t, ok := obj.(T)
			if !ok {
				return nil, fmt.Errorf("kubetest: create a %T as a %T", obj, t)
			}
			return x.Create(ctx, t, metav1.CreateOptions{})
		},
	}
}

func (c *Client) api(r kube.Resource, ns string) (api, error) {
	switch r {
	case kube.Pods:
		return apiOf[*corev1.Pod, *corev1.PodList](c.CoreV1().Pods(ns)), nil
	case kube.PersistentVolumeClaims:
		return apiOf[*corev1.PersistentVolumeClaim, *corev1.PersistentVolumeClaimList](c.CoreV1().PersistentVolumeClaims(ns)), nil
	case kube.Events:
		return apiOf[*corev1.Event, *corev1.EventList](c.CoreV1().Events(ns)), nil
	case kube.StorageClasses:
		return apiOf[*storagev1.StorageClass, *storagev1.StorageClassList](c.StorageV1().StorageClasses()), nil
	case kube.NetworkPolicies:
		return apiOf[*networkingv1.NetworkPolicy, *networkingv1.NetworkPolicyList](c.NetworkingV1().NetworkPolicies(ns)), nil
	case kube.StatefulSets:
		return apiOf[*appsv1.StatefulSet, *appsv1.StatefulSetList](c.AppsV1().StatefulSets(ns)), nil
	case kube.EventsV1:
		return apiOf[*eventsv1.Event, *eventsv1.EventList](c.EventsV1().Events(ns)), nil
	}
	return api{}, kube.ErrUnknownResource{Resource: r}
}

// List implements kube.Interface.
func (c *Client) List(ctx context.Context, r kube.Resource, ns string, o metav1.ListOptions) (runtime.Object, error) {
	a, err := c.api(r, ns)
	if err != nil {
		return nil, err
	}
	return a.list(ctx, o)
}

// Watch implements kube.Interface.
func (c *Client) Watch(ctx context.Context, r kube.Resource, ns string, o metav1.ListOptions) (watch.Interface, error) {
	a, err := c.api(r, ns)
	if err != nil {
		return nil, err
	}
	return a.watch(ctx, o)
}

// Get implements kube.Interface.
func (c *Client) Get(ctx context.Context, r kube.Resource, ns, name string, o metav1.GetOptions) (runtime.Object, error) {
	a, err := c.api(r, ns)
	if err != nil {
		return nil, err
	}
	return a.get(ctx, name, o)
}

// Create implements kube.Interface.
func (c *Client) Create(ctx context.Context, r kube.Resource, ns string, obj runtime.Object) (runtime.Object, error) {
	a, err := c.api(r, ns)
	if err != nil {
		return nil, err
	}
	return a.create(ctx, obj)
}
