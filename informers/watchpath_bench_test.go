package informers

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	restclientwatch "k8s.io/client-go/rest/watch"

	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/store"
)

// protobufType is what the exporter asks the API server for
// (internal/serve).
const protobufType = runtime.ContentTypeProtobuf

// wirePod is benchPod as a kubelet-managed pod looks on the wire: with the
// managed fields' field sets, which are most of its bytes and which podslo
// never reads, and one condition of a third party that the update changes.
func wirePod(i int, rv string, tick int) *corev1.Pod {
	p := benchPod(i)
	p.ResourceVersion = rv
	p.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &p.CreationTimestamp, FieldsType: "FieldsV1",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app.kubernetes.io/name":{},"f:pod-template-hash":{},"f:team":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"rs\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"sidecar\"}":{".":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:resources":{},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}},"k:{\"name\":\"web\"}":{".":{},"f:env":{".":{},"k:{\"name\":\"MODE\"}":{".":{},"f:name":{},"f:value":{}}},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:ports":{".":{},"k:{\"containerPort\":8080,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:protocol":{}}},"f:resources":{},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:serviceAccount":{},"f:serviceAccountName":{},"f:terminationGracePeriodSeconds":{},"f:volumes":{".":{},"k:{\"name\":\"config\"}":{".":{},"f:configMap":{".":{},"f:defaultMode":{},"f:name":{}},"f:name":{}}}}}`)}},
		{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &p.CreationTimestamp, FieldsType: "FieldsV1", Subresource: "status",
			FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:conditions":{"k:{\"type\":\"ContainersReady\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Initialized\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"PodReadyToStartContainers\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Ready\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},"f:containerStatuses":{},"f:hostIP":{},"f:hostIPs":{},"f:phase":{},"f:podIP":{},"f:podIPs":{".":{},"k:{\"ip\":\"10.1.2.3\"}":{".":{},"f:ip":{}}},"f:startTime":{}}}`)}},
	}
	p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
		Type: "example.com/Heartbeat", Status: corev1.ConditionTrue, Reason: fmt.Sprintf("Tick%d", tick),
		LastTransitionTime: p.CreationTimestamp,
	})
	return p
}

// encodePod is a pod as the API server's protobuf serializer writes it
// into a watch event: the "k8s\0" envelope with its type.
func encodePod(b testing.TB, p *corev1.Pod) []byte {
	b.Helper()
	info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), protobufType)
	if !ok {
		b.Fatal("no protobuf serializer")
	}
	var buf bytes.Buffer
	if err := scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion).Encode(p, &buf); err != nil {
		b.Fatal(err)
	}
	return buf.Bytes()
}

// watchStream is the body of a protobuf watch: length-delimited
// WatchEvent frames, as the API server writes them, and where each ends.
func watchStream(b testing.TB, events []watch.Event) (body []byte, ends []int) {
	b.Helper()
	info, _ := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), protobufType)
	var buf bytes.Buffer
	fw := info.StreamSerializer.Framer.NewFrameWriter(&buf)
	for _, e := range events {
		ev := metav1.WatchEvent{Type: string(e.Type), Object: runtime.RawExtension{Raw: encodePod(b, e.Object.(*corev1.Pod))}}
		if err := info.StreamSerializer.Serializer.Encode(&ev, fw); err != nil {
			b.Fatal(err)
		}
		ends = append(ends, buf.Len())
	}
	return buf.Bytes(), ends
}

// replay is a watch body that gives the first n of its frames, going
// round them as often as needed, once start is closed, then blocks as an
// idle watch does until closed.
type replay struct {
	frames []byte
	ends   []int // where each frame ends in frames
	n      int
	start  chan struct{}
	r      bytes.Reader
	closed chan struct{}
	once   sync.Once
}

func (r *replay) Read(p []byte) (int, error) {
	if r.r.Len() == 0 {
		if r.n == 0 {
			<-r.closed
			return 0, io.EOF
		}
		<-r.start
		k := min(r.n, len(r.ends))
		r.n -= k
		r.r.Reset(r.frames[:r.ends[k-1]])
	}
	return r.r.Read(p)
}

func (r *replay) Close() error {
	r.once.Do(func() { close(r.closed) })
	return nil
}

// recordedPods is a ListerWatcher whose list is pods and whose first
// watch decodes body exactly as client-go's REST client decodes a
// protobuf watch response (rest.Request.newStreamWatcher).
type recordedPods struct {
	list   runtime.Object
	body   io.ReadCloser
	codecs runtime.NegotiatedSerializer
	used   atomic.Bool
}

func (l *recordedPods) List(metav1.ListOptions) (runtime.Object, error) {
	return l.list.DeepCopyObject(), nil
}

func (l *recordedPods) Watch(metav1.ListOptions) (watch.Interface, error) {
	if l.used.Swap(true) {
		// A later watch (none is expected) stays silent.
		return watch.NewFake(), nil
	}
	neg := runtime.NewClientNegotiator(l.codecs, corev1.SchemeGroupVersion)
	objectDecoder, streamingSerializer, framer, err := neg.StreamDecoder(protobufType, nil)
	if err != nil {
		return nil, err
	}
	return watch.NewStreamWatcher(
		restclientwatch.NewDecoder(streaming.NewDecoder(framer.NewFrameReader(l.body), streamingSerializer), objectDecoder),
		nil), nil
}

// A plain list, then a watch: the reflector's path when streaming lists
// are off. The benchmark times the watch, which is the same either way.
func (l *recordedPods) IsWatchListSemanticsUnSupported() bool { return true }

// countingHandler counts the pods handed on, and says when the first
// list has been and when want have been.
type countingHandler struct {
	Handler
	n            atomic.Int64
	listed, want int64
	listDone     chan struct{}
	done         chan struct{}
}

func (h *countingHandler) Pod(p *lifecycle.Pod) {
	h.Handler.Pod(p)
	switch h.n.Add(1) {
	case h.listed:
		close(h.listDone)
	case h.want:
		close(h.done)
	}
}

// BenchmarkWatchPath is the whole pod path of the exporter for the common
// update, one that changes no SLI state (a third party's condition): the
// protobuf bytes of a watch event read from the response body, through
// client-go's frame reader and decoders, the reflector and the DeltaFIFO,
// the trim, the key bookkeeping and the pipeline's no-change check, with
// the store on disk. Only the network and TLS are left out. Each op is one
// watch event; the pods were listed and recorded before the timer.
//
// BenchmarkWatchPath/floor is the least any client that decodes pods
// must pay: Unmarshal of the same pod's bytes into a corev1.Pod.
func BenchmarkWatchPath(b *testing.B) {
	const pods = 1000
	listed := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}
	var updates []watch.Event
	for i := range pods {
		listed.Items = append(listed.Items, *wirePod(i, "1", 0))
		p := listed.Items[i].DeepCopy()
		p.ResourceVersion = fmt.Sprint(2 + i)
		p.Status.Conditions[len(p.Status.Conditions)-1].Reason = "Tick1"
		updates = append(updates, watch.Event{Type: watch.Modified, Object: p})
	}
	frames, ends := watchStream(b, updates)
	b.Logf("%d bytes per watch event", len(frames)/pods)

	b.Run("floor", func(b *testing.B) {
		raw := encodePod(b, updates[0].Object.(*corev1.Pod))
		var u runtime.Unknown
		if err := u.Unmarshal(raw[4:]); err != nil {
			b.Fatal(err)
		}
		b.SetBytes(int64(len(u.Raw)))
		b.ReportAllocs()
		for b.Loop() {
			var p corev1.Pod
			if err := p.Unmarshal(u.Raw); err != nil {
				b.Fatal(err)
			}
		}
	})

	// The exporter's path: each pod decoded straight into its trimmed
	// form (podCodecs). And the path before it, kept for comparison and
	// for unit tests on a fake clientset: whole pods, trimmed in the queue.
	for _, path := range []string{"exporter", "whole-pods"} {
		b.Run(path, func(b *testing.B) {
			st := openBench(b, b.TempDir())
			w, p := benchWatcher(b, st)
			h := &countingHandler{Handler: p, listed: pods, want: int64(pods + b.N), listDone: make(chan struct{}), done: make(chan struct{})}
			w.handler = h
			body := &replay{frames: frames, ends: ends, n: b.N, start: make(chan struct{}), closed: make(chan struct{})}
			b.Cleanup(func() { _ = body.Close() })
			pw := newPodWatch("", nil)
			if path == "exporter" {
				codecs := podCodecs{base: scheme.Codecs.WithoutConversion(), t: w.trim}
				l := &podList{ListMeta: listed.ListMeta}
				for i := range listed.Items {
					l.Items = append(l.Items, *w.trim.mustPod(&listed.Items[i]))
				}
				w.controlPods(pw, &recordedPods{list: l, body: body, codecs: codecs})
			} else {
				w.controlPods(pw, &recordedPods{list: listed, body: body, codecs: scheme.Codecs.WithoutConversion()})
			}
			ctx, cancel := context.WithCancel(context.Background())
			b.Cleanup(cancel)
			go pw.ctrl.RunWithContext(ctx)
			// The timer starts with the list handled (every pod recorded)
			// and the watch open, waiting for its first bytes.
			<-h.listDone
			applies := st.Stats().Succeeded(store.OpApply)
			if applies != pods {
				b.Fatalf("%d writes for %d listed pods", applies, pods)
			}
			b.ReportAllocs()
			b.ResetTimer()
			close(body.start)
			<-h.done
			b.StopTimer()
			if got := st.Stats().Succeeded(store.OpApply) - applies; got != 0 {
				b.Fatalf("%d writes for %d no-change updates", got, b.N)
			}
			if got := pw.keys.len(); got != pods {
				b.Fatalf("%d pod keys, want %d", got, pods)
			}
		})
	}
}
