package informers

import (
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/podslo/podslo/internal/kube"
	"github.com/podslo/podslo/lifecycle"
)

// podWatchKeepAlive probes an idle pod watch connection after 15 s, then
// every 5 s, and gives it up after 3 unanswered probes.
var podWatchKeepAlive = net.KeepAliveConfig{Enable: true, Idle: 15 * time.Second, Interval: 5 * time.Second, Count: 3}

// podList is a PodList whose pods are decoded straight into their trimmed
// form: what the pod watch's list returns.
type podList struct {
	metav1.TypeMeta
	metav1.ListMeta
	Items []lifecycle.Pod
}

// DeepCopyObject implements runtime.Object.
func (l *podList) DeepCopyObject() runtime.Object {
	c := &podList{TypeMeta: l.TypeMeta}
	l.ListMeta.DeepCopyInto(&c.ListMeta)
	c.Items = make([]lifecycle.Pod, len(l.Items))
	for i := range l.Items {
		c.Items[i] = *l.Items[i].DeepCopyObject().(*lifecycle.Pod)
	}
	return c
}

// newPodClient is a REST client for pods, as the typed client's, except
// that its codec decodes pods (in protobuf, or in JSON if the server
// answers in JSON) into lifecycle.Pod, and lists into podList; anything
// else, such as a Status, as the scheme does.
//
// It speaks HTTP/1.1 on connections of its own. Over HTTP/2 every watch
// event crosses one more goroutine (the connection's read loop hands each
// frame to the stream's body through a pipe) and wakes it: HTTP/1.1 cut
// the exporter's CPU per pod update by 18-23% in hack/scale at 10k pods
// (docs/benchmarks.md, issue 38). HTTP/2 pings found a dead connection;
// TCP keepalives do here, within about 30 s.
func newPodClient(cfg *rest.Config, t *trimmer) (rest.Interface, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.NextProtos = []string{"http/1.1"}
	if cfg.Dial == nil {
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAliveConfig: podWatchKeepAlive}
		cfg.Dial = d.DialContext
	}
	rc, err := kube.RESTClientFor(cfg, corev1.SchemeGroupVersion, podCodecs{base: kube.Codecs.WithoutConversion(), t: t})
	if err != nil {
		return nil, fmt.Errorf("pod client: %w", err)
	}
	return rc, nil
}

// podCodecs is the scheme's codecs with podDecoder in front of each
// media type's decoder. Watch events keep the scheme's stream decoder:
// only the object inside each event goes through podDecoder.
type podCodecs struct {
	base runtime.NegotiatedSerializer
	t    *trimmer
}

func (c podCodecs) SupportedMediaTypes() []runtime.SerializerInfo {
	infos := append([]runtime.SerializerInfo(nil), c.base.SupportedMediaTypes()...)
	for i := range infos {
		infos[i].Serializer = podDecoder{Serializer: infos[i].Serializer, t: c.t, protobuf: infos[i].MediaType == runtime.ContentTypeProtobuf}
	}
	return infos
}

func (c podCodecs) EncoderForVersion(e runtime.Encoder, gv runtime.GroupVersioner) runtime.Encoder {
	if d, ok := e.(podDecoder); ok {
		e = d.Serializer
	}
	return c.base.EncoderForVersion(e, gv)
}

func (c podCodecs) DecoderToVersion(d runtime.Decoder, gv runtime.GroupVersioner) runtime.Decoder {
	if pd, ok := d.(podDecoder); ok {
		pd.next = c.base.DecoderToVersion(pd.Serializer, gv)
		return pd
	}
	return c.base.DecoderToVersion(d, gv)
}

// podDecoder decodes pods and pod lists into their trimmed forms, and
// hands anything else to next (the scheme's decoder for the media type).
type podDecoder struct {
	runtime.Serializer
	next     runtime.Decoder
	t        *trimmer
	protobuf bool
}

var (
	podGVK     = corev1.SchemeGroupVersion.WithKind("Pod")
	podListGVK = corev1.SchemeGroupVersion.WithKind("PodList")
)

func (d podDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	if d.protobuf {
		if kind, raw, err := unwrap(data); err == nil {
			switch kind {
			case "Pod":
				p, err := d.t.decodePod(raw)
				if err != nil {
					return nil, &podGVK, err
				}
				return p, &podGVK, nil
			case "PodList":
				l, err := d.t.decodePodList(raw)
				if err != nil {
					return nil, &podListGVK, err
				}
				return l, &podListGVK, nil
			}
		}
	}
	next := d.next
	if next == nil {
		next = d.Serializer
	}
	// Not into: a podList or lifecycle.Pod is not the scheme's.
	obj, gvk, err := next.Decode(data, defaults, nil)
	if err != nil {
		return obj, gvk, err
	}
	switch o := obj.(type) {
	case *corev1.Pod:
		p, err := d.t.pod(o)
		return p, gvk, err
	case *corev1.PodList:
		l := &podList{ListMeta: o.ListMeta, Items: make([]lifecycle.Pod, len(o.Items))}
		for i := range o.Items {
			p, err := d.t.pod(&o.Items[i])
			if err != nil {
				return nil, gvk, err
			}
			l.Items[i] = *p
		}
		return l, gvk, nil
	}
	return obj, gvk, nil
}

// decodePodList decodes a PodList message (outside its envelope).
func (t *trimmer) decodePodList(raw []byte) (*podList, error) {
	l := &podList{}
	err := eachField(raw, func(f field) error {
		switch f.num {
		case 1: // metadata
			return eachFieldOf(f, func(f field) (err error) {
				switch f.num {
				case 2:
					l.ResourceVersion, err = str(f)
				case 3:
					l.Continue, err = str(f)
				case 4:
					var n int64
					n, err = f.varint()
					l.RemainingItemCount = &n
				}
				return err
			})
		case 2: // items
			b, err := f.bytes()
			if err != nil {
				return err
			}
			l.Items = append(l.Items, lifecycle.Pod{})
			return t.decodePodInto(b, &l.Items[len(l.Items)-1])
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("decode pod list: %w", err)
	}
	return l, nil
}
