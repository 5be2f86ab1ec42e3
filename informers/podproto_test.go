package informers

import (
	"bytes"
	"math/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	metadatafake "k8s.io/client-go/metadata/fake"
	"sigs.k8s.io/randfill"

	"github.com/podslo/podslo/internal/kube/kubetest"
	"github.com/podslo/podslo/lifecycle"
)

// trimmers are the trim's configurations that change what it keeps.
func trimmers(t testing.TB) map[string]*trimmer {
	out := map[string]*trimmer{}
	for name, opts := range map[string]Options{
		"defaults": {},
		"labels and annotations": {
			PodLabels: []string{"app", "team"}, PodAnnotations: []string{"owner"},
			Lifecycle: lifecycle.Config{SandboxConditionTypes: []corev1.PodConditionType{"example.com/SandboxReady"}, StableConditionType: "example.com/Stable"},
		},
		"every label": {PodLabels: []string{"app"}, PodLabelsHandler: nopLabels{}},
		"owner kind":  {OwnerKind: true, NodeLabels: []string{"zone"}},
	} {
		opts.Metadata = metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme())
		w, err := New(kubetest.Wrap(fake.NewClientset()), nil, opts)
		require.NoError(t, err)
		out[name] = w.trim
	}
	return out
}

type nopLabels struct{}

func (nopLabels) PodLabels(string, string, map[string]string) {}
func (nopLabels) PodDeleted(string, string)                   {}

// kept is a value that the trim keeps, so that random pods exercise it.
func kept(r *rand.Rand, vals ...string) string { return vals[r.Intn(len(vals))] }

// randomPod is a pod with every field filled at random, then the fields
// the trim reads set, at random, to values it keeps.
func randomPod(f *randfill.Filler, r *rand.Rand) *corev1.Pod {
	var p corev1.Pod
	f.Fill(&p)
	if r.Intn(2) == 0 {
		p.Labels = map[string]string{"app": kept(r, "web", ""), "team": "a", "other": "x"}
		p.Annotations = map[string]string{"owner": "me", metav1.InitialEventsAnnotationKey: "true", "other": "y"}
	}
	types := []string{"Ready", "Initialized", "PodScheduled", "PodReadyToStartContainers", "ContainersReady", "example.com/SandboxReady", "example.com/Stable", "podslo.io/Stable", "Other"}
	// A controller reference among others, first or not, and references
	// that say nothing or false.
	if len(p.OwnerReferences) > 0 && r.Intn(2) == 0 {
		yes := true
		ref := &p.OwnerReferences[r.Intn(len(p.OwnerReferences))]
		ref.Controller, ref.Kind, ref.APIVersion = &yes, kept(r, "ReplicaSet", "StatefulSet", "Job"), kept(r, "apps/v1", "batch/v1")
	}
	for i := range p.Status.Conditions {
		c := &p.Status.Conditions[i]
		c.Type = corev1.PodConditionType(kept(r, types...))
		c.Status = corev1.ConditionStatus(kept(r, "True", "False", "Unknown", "Maybe"))
		if r.Intn(3) == 0 {
			c.LastTransitionTime = metav1.Time{}
		}
	}
	for _, statuses := range [][]corev1.ContainerStatus{p.Status.ContainerStatuses, p.Status.InitContainerStatuses} {
		for i := range statuses {
			if r.Intn(2) == 0 {
				statuses[i].State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Unix(r.Int63n(2e9), 0))}
			}
			// The kubelet's SIGKILL at the end of a grace period, and an
			// OOM kill, which has the same exit code.
			if term := statuses[i].State.Terminated; term != nil && r.Intn(2) == 0 {
				term.ExitCode = 137
				term.Reason = kept(r, "Error", "OOMKilled")
			}
		}
	}
	for i := range p.Spec.Volumes {
		v := &p.Spec.Volumes[i]
		switch r.Intn(4) {
		case 0:
			v.VolumeSource = corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}
		case 1:
			v.VolumeSource = corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{VolumeClaimTemplate: &corev1.PersistentVolumeClaimTemplate{}}}
			if r.Intn(2) == 0 {
				class := kept(r, "fast", "")
				v.Ephemeral.VolumeClaimTemplate.Spec.StorageClassName = &class
			}
		}
	}
	return &p
}

// TestDecodePodMatchesTrim holds the protobuf decoder to the trim of the
// whole pod: for random pods and the benchmark's realistic ones, in each
// configuration of the trim, decodePod of a pod's bytes equals
// trimmer.pod of corev1.Pod.Unmarshal of the same bytes.
func TestDecodePodMatchesTrim(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	r := rand.New(rand.NewSource(seed))
	f := randfill.New().RandSource(r).NilChance(0.3).NumElements(0, 3)
	var pods []*corev1.Pod
	for i := range 5 {
		pods = append(pods, wirePod(i, "7", i), benchPod(i))
	}
	deleted := benchPod(9)
	grace := int64(30)
	deleted.DeletionTimestamp, deleted.DeletionGracePeriodSeconds = &metav1.Time{Time: time.Unix(1700000100, 0)}, &grace
	pods = append(pods, deleted, &corev1.Pod{})
	for range 300 {
		pods = append(pods, randomPod(f, r))
	}
	for name, tr := range trimmers(t) {
		t.Run(name, func(t *testing.T) {
			for i, p := range pods {
				raw, err := p.Marshal()
				require.NoError(t, err)
				var whole corev1.Pod
				require.NoError(t, whole.Unmarshal(raw))
				got, err := tr.decodePod(raw)
				require.NoError(t, err, "pod %d", i)
				require.Equal(t, tr.reference(&whole), got, "pod %d", i)
			}
		})
	}
}

// TestDecodePodMerges: a message that occurs twice is merged as the
// generated code merges it, a scalar keeps its last value and a time its
// last occurrence.
func TestDecodePodMerges(t *testing.T) {
	a := benchPod(1)
	b := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "renamed", CreationTimestamp: metav1.NewTime(time.Unix(1700000500, 0))},
		Spec:       corev1.PodSpec{Volumes: []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}}}},
		Status:     corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}},
	}
	ra, err := a.Marshal()
	require.NoError(t, err)
	rb, err := b.Marshal()
	require.NoError(t, err)
	raw := append(ra, rb...)
	var whole corev1.Pod
	require.NoError(t, whole.Unmarshal(raw))
	require.Equal(t, "renamed", whole.Name, "the generated code keeps the last name")
	require.Len(t, whole.Spec.Volumes, 3, "and appends the volumes")
	for name, tr := range trimmers(t) {
		got, err := tr.decodePod(raw)
		require.NoError(t, err, name)
		require.Equal(t, tr.reference(&whole), got, name)
	}
}

// TestDecodePodRefusesMalformed: bytes that are not a pod are an error,
// never a panic or a half-filled pod.
func TestDecodePodRefusesMalformed(t *testing.T) {
	tr := trimmers(t)["defaults"]
	raw, err := benchPod(1).Marshal()
	require.NoError(t, err)
	for name, b := range map[string][]byte{
		"truncated":           raw[:len(raw)/2],
		"name as a varint":    {0x0a, 0x02, 0x08, 0x01},
		"length past the end": {0x0a, 0x7f, 0x0a},
	} {
		got, err := tr.decodePod(b)
		require.Error(t, err, name)
		require.Nil(t, got, name)
	}
}

// FuzzDecodePod: on any bytes, the decoder does not panic, and where the
// generated code decodes a pod, the decoder decodes the same trimmed pod.
func FuzzDecodePod(f *testing.F) {
	for i := range 3 {
		raw, err := wirePod(i, "1", i).Marshal()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	w, err := New(kubetest.Wrap(fake.NewClientset()), nil, Options{PodLabels: []string{"app.kubernetes.io/name"}})
	if err != nil {
		f.Fatal(err)
	}
	tr := w.trim
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := tr.decodePod(raw)
		var whole corev1.Pod
		if whole.Unmarshal(raw) != nil {
			return
		}
		// The decoder checks the wire types of the fields it reads only,
		// the generated code those of every field: it accepts at least
		// what the generated code accepts.
		require.NoError(t, err)
		require.Equal(t, tr.reference(&whole), got)
	})
}

// TestPodCodecs: the pod client's codec decodes pods and lists in
// protobuf and in JSON into their trimmed forms, and anything else (an
// error's Status) as the scheme does.
func TestPodCodecs(t *testing.T) {
	tr := trimmers(t)["labels and annotations"]
	neg := runtime.NewClientNegotiator(podCodecs{base: scheme.Codecs.WithoutConversion(), t: tr}, corev1.SchemeGroupVersion)
	pod := wirePod(3, "42", 1)
	want := tr.reference(pod.DeepCopy())
	list := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "43", Continue: "next"}, Items: []corev1.Pod{*pod}}
	status := &metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonExpired, Code: 410, Message: "too old"}
	for _, mediaType := range []string{runtime.ContentTypeProtobuf, runtime.ContentTypeJSON} {
		info, ok := runtime.SerializerInfoForMediaType(scheme.Codecs.SupportedMediaTypes(), mediaType)
		require.True(t, ok)
		encode := func(obj runtime.Object) []byte {
			var buf bytes.Buffer
			require.NoError(t, scheme.Codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion).Encode(obj, &buf))
			return buf.Bytes()
		}
		dec, err := neg.Decoder(mediaType, nil)
		require.NoError(t, err)

		got, _, err := dec.Decode(encode(pod), nil, nil)
		require.NoError(t, err, mediaType)
		require.Equal(t, want, got, mediaType)

		got, _, err = dec.Decode(encode(list), nil, nil)
		require.NoError(t, err, mediaType)
		require.Equal(t, &podList{ListMeta: metav1.ListMeta{ResourceVersion: "43", Continue: "next"}, Items: []lifecycle.Pod{*want}}, got, mediaType)

		got, _, err = dec.Decode(encode(status), nil, nil)
		require.NoError(t, err, mediaType)
		require.IsType(t, &metav1.Status{}, got, mediaType)
		require.Equal(t, int32(410), got.(*metav1.Status).Code, mediaType)
	}
}

// TestContainerTimes: the evidence of a sandbox re-created before podslo
// saw the pod, and of a container killed at the end of its grace period,
// read the same by both decoders (issue 26, defects 1 and 2).
func TestContainerTimes(t *testing.T) {
	at := func(s int64) metav1.Time { return metav1.NewTime(time.Unix(1700000000+s, 0)) }
	p := &corev1.Pod{Status: corev1.PodStatus{
		InitContainerStatuses: []corev1.ContainerStatus{{
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, StartedAt: at(3), FinishedAt: at(4)}},
		}, {
			// A native sidecar, SIGKILLed last.
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error", StartedAt: at(5), FinishedAt: at(45)}},
		}},
		ContainerStatuses: []corev1.ContainerStatus{
			{
				State:                corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at(160)}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, StartedAt: at(2), FinishedAt: at(150)}},
			},
			{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "Error", StartedAt: at(10), FinishedAt: at(40)}}},
			{State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled", StartedAt: at(10), FinishedAt: at(50)}}},
		},
	}}
	raw, err := p.Marshal()
	require.NoError(t, err)
	for name, tr := range trimmers(t) {
		trimmed := tr.reference(p)
		decoded, err := tr.decodePod(raw)
		require.NoError(t, err)
		for how, got := range map[string]*lifecycle.Pod{"reference": trimmed, "decode": decoded} {
			require.Equal(t, int64(1700000002), got.FirstContainerStart, "%s %s: the earliest start, from a last state", name, how)
			require.Equal(t, int64(1700000160), got.ContainersStarted, "%s %s", name, how)
			// Not the OOM kill (50), not a last state (150): the newest
			// SIGKILLed container, here the native sidecar (45).
			require.Equal(t, int64(1700000045), got.ContainerKilled, "%s %s", name, how)
		}
	}
}

// TestContainerCounts: the containers whose images the pulls wait for,
// and the running ones that end the start-up SLI, read the same by both
// decoders (issue 28).
func TestContainerCounts(t *testing.T) {
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Unix(1700000000, 0))}}
	p := &corev1.Pod{
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "setup"}},
			Containers:     []corev1.Container{{Name: "a"}, {Name: "b"}, {Name: "c"}},
		},
		Status: corev1.PodStatus{
			InitContainerStatuses: []corev1.ContainerStatus{{State: running}},
			ContainerStatuses:     []corev1.ContainerStatus{{State: running}, {State: running}, {State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ErrImagePull"}}}},
		},
	}
	raw, err := p.Marshal()
	require.NoError(t, err)
	for name, tr := range trimmers(t) {
		decoded, err := tr.decodePod(raw)
		require.NoError(t, err)
		for how, got := range map[string]*lifecycle.Pod{"reference": tr.reference(p), "decode": decoded} {
			require.Equal(t, uint16(3), got.Containers, "%s %s", name, how)
			require.Equal(t, uint16(1), got.InitContainers, "%s %s", name, how)
			require.Equal(t, uint16(2), got.ContainersRunning, "%s %s: not the init container, not the waiting one", name, how)
		}
	}
}

// mustPod is trimmer.pod for tests, whose pods always encode.
func (t *trimmer) mustPod(p *corev1.Pod) *lifecycle.Pod {
	out, err := t.pod(p)
	if err != nil {
		panic(err)
	}
	return out
}

// reference is what the trim must keep of a pod, read straight from the
// corev1 types: an independent second reading of the fields the protobuf
// decoder declares, which TestDecodePodMatchesTrim holds it to. A field
// added to the decoder is added here too.
func (t *trimmer) reference(p *corev1.Pod) *lifecycle.Pod {
	out := &lifecycle.Pod{
		ObjectMeta: trimMeta(&p.ObjectMeta, t.podLabels, t.podAnnotations),
		NodeName:   p.Spec.NodeName,
	}
	if t.allPodLabels {
		out.Labels = internLabels(p.Labels)
	}
	out.DeletionTimestamp = p.DeletionTimestamp
	out.DeletionGracePeriodSeconds = p.DeletionGracePeriodSeconds
	if t.controllerRef {
		if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
			yes := true
			out.OwnerReferences = []metav1.OwnerReference{{APIVersion: ref.APIVersion, Kind: ref.Kind, UID: ref.UID, Controller: &yes}}
		}
	}
	if rc := p.Spec.RuntimeClassName; rc != nil {
		out.RuntimeClassName = *rc
	}
	for _, v := range p.Spec.Volumes {
		// The kubelet's isStatefulPod (1.37).
		if v.Secret == nil && v.ConfigMap == nil && v.DownwardAPI == nil && v.EmptyDir == nil && v.Projected == nil {
			out.StatefulVolume = true
		}
		switch {
		case v.PersistentVolumeClaim != nil:
			out.Volumes = append(out.Volumes, lifecycle.Volume{Claim: v.PersistentVolumeClaim.ClaimName})
		case v.Ephemeral != nil:
			vol := lifecycle.Volume{Claim: p.Name + "-" + v.Name, Ephemeral: true}
			if tpl := v.Ephemeral.VolumeClaimTemplate; tpl != nil {
				vol.TemplateClass = tpl.Spec.StorageClassName
			}
			out.Volumes = append(out.Volumes, vol)
		}
	}
	out.HasInitContainers = len(p.Spec.InitContainers) > 0
	out.Containers, out.InitContainers = uint16(len(p.Spec.Containers)), uint16(len(p.Spec.InitContainers))
	earliest := func(t metav1.Time) {
		if s := unixOrZero(t); s != 0 && (out.FirstContainerStart == 0 || s < out.FirstContainerStart) {
			out.FirstContainerStart = s
		}
	}
	for _, init := range []bool{false, true} {
		statuses := p.Status.ContainerStatuses
		if init {
			statuses = p.Status.InitContainerStatuses
		}
		for _, cs := range statuses {
			if r := cs.State.Running; r != nil {
				earliest(r.StartedAt)
				if !init {
					out.ContainersRunning++
				}
				if s := unixOrZero(r.StartedAt); !init && s > out.ContainersStarted {
					out.ContainersStarted = s
				}
			}
			if term := cs.State.Terminated; term != nil {
				earliest(term.StartedAt)
				if f := unixOrZero(term.FinishedAt); term.ExitCode == 137 && term.Reason != "OOMKilled" && f > out.ContainerKilled {
					out.ContainerKilled = f
				}
			}
			if last := cs.LastTerminationState.Terminated; last != nil {
				earliest(last.StartedAt)
			}
			if cs.RestartCount != 0 {
				out.ContainersRestarted = true
			}
		}
	}
	n := 0
	for i := range p.Status.Conditions {
		if t.conditionTypes[p.Status.Conditions[i].Type] != "" {
			n++
		}
	}
	if n > 0 {
		out.Conditions = make([]lifecycle.Condition, 0, n)
	}
	for i := range p.Status.Conditions {
		c := &p.Status.Conditions[i]
		if typ := t.conditionTypes[c.Type]; typ != "" {
			out.Conditions = append(out.Conditions, lifecycle.Condition{Type: typ, Status: internStatus(c.Status), LastTransitionTime: unixOrZero(c.LastTransitionTime)})
		}
	}
	return out
}
