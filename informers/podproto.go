package informers

import (
	"bytes"
	"errors"
	"fmt"
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

var errTruncated = errors.New("truncated protobuf")

// eachField walks the fields of one message, calling fn with each field's
// number, wire type and value: the payload of a bytes field, the varint
// otherwise (fixed-width values as their bits). fn returns an error to
// stop.
func eachField(b []byte, fn func(num protowire.Number, typ protowire.Type, v []byte, n uint64) error) error {
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return protowire.ParseError(l)
		}
		b = b[l:]
		var err error
		switch typ {
		case protowire.BytesType:
			v, l := protowire.ConsumeBytes(b)
			if l < 0 {
				return protowire.ParseError(l)
			}
			err, b = fn(num, typ, v, 0), b[l:]
		case protowire.VarintType:
			v, l := protowire.ConsumeVarint(b)
			if l < 0 {
				return protowire.ParseError(l)
			}
			err, b = fn(num, typ, nil, v), b[l:]
		default:
			l := protowire.ConsumeFieldValue(num, typ, b)
			if l < 0 {
				return protowire.ParseError(l)
			}
			b = b[l:]
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// want checks that field num, which podslo reads, came with the wire type
// the schema gives it, as the generated code does.
func want(num protowire.Number, got, typ protowire.Type) error {
	if got != typ {
		return fmt.Errorf("field %d: wrong wire type %d", num, got)
	}
	return nil
}

// unwrap returns the kind and the raw bytes of an object in the API
// server's protobuf envelope, without copying them.
func unwrap(data []byte) (kind string, raw []byte, err error) {
	if !bytes.HasPrefix(data, protobufMagic) {
		return "", nil, errors.New("no protobuf envelope")
	}
	err = eachField(data[len(protobufMagic):], func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		switch num {
		case 1: // typeMeta
			if err := want(num, typ, protowire.BytesType); err != nil {
				return err
			}
			return eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				if num == 2 { // kind
					if err := want(num, typ, protowire.BytesType); err != nil {
						return err
					}
					kind = string(v)
				}
				return nil
			})
		case 2: // raw
			if err := want(num, typ, protowire.BytesType); err != nil {
				return err
			}
			raw = v
		}
		return nil
	})
	return kind, raw, err
}

// podFields is one pod's decoding: what the trim keeps so far, and the
// state of the messages that a repeated occurrence merges into.
type podFields struct {
	t   *trimmer
	out *lifecycle.Pod
	// labels is every label, when the trim keeps them all.
	labels map[string]string
	// conditions in their order, before the trim's filter.
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
	err := eachField(raw, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		var err error
		switch num {
		case 1:
			if err = want(num, typ, protowire.BytesType); err == nil {
				err = d.meta(v)
			}
		case 2:
			if err = want(num, typ, protowire.BytesType); err == nil {
				err = d.spec(v)
			}
		case 3:
			if err = want(num, typ, protowire.BytesType); err == nil {
				err = d.status(v)
			}
		}
		return err
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

func (d *podFields) meta(b []byte) error {
	m := &d.out.ObjectMeta
	return eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, x uint64) error {
		switch num {
		case 1, 3, 5, 6: // name, namespace, uid, resourceVersion
			if err := want(num, typ, protowire.BytesType); err != nil {
				return err
			}
			switch num {
			case 1:
				m.Name = string(v)
			case 3:
				m.Namespace = string(v)
			case 5:
				m.UID = types.UID(v)
			case 6:
				m.ResourceVersion = string(v)
			}
		case 8, 9: // creationTimestamp, deletionTimestamp
			if err := want(num, typ, protowire.BytesType); err != nil {
				return err
			}
			t, err := decodeTime(v)
			if err != nil {
				return err
			}
			if num == 8 {
				m.CreationTimestamp = t
			} else {
				m.DeletionTimestamp = &t
			}
		case 10: // deletionGracePeriodSeconds
			if err := want(num, typ, protowire.VarintType); err != nil {
				return err
			}
			s := int64(x)
			m.DeletionGracePeriodSeconds = &s
		case 11, 12: // labels, annotations
			if err := want(num, typ, protowire.BytesType); err != nil {
				return err
			}
			k, val, err := mapEntry(v)
			if err != nil {
				return err
			}
			if num == 11 {
				d.label(k, val)
			} else {
				d.annotation(k, val)
			}
		}
		return nil
	})
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
func mapEntry(b []byte) (k, v []byte, err error) {
	err = eachField(b, func(num protowire.Number, typ protowire.Type, val []byte, _ uint64) error {
		switch num {
		case 1, 2:
			if err := want(num, typ, protowire.BytesType); err != nil {
				return err
			}
			if num == 1 {
				k = val
			} else {
				v = val
			}
		}
		return nil
	})
	return k, v, err
}

// decodeTime decodes a metav1.Time as its Unmarshal does: whole seconds,
// local time, the zero time when empty.
func decodeTime(b []byte) (metav1.Time, error) {
	var secs int64
	err := eachField(b, func(num protowire.Number, typ protowire.Type, _ []byte, x uint64) error {
		if num == 1 {
			if err := want(num, typ, protowire.VarintType); err != nil {
				return err
			}
			secs = int64(x)
		}
		return nil
	})
	if err != nil || len(b) == 0 {
		return metav1.Time{}, err
	}
	return metav1.Time{Time: time.Unix(secs, 0).Local()}, nil
}

// unixOf is unixOrZero of a decoded metav1.Time.
func unixOf(b []byte) (int64, error) {
	t, err := decodeTime(b)
	return unixOrZero(t), err
}

func (d *podFields) spec(b []byte) error {
	p := d.out
	return eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		switch num {
		case 1: // volumes
			if err := want(num, typ, protowire.BytesType); err != nil {
				return err
			}
			return d.volume(v)
		case 10, 29: // nodeName, runtimeClassName
			if err := want(num, typ, protowire.BytesType); err != nil {
				return err
			}
			if num == 10 {
				p.NodeName = string(v)
			} else {
				p.RuntimeClassName = string(v)
			}
		case 20: // initContainers
			if err := want(num, typ, protowire.BytesType); err != nil {
				return err
			}
			p.HasInitContainers = true
		}
		return nil
	})
}

// volume keeps a volume that a PVC backs, as trimmer.pod does: a
// persistentVolumeClaim before an ephemeral volume.
func (d *podFields) volume(b []byte) error {
	var (
		name, claim       []byte
		hasClaim, isEphem bool
		class             *string
	)
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		switch num {
		case 1: // name
			if err := want(num, typ, protowire.BytesType); err != nil {
				return err
			}
			name = v
		case 2: // volumeSource
			if err := want(num, typ, protowire.BytesType); err != nil {
				return err
			}
			return eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				switch num {
				case 10: // persistentVolumeClaim
					if err := want(num, typ, protowire.BytesType); err != nil {
						return err
					}
					hasClaim = true
					return eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
						if num == 1 { // claimName
							if err := want(num, typ, protowire.BytesType); err != nil {
								return err
							}
							claim = v
						}
						return nil
					})
				case 29: // ephemeral
					if err := want(num, typ, protowire.BytesType); err != nil {
						return err
					}
					isEphem = true
					return eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
						if num != 1 { // volumeClaimTemplate
							return nil
						}
						if err := want(num, typ, protowire.BytesType); err != nil {
							return err
						}
						return eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
							if num != 2 { // spec
								return nil
							}
							if err := want(num, typ, protowire.BytesType); err != nil {
								return err
							}
							return eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
								if num == 5 { // storageClassName
									if err := want(num, typ, protowire.BytesType); err != nil {
										return err
									}
									s := string(v)
									class = &s
								}
								return nil
							})
						})
					})
				}
				return nil
			})
		}
		return nil
	})
	if err != nil {
		return err
	}
	switch {
	case hasClaim:
		d.out.Volumes = append(d.out.Volumes, lifecycle.Volume{Claim: string(claim)})
	case isEphem:
		// The volume's name for now: decodePod prefixes the pod's.
		d.out.Volumes = append(d.out.Volumes, lifecycle.Volume{Claim: string(name), Ephemeral: true, TemplateClass: class})
	}
	return nil
}

func (d *podFields) status(b []byte) error {
	return eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		switch num {
		case 2: // conditions
			if err := want(num, typ, protowire.BytesType); err != nil {
				return err
			}
			return d.condition(v)
		case 8: // containerStatuses
			if err := want(num, typ, protowire.BytesType); err != nil {
				return err
			}
			return d.containerStatus(v)
		}
		return nil
	})
}

func (d *podFields) condition(b []byte) error {
	var c lifecycle.Condition
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		switch num {
		case 1, 2, 4: // type, status, lastTransitionTime
			if err := want(num, typ, protowire.BytesType); err != nil {
				return err
			}
			switch num {
			case 1:
				// The trim's own copy of a type it keeps, "" for one it
				// drops: the lookup does not copy v.
				c.Type = d.t.conditionTypes[corev1.PodConditionType(v)]
			case 2:
				c.Status = conditionStatus(v)
			case 4:
				var err error
				c.LastTransitionTime, err = unixOf(v)
				return err
			}
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

func (d *podFields) containerStatus(b []byte) error {
	var started int64
	running := false
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
		if num != 2 { // state
			return nil
		}
		if err := want(num, typ, protowire.BytesType); err != nil {
			return err
		}
		return eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
			if num != 2 { // running
				return nil
			}
			if err := want(num, typ, protowire.BytesType); err != nil {
				return err
			}
			running = true
			return eachField(v, func(num protowire.Number, typ protowire.Type, v []byte, _ uint64) error {
				if num != 1 { // startedAt
					return nil
				}
				if err := want(num, typ, protowire.BytesType); err != nil {
					return err
				}
				var err error
				started, err = unixOf(v)
				return err
			})
		})
	})
	if err != nil {
		return err
	}
	if running && started > d.out.ContainersStarted && started != 0 {
		d.out.ContainersStarted = started
	}
	return nil
}
