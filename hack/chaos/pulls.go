package main

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// pullRecord is what a pod's Pulled event says of its image: the ground
// truth of podslo_image_pull_duration_seconds for the pod. deploy/kwok's
// containers' start stage writes one per pod, about no container, before it
// starts the containers (deploy/kwok/README.md, "Image pulls").
type pullRecord struct {
	// Seconds is the pull including its wait in the pull queue, as the
	// message gives it to the millisecond; 0 for an image already present.
	Seconds float64 `json:"seconds"`
	Cached  bool    `json:"cached,omitempty"`
	// Size is the image's size in bytes, nil when the message gives none.
	Size *uint64 `json:"size,omitempty"`
}

// pulledIn reads the kubelet's `Successfully pulled image "x" in 1.234s
// (1.5s including waiting). Image size: N bytes.`: the span including the
// wait is what counts (docs/metrics.md, "Image pulls").
var pulledIn = regexp.MustCompile(`^Successfully pulled image "[^"]*" in \S+ \((\S+) including waiting\)(?:\. Image size: (\d+) bytes\.)?$`)

// readPulled reads one Pulled event's message.
func readPulled(msg string) (pullRecord, error) {
	if strings.HasPrefix(msg, "Container image ") && strings.HasSuffix(msg, " already present on machine") {
		return pullRecord{Cached: true}, nil
	}
	m := pulledIn.FindStringSubmatch(msg)
	if m == nil {
		return pullRecord{}, fmt.Errorf("a Pulled event's message %q is neither a pull nor a cache hit", msg)
	}
	d, err := time.ParseDuration(m[1])
	if err != nil {
		return pullRecord{}, fmt.Errorf("a Pulled event's message %q: %w", msg, err)
	}
	p := pullRecord{Seconds: d.Seconds()}
	if m[2] != "" {
		size, err := strconv.ParseUint(m[2], 10, 64)
		if err != nil {
			return pullRecord{}, fmt.Errorf("a Pulled event's message %q: %w", msg, err)
		}
		p.Size = &size
	}
	return p, nil
}

// podPulls is what a pod's image events say: each container's Pulled
// event, keyed by its involvedObject.fieldPath ("" for kwok's, which names
// no container), and whether a pull failed (a Failed event, which only the
// harness writes: workload.go).
type podPulls struct {
	Containers map[string]pullRecord `json:"containers"`
	Failed     bool                  `json:"failed,omitempty"`
}

// counted are the events that count for a pod of containers containers
// (init containers included), as lifecycle.Pulls counts them: kwok's
// event about no container stands for the only container of a
// one-container pod, and is ignored beside an event about a container.
func (p podPulls) counted(containers int) map[string]pullRecord {
	if _, pod := p.Containers[""]; !pod || (containers == 1 && len(p.Containers) == 1) {
		return p.Containers
	}
	out := map[string]pullRecord{}
	for k, r := range p.Containers {
		if k != "" {
			out[k] = r
		}
	}
	return out
}

// complete reports whether every container has its image.
func (p podPulls) complete(containers int) bool {
	return containers > 0 && len(p.counted(containers)) >= containers
}

// pullSum is what podslo makes of a complete pod's pulls (lifecycle's
// pulls): their sum and its init containers' part, in whole milliseconds
// as the messages give them, whether every image was present, and the
// size gauge (the sizes rounded up to a KiB each; 0 when every image was
// present, none when no message gave a size).
type pullSum struct {
	Ms, InitMs int64
	Cached     bool
	Size       *float64
}

func (p podPulls) sum(containers int) pullSum {
	s := pullSum{Cached: true}
	var kib uint64
	for k, r := range p.counted(containers) {
		ms := int64(math.Round(r.Seconds * 1000))
		s.Ms += ms
		if strings.HasPrefix(k, "spec.initContainers{") {
			s.InitMs += ms
		}
		if r.Size != nil {
			kib += *r.Size/1024 + min(*r.Size%1024, 1)
		}
		s.Cached = s.Cached && r.Cached
	}
	if kib > 0 || s.Cached {
		v := float64(kib * 1024)
		s.Size = &v
	}
	return s
}

// pulledEvents lists the image events of every pod at the end of the run
// (they live an hour, longer than any run): the Pulled events kwok and the
// harness wrote, per container, and the Failed ones. Two Pulled events
// about one container (kwok starting the containers of a re-created
// sandbox again) must say the same, as kwok's do: the exporter takes the
// first it receives.
func (c *client) pulledEvents(ctx context.Context) (map[types.UID]podPulls, error) {
	out := map[types.UID]podPulls{}
	for _, reason := range []string{"Pulled", "Failed"} {
		opts := metav1.ListOptions{FieldSelector: "reason=" + reason + ",involvedObject.kind=Pod", Limit: 500}
		for {
			var list *corev1.EventList
			err := retry(ctx, func() error {
				var err error
				list, err = c.cs.CoreV1().Events("").List(ctx, opts)
				return err
			})
			if err != nil {
				return nil, fmt.Errorf("list the %s events: %w", reason, err)
			}
			for i := range list.Items {
				e := &list.Items[i]
				uid := e.InvolvedObject.UID
				pp := out[uid]
				if reason == "Failed" {
					if !strings.HasPrefix(e.Message, "Failed to pull image ") {
						return nil, fmt.Errorf("event %s/%s: a Failed event's message %q is not a failed pull", e.Namespace, e.Name, e.Message)
					}
					pp.Failed = true
					out[uid] = pp
					continue
				}
				p, err := readPulled(e.Message)
				if err != nil {
					return nil, fmt.Errorf("event %s/%s: %w", e.Namespace, e.Name, err)
				}
				path := e.InvolvedObject.FieldPath
				if prev, ok := pp.Containers[path]; ok && !prev.same(p) {
					return nil, fmt.Errorf("pod %s/%s %s has Pulled events about %q that disagree: %+v and %+v", e.Namespace, e.InvolvedObject.Name, uid, path, prev, p)
				}
				if pp.Containers == nil {
					pp.Containers = map[string]pullRecord{}
				}
				pp.Containers[path] = p
				out[uid] = pp
			}
			if list.Continue == "" {
				break
			}
			opts.Continue = list.Continue
		}
	}
	return out, nil
}

func (p pullRecord) same(o pullRecord) bool {
	return p.Seconds == o.Seconds && p.Cached == o.Cached && (p.Size == nil) == (o.Size == nil) && (p.Size == nil || *p.Size == *o.Size)
}

// sizeGauge is what podslo_pod_image_pull_size_bytes shows for the pull
// (docs/metrics.md): the size rounded up to a KiB, 0 for a cache hit, none
// when the message gives no size.
func (p pullRecord) sizeGauge() *float64 {
	var v float64
	switch {
	case p.Cached:
	case p.Size == nil:
		return nil
	default:
		v = float64((*p.Size + 1023) / 1024 * 1024)
	}
	return &v
}
