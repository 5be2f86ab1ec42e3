package informers

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podslo/podslo/lifecycle"
)

// A pod's protobuf bytes are decoded here straight into the trimmed
// lifecycle.Pod, reading only the fields the trim keeps and skipping the
// rest (managed fields, container specs, most of the status) without
// decoding them. Decoding a whole corev1.Pod and trimming it cost about
// twice the pod's Unmarshal per watch event, nearly all of it allocations
// that became garbage at once (docs/benchmarks.md, BenchmarkWatchPath).
//
// The result must equal trimmer.pod of the pod that corev1.Pod.Unmarshal
// decodes from the same bytes: TestDecodePodMatchesTrim holds the two
// together. The field numbers are those of k8s.io/api's generated.proto.
// Like the generated code, a message that occurs twice is merged, a scalar
// that occurs twice keeps its last value, and a metav1.Time keeps only its
// last occurrence. Unlike it, a field podslo does not read is skipped
// whatever its wire type.

// protobufMagic starts every object the API server encodes as protobuf,
// before its runtime.Unknown envelope.
var protobufMagic = []byte{0x6b, 0x38, 0x73, 0x00}

// field is one field of a message: its number, wire type and value (the
// payload of a bytes field, the number of a varint).
type field struct {
	num protowire.Number
	typ protowire.Type
	b   []byte
	x   uint64
}

// bytes is the payload of a field that podslo reads as a string or a
// message, checking its wire type as the generated code does.
func (f field) bytes() ([]byte, error) {
	if f.typ != protowire.BytesType {
		return nil, fmt.Errorf("field %d: wrong wire type %d", f.num, f.typ)
	}
	return f.b, nil
}

// varint is the value of a field that podslo reads as an integer.
func (f field) varint() (int64, error) {
	if f.typ != protowire.VarintType {
		return 0, fmt.Errorf("field %d: wrong wire type %d", f.num, f.typ)
	}
	return int64(f.x), nil
}

// eachField calls fn with each field of the message b, in order, until fn
// returns an error. Fixed-width and group fields, which podslo never
// reads, are skipped.
func eachField(b []byte, fn func(field) error) error {
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return protowire.ParseError(l)
		}
		b = b[l:]
		f := field{num: num, typ: typ}
		switch typ {
		case protowire.BytesType:
			f.b, l = protowire.ConsumeBytes(b)
		case protowire.VarintType:
			f.x, l = protowire.ConsumeVarint(b)
		default:
			l = protowire.ConsumeFieldValue(num, typ, b)
		}
		if l < 0 {
			return protowire.ParseError(l)
		}
		b = b[l:]
		if typ != protowire.BytesType && typ != protowire.VarintType {
			continue
		}
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

// eachFieldOf calls fn with each field of the message that f holds.
func eachFieldOf(f field, fn func(field) error) error {
	b, err := f.bytes()
	if err != nil {
		return err
	}
	return eachField(b, fn)
}

// str is a string field's value, copied.
func str(f field) (string, error) {
	b, err := f.bytes()
	return string(b), err
}

// unwrap returns the kind and the raw bytes of an object in the API
// server's protobuf envelope, without copying them.
func unwrap(data []byte) (kind string, raw []byte, err error) {
	if !bytes.HasPrefix(data, protobufMagic) {
		return "", nil, errors.New("no protobuf envelope")
	}
	err = eachField(data[len(protobufMagic):], func(f field) (err error) {
		switch f.num {
		case 1: // typeMeta
			return eachFieldOf(f, func(f field) (err error) {
				if f.num == 2 { // kind
					kind, err = str(f)
				}
				return err
			})
		case 2: // raw
			raw, err = f.bytes()
		}
		return err
	})
	return kind, raw, err
}

// podFields is one pod's decoding: what the trim keeps so far, and the
// conditions before the trim's filter.
type podFields struct {
	t   *trimmer
	out *lifecycle.Pod
	// labels is every label, when the trim keeps them all.
	labels     map[string]string
	conditions []lifecycle.Condition
}

// decodePod decodes a pod's bytes (a corev1.Pod message, outside its
// envelope) into its trimmed form.
func (t *trimmer) decodePod(raw []byte) (*lifecycle.Pod, error) {
	p := &lifecycle.Pod{}
	if err := t.decodePodInto(raw, p); err != nil {
		return nil, err
	}
	return p, nil
}

// decodePodInto is decodePod into out, which must be empty.
func (t *trimmer) decodePodInto(raw []byte, out *lifecycle.Pod) error {
	d := podFields{t: t, out: out}
	err := eachField(raw, func(f field) error {
		switch f.num {
		case 1:
			return eachFieldOf(f, d.meta)
		case 2:
			return eachFieldOf(f, d.spec)
		case 3:
			return eachFieldOf(f, d.status)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("decode pod: %w", err)
	}
	p := d.out
	for i := range p.Volumes {
		if p.Volumes[i].Ephemeral {
			// The ephemeral volume controller names the claim
			// <pod>-<volume>; the pod's name may come after its spec.
			p.Volumes[i].Claim = p.Name + "-" + p.Volumes[i].Claim
		}
	}
	if t.allPodLabels {
		p.Labels = internLabels(d.labels)
	}
	n := 0
	for i := range d.conditions {
		if d.conditions[i].Type != "" {
			n++
		}
	}
	if n > 0 {
		p.Conditions = make([]lifecycle.Condition, 0, n)
		for _, c := range d.conditions {
			if c.Type != "" {
				p.Conditions = append(p.Conditions, c)
			}
		}
	}
	return nil
}

func (d *podFields) meta(f field) (err error) {
	m := &d.out.ObjectMeta
	switch f.num {
	case 1:
		m.Name, err = str(f)
	case 3:
		m.Namespace, err = str(f)
	case 5:
		var uid string
		uid, err = str(f)
		m.UID = types.UID(uid)
	case 6:
		m.ResourceVersion, err = str(f)
	case 8:
		m.CreationTimestamp, err = decodeTime(f)
	case 9:
		var t metav1.Time
		t, err = decodeTime(f)
		m.DeletionTimestamp = &t
	case 10:
		var s int64
		s, err = f.varint()
		m.DeletionGracePeriodSeconds = &s
	case 13: // ownerReferences
		if d.t.controllerRef {
			return d.ownerReference(f)
		}
	case 11, 12: // labels, annotations
		var k, v []byte
		if k, v, err = mapEntry(f); err == nil {
			if f.num == 11 {
				d.label(k, v)
			} else {
				d.annotation(k, v)
			}
		}
	}
	return err
}

// isController is the Controller of every kept owner reference.
var isController = true

// ownerReference keeps the pod's first controller reference (the API
// server refuses a second), and of it only what the owner-kind resolution
// reads: API version, kind and UID.
func (d *podFields) ownerReference(f field) error {
	var apiVersion, kind, uid []byte
	controller := false
	err := eachFieldOf(f, func(f field) (err error) {
		switch f.num {
		case 1:
			kind, err = f.bytes()
		case 4:
			uid, err = f.bytes()
		case 5:
			apiVersion, err = f.bytes()
		case 6:
			var v int64
			v, err = f.varint()
			controller = v != 0
		}
		return err
	})
	if err != nil || !controller || len(d.out.OwnerReferences) > 0 {
		return err
	}
	d.out.OwnerReferences = []metav1.OwnerReference{{APIVersion: ownerAPIVersion(apiVersion), Kind: ownerKind(kind), UID: types.UID(uid), Controller: &isController}}
	return nil
}

// ownerAPIVersion and ownerKind are a controller reference's API version
// and kind, without a copy for the common ones (the switch on a
// conversion does not allocate).
func ownerAPIVersion(b []byte) string {
	switch string(b) {
	case "apps/v1":
		return "apps/v1"
	case "batch/v1":
		return "batch/v1"
	case "v1":
		return "v1"
	}
	return string(b)
}

func ownerKind(b []byte) string {
	switch string(b) {
	case "ReplicaSet":
		return "ReplicaSet"
	case "StatefulSet":
		return "StatefulSet"
	case "DaemonSet":
		return "DaemonSet"
	case "Job":
		return "Job"
	case "Node":
		return "Node"
	}
	return string(b)
}

func (d *podFields) label(k, v []byte) {
	if d.t.allPodLabels {
		if d.labels == nil {
			d.labels = map[string]string{}
		}
		d.labels[string(k)] = string(v)
		return
	}
	if d.t.podLabels[string(k)] {
		if d.out.Labels == nil {
			d.out.Labels = make(map[string]string, len(d.t.podLabels))
		}
		d.out.Labels[string(k)] = string(v)
	}
}

func (d *podFields) annotation(k, v []byte) {
	if d.t.podAnnotations[string(k)] {
		if d.out.Annotations == nil {
			d.out.Annotations = make(map[string]string, len(d.t.podAnnotations))
		}
		d.out.Annotations[string(k)] = string(v)
	}
}

// mapEntry is a map<string, string> entry: key 1, value 2, either may be
// missing (the empty string).
func mapEntry(f field) (k, v []byte, err error) {
	err = eachFieldOf(f, func(f field) (err error) {
		switch f.num {
		case 1:
			k, err = f.bytes()
		case 2:
			v, err = f.bytes()
		}
		return err
	})
	return k, v, err
}

// decodeTime decodes a metav1.Time as its Unmarshal does: whole seconds,
// local time, the zero time when empty; a later occurrence replaces an
// earlier one whole.
func decodeTime(f field) (metav1.Time, error) {
	var secs int64
	err := eachFieldOf(f, func(f field) (err error) {
		if f.num == 1 {
			secs, err = f.varint()
		}
		return err
	})
	if err != nil || len(f.b) == 0 {
		return metav1.Time{}, err
	}
	return metav1.Time{Time: time.Unix(secs, 0).Local()}, nil
}

// unixOf is unixOrZero of a decoded metav1.Time.
func unixOf(f field) (int64, error) {
	t, err := decodeTime(f)
	return unixOrZero(t), err
}

func (d *podFields) spec(f field) (err error) {
	p := d.out
	switch f.num {
	case 1: // volumes
		return d.volume(f)
	case 2: // containers: each one's image is pulled before it starts
		_, err = f.bytes()
		p.Containers = saturatingInc(p.Containers)
	case 10:
		p.NodeName, err = str(f)
	case 20: // initContainers
		_, err = f.bytes()
		p.HasInitContainers = true
		p.InitContainers = saturatingInc(p.InitContainers)
	case 29:
		p.RuntimeClassName, err = str(f)
	}
	return err
}

// saturatingInc counts up to the largest uint16: a pod has far fewer
// containers, and a count that wrapped would end start-ups early.
func saturatingInc(n uint16) uint16 {
	if n == math.MaxUint16 {
		return n
	}
	return n + 1
}

// statelessVolumeSource tells the VolumeSource fields (k8s.io/api
// core/v1 generated.proto) of the volumes a stateless pod may have, as the
// kubelet's start-up tracker tells them (isStatefulPod): emptyDir (2),
// secret (6), downwardAPI (16), configMap (19) and projected (26, the
// service account token among them). Any other makes the pod stateful.
func statelessVolumeSource(n protowire.Number) bool {
	switch n {
	case 2, 6, 16, 19, 26:
		return true
	}
	return false
}

// volume keeps a volume that a PVC backs, as trimmer.pod does: a
// persistentVolumeClaim before an ephemeral volume; and notes whether the
// pod is stateful.
func (d *podFields) volume(f field) error {
	var (
		name, claim       []byte // copied only if kept
		hasClaim, isEphem bool
		stateless         bool // a source of statelessVolumeSource
		class             *string
	)
	err := eachFieldOf(f, func(f field) (err error) {
		switch f.num {
		case 1:
			name, err = f.bytes()
		case 2: // volumeSource
			return eachFieldOf(f, func(f field) error {
				stateless = stateless || statelessVolumeSource(f.num)
				switch f.num {
				case 10: // persistentVolumeClaim
					hasClaim = true
					return eachFieldOf(f, func(f field) (err error) {
						if f.num == 1 {
							claim, err = f.bytes()
						}
						return err
					})
				case 29: // ephemeral
					isEphem = true
					// volumeClaimTemplate (1), its spec (2), storageClassName (5)
					return eachFieldOf(f, nested(1, nested(2, func(f field) error {
						if f.num != 5 {
							return nil
						}
						s, err := str(f)
						class = &s
						return err
					})))
				}
				return nil
			})
		}
		return err
	})
	if err != nil {
		return err
	}
	// As isStatefulPod: a volume none of whose sources is a stateless one
	// (even one with no source) makes the pod stateful.
	d.out.StatefulVolume = d.out.StatefulVolume || !stateless
	switch {
	case hasClaim:
		d.out.Volumes = append(d.out.Volumes, lifecycle.Volume{Claim: string(claim)})
	case isEphem:
		// The volume's name for now: decodePodInto prefixes the pod's.
		d.out.Volumes = append(d.out.Volumes, lifecycle.Volume{Claim: string(name), Ephemeral: true, TemplateClass: class})
	}
	return nil
}

// nested is a field handler that passes the fields of the message in
// field num to fn, and ignores every other field.
func nested(num protowire.Number, fn func(field) error) func(field) error {
	return func(f field) error {
		if f.num != num {
			return nil
		}
		return eachFieldOf(f, fn)
	}
}

func (d *podFields) status(f field) error {
	switch f.num {
	case 2: // conditions
		return d.condition(f)
	case 8: // containerStatuses
		return d.containerStatus(f, false)
	case 10: // initContainerStatuses
		return d.containerStatus(f, true)
	}
	return nil
}

func (d *podFields) condition(f field) error {
	var c lifecycle.Condition
	err := eachFieldOf(f, func(f field) error {
		switch f.num {
		case 1: // type
			b, err := f.bytes()
			// The trim's own copy of a type it keeps, "" for one it
			// drops: the lookup does not copy b.
			c.Type = d.t.conditionTypes[corev1.PodConditionType(b)]
			return err
		case 2: // status
			b, err := f.bytes()
			c.Status = conditionStatus(b)
			return err
		case 4: // lastTransitionTime
			var err error
			c.LastTransitionTime, err = unixOf(f)
			return err
		}
		return nil
	})
	d.conditions = append(d.conditions, c)
	return err
}

func conditionStatus(v []byte) corev1.ConditionStatus {
	switch string(v) {
	case string(corev1.ConditionTrue):
		return corev1.ConditionTrue
	case string(corev1.ConditionFalse):
		return corev1.ConditionFalse
	case string(corev1.ConditionUnknown):
		return corev1.ConditionUnknown
	}
	return corev1.ConditionStatus(v)
}

// containerStatus reads a container's start and end times into the pod,
// as trimmer.pod does (containerTimes).
func (d *podFields) containerStatus(f field, init bool) error {
	var c containerTimes
	err := eachFieldOf(f, func(f field) error {
		switch f.num {
		case 2: // state
			return eachFieldOf(f, func(f field) (err error) {
				switch f.num {
				case 2: // running: startedAt (1)
					c.running = true
					return eachFieldOf(f, func(f field) (err error) {
						if f.num == 1 {
							c.started, err = unixOf(f)
						}
						return err
					})
				case 3: // terminated
					return terminated(f, &c)
				}
				return nil
			})
		case 5: // restartCount
			v, err := f.varint()
			c.restarted = v != 0
			return err
		case 3: // lastState, terminated (3)
			return eachFieldOf(f, nested(3, func(f field) error {
				if f.num == 5 {
					var err error
					c.lastStarted, err = unixOf(f)
					return err
				}
				return nil
			}))
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.into(d.out, init)
	return nil
}

// terminated reads state.terminated: exitCode (1), reason (3), startedAt
// (5), finishedAt (6).
func terminated(f field, c *containerTimes) error {
	return eachFieldOf(f, func(f field) (err error) {
		switch f.num {
		case 1:
			var v int64
			v, err = f.varint()
			c.exitCode = int32(v)
		case 3:
			var b []byte
			b, err = f.bytes()
			c.oomKilled = string(b) == "OOMKilled"
		case 5:
			c.terminatedStarted, err = unixOf(f)
		case 6:
			c.finished, err = unixOf(f)
		}
		return err
	})
}
