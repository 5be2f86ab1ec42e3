// Package kube is the exporter's Kubernetes client: list, watch, get and
// create of the few resources it reads (and the Events it may write),
// through REST clients whose scheme holds only those resources' API
// groups.
//
// client-go's clientset and its typed clients register every API group of
// k8s.io/api in their scheme and link the discovery client's OpenAPI
// models: about a third of the exporter's binary, all of it mapped into
// its memory (docs/benchmarks.md, issue 38). The agent and the demo, which
// write pods and run clusters, keep the clientset.
package kube

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// Resource is one resource the exporter reads or writes.
type Resource struct {
	schema.GroupVersionResource
	// Kind is the object's kind; its list's is Kind+"List".
	Kind string
	// Namespaced resources take a namespace ("" for all of them).
	Namespaced bool
}

// The resources the exporter reads, and the Events it writes.
var (
	Pods                   = Resource{corev1.SchemeGroupVersion.WithResource("pods"), "Pod", true}
	PersistentVolumeClaims = Resource{corev1.SchemeGroupVersion.WithResource("persistentvolumeclaims"), "PersistentVolumeClaim", true}
	// Events are core/v1 Events, as the kubelet writes them.
	Events          = Resource{corev1.SchemeGroupVersion.WithResource("events"), "Event", true}
	StorageClasses  = Resource{storagev1.SchemeGroupVersion.WithResource("storageclasses"), "StorageClass", false}
	NetworkPolicies = Resource{networkingv1.SchemeGroupVersion.WithResource("networkpolicies"), "NetworkPolicy", true}
	StatefulSets    = Resource{appsv1.SchemeGroupVersion.WithResource("statefulsets"), "StatefulSet", true}
	// EventsV1 are events.k8s.io/v1 Events, which --networkpolicy-events
	// writes.
	EventsV1 = Resource{eventsv1.SchemeGroupVersion.WithResource("events"), "Event", true}
)

// resources are all of the above, for the client's REST clients.
var resources = []Resource{Pods, PersistentVolumeClaims, Events, StorageClasses, NetworkPolicies, StatefulSets, EventsV1}

// Scheme holds the API groups of resources, and nothing else.
var Scheme = runtime.NewScheme()

// Codecs are Scheme's serializers.
var Codecs = serializer.NewCodecFactory(Scheme)

// ParameterCodec encodes list, watch and get options into a request's
// query.
var ParameterCodec = runtime.NewParameterCodec(Scheme)

func init() {
	// As client-go's scheme: the groups' types, and the options of every
	// group as the unversioned v1 the ParameterCodec encodes.
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
	utilruntime.Must(corev1.AddToScheme(Scheme))
	utilruntime.Must(storagev1.AddToScheme(Scheme))
	utilruntime.Must(networkingv1.AddToScheme(Scheme))
	utilruntime.Must(appsv1.AddToScheme(Scheme))
	utilruntime.Must(eventsv1.AddToScheme(Scheme))
}

// Interface lists, watches, gets and creates Resources. Client is the
// API server's; tests adapt a fake clientset (internal/kube/kubetest).
type Interface interface {
	// List returns the resource's list (*corev1.PodList for Pods).
	List(ctx context.Context, r Resource, namespace string, opts metav1.ListOptions) (runtime.Object, error)
	Watch(ctx context.Context, r Resource, namespace string, opts metav1.ListOptions) (watch.Interface, error)
	Get(ctx context.Context, r Resource, namespace, name string, opts metav1.GetOptions) (runtime.Object, error)
	// Create creates obj and returns what the API server stored.
	Create(ctx context.Context, r Resource, namespace string, obj runtime.Object) (runtime.Object, error)
}

// Client is Interface on the API server, one REST client per API group
// version.
type Client struct {
	rest map[schema.GroupVersion]rest.Interface
}

// NewForConfig returns a Client for cfg, speaking what cfg asks for
// (protobuf, as serve.RestConfig sets it).
func NewForConfig(cfg *rest.Config) (*Client, error) {
	c := &Client{rest: map[schema.GroupVersion]rest.Interface{}}
	for _, r := range resources {
		gv := r.GroupVersion()
		if c.rest[gv] != nil {
			continue
		}
		rc, err := RESTClientFor(cfg, gv, Codecs.WithoutConversion())
		if err != nil {
			return nil, err
		}
		c.rest[gv] = rc
	}
	return c, nil
}

// RESTClientFor is a REST client of one API group version, as the typed
// clients make theirs, with the given serializers.
func RESTClientFor(cfg *rest.Config, gv schema.GroupVersion, codecs runtime.NegotiatedSerializer) (*rest.RESTClient, error) {
	c := rest.CopyConfig(cfg)
	c.GroupVersion = &gv
	c.APIPath = "/apis"
	if gv.Group == "" {
		c.APIPath = "/api"
	}
	c.NegotiatedSerializer = codecs
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("REST client for %s: %w", gv, err)
	}
	return rc, nil
}

func (c *Client) client(r Resource) (rest.Interface, error) {
	rc := c.rest[r.GroupVersion()]
	if rc == nil {
		return nil, ErrUnknownResource{r}
	}
	return rc, nil
}

// New returns a new, empty object of r's kind, or of its list's.
func New(r Resource, list bool) (runtime.Object, error) {
	kind := r.Kind
	if list {
		kind += "List"
	}
	return Scheme.New(r.GroupVersion().WithKind(kind))
}

// List implements Interface.
func (c *Client) List(ctx context.Context, r Resource, namespace string, opts metav1.ListOptions) (runtime.Object, error) {
	var timeout time.Duration
	if opts.TimeoutSeconds != nil {
		timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	return c.do(ctx, r, true, func(rc rest.Interface) *rest.Request {
		return rc.Get().NamespaceIfScoped(namespace, r.Namespaced).Resource(r.Resource).
			VersionedParams(&opts, ParameterCodec).Timeout(timeout)
	})
}

// do makes the request req builds on r's client and decodes the answer
// into a new r (or r's list).
func (c *Client) do(ctx context.Context, r Resource, list bool, req func(rest.Interface) *rest.Request) (runtime.Object, error) {
	rc, err := c.client(r)
	if err != nil {
		return nil, err
	}
	out, err := New(r, list)
	if err != nil {
		return nil, err
	}
	return out, req(rc).Do(ctx).Into(out)
}

// Watch implements Interface.
func (c *Client) Watch(ctx context.Context, r Resource, namespace string, opts metav1.ListOptions) (watch.Interface, error) {
	rc, err := c.client(r)
	if err != nil {
		return nil, err
	}
	var timeout time.Duration
	if opts.TimeoutSeconds != nil {
		timeout = time.Duration(*opts.TimeoutSeconds) * time.Second
	}
	opts.Watch = true
	return rc.Get().NamespaceIfScoped(namespace, r.Namespaced).Resource(r.Resource).
		VersionedParams(&opts, ParameterCodec).Timeout(timeout).Watch(ctx)
}

// Get implements Interface.
func (c *Client) Get(ctx context.Context, r Resource, namespace, name string, opts metav1.GetOptions) (runtime.Object, error) {
	return c.do(ctx, r, false, func(rc rest.Interface) *rest.Request {
		return rc.Get().NamespaceIfScoped(namespace, r.Namespaced).Resource(r.Resource).Name(name).
			VersionedParams(&opts, ParameterCodec)
	})
}

// Create implements Interface.
func (c *Client) Create(ctx context.Context, r Resource, namespace string, obj runtime.Object) (runtime.Object, error) {
	return c.do(ctx, r, false, func(rc rest.Interface) *rest.Request {
		return rc.Post().NamespaceIfScoped(namespace, r.Namespaced).Resource(r.Resource).Body(obj)
	})
}

// ErrUnknownResource is an Interface's error for a Resource it does not
// serve.
type ErrUnknownResource struct{ Resource Resource }

func (e ErrUnknownResource) Error() string {
	return fmt.Sprintf("kube: %s is not a resource podslo's client serves", e.Resource.GroupVersionResource)
}
