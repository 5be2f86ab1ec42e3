// Package kubetest adapts a clientset, such as client-go's fake one, to
// kube.Interface, for tests. The exporter's binary does not link it.
package kubetest

import (
	"context"

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

func (c *Client) api(r kube.Resource, ns string) (api, error) {
	switch r {
	case kube.Pods:
		x := c.CoreV1().Pods(ns)
		return api{
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return x.List(ctx, o) }, x.Watch,
			func(ctx context.Context, n string, o metav1.GetOptions) (runtime.Object, error) {
				return x.Get(ctx, n, o)
			},
			func(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
				return x.Create(ctx, obj.(*corev1.Pod), metav1.CreateOptions{})
			}}, nil
	case kube.PersistentVolumeClaims:
		x := c.CoreV1().PersistentVolumeClaims(ns)
		return api{
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return x.List(ctx, o) }, x.Watch,
			func(ctx context.Context, n string, o metav1.GetOptions) (runtime.Object, error) {
				return x.Get(ctx, n, o)
			},
			func(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
				return x.Create(ctx, obj.(*corev1.PersistentVolumeClaim), metav1.CreateOptions{})
			}}, nil
	case kube.Events:
		x := c.CoreV1().Events(ns)
		return api{
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return x.List(ctx, o) }, x.Watch,
			func(ctx context.Context, n string, o metav1.GetOptions) (runtime.Object, error) {
				return x.Get(ctx, n, o)
			},
			func(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
				return x.Create(ctx, obj.(*corev1.Event), metav1.CreateOptions{})
			}}, nil
	case kube.StorageClasses:
		x := c.StorageV1().StorageClasses()
		return api{
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return x.List(ctx, o) }, x.Watch,
			func(ctx context.Context, n string, o metav1.GetOptions) (runtime.Object, error) {
				return x.Get(ctx, n, o)
			},
			func(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
				return x.Create(ctx, obj.(*storagev1.StorageClass), metav1.CreateOptions{})
			}}, nil
	case kube.NetworkPolicies:
		x := c.NetworkingV1().NetworkPolicies(ns)
		return api{
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return x.List(ctx, o) }, x.Watch,
			func(ctx context.Context, n string, o metav1.GetOptions) (runtime.Object, error) {
				return x.Get(ctx, n, o)
			},
			func(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
				return x.Create(ctx, obj.(*networkingv1.NetworkPolicy), metav1.CreateOptions{})
			}}, nil
	case kube.StatefulSets:
		x := c.AppsV1().StatefulSets(ns)
		return api{
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return x.List(ctx, o) }, x.Watch,
			func(ctx context.Context, n string, o metav1.GetOptions) (runtime.Object, error) {
				return x.Get(ctx, n, o)
			},
			func(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
				return x.Create(ctx, obj.(*appsv1.StatefulSet), metav1.CreateOptions{})
			}}, nil
	case kube.EventsV1:
		x := c.EventsV1().Events(ns)
		return api{
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return x.List(ctx, o) }, x.Watch,
			func(ctx context.Context, n string, o metav1.GetOptions) (runtime.Object, error) {
				return x.Get(ctx, n, o)
			},
			func(ctx context.Context, obj runtime.Object) (runtime.Object, error) {
				return x.Create(ctx, obj.(*eventsv1.Event), metav1.CreateOptions{})
			}}, nil
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
