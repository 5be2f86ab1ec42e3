package main

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// pullRecord is what a pod's Pulled event says of its image: the ground
// truth of podslo_pod_image_pull_duration_seconds for the pod. deploy/kwok's
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

// pulledEvents lists the Pulled events of every pod, at the end of the run
// (they live an hour, longer than any run): the pods kwok wrote one for,
// and what it said. Two events of one pod (kwok starting the containers of
// a re-created sandbox again) must say the same, as kwok's do: the exporter
// takes the first it receives.
func (c *client) pulledEvents(ctx context.Context) (map[types.UID]pullRecord, error) {
	out := map[types.UID]pullRecord{}
	opts := metav1.ListOptions{FieldSelector: "reason=Pulled,involvedObject.kind=Pod", Limit: 500}
	for {
		var list *corev1.EventList
		err := retry(ctx, func() error {
			var err error
			list, err = c.cs.CoreV1().Events("").List(ctx, opts)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("list the Pulled events: %w", err)
		}
		for i := range list.Items {
			e := &list.Items[i]
			p, err := readPulled(e.Message)
			if err != nil {
				return nil, fmt.Errorf("event %s/%s: %w", e.Namespace, e.Name, err)
			}
			uid := e.InvolvedObject.UID
			if prev, ok := out[uid]; ok && !prev.same(p) {
				return nil, fmt.Errorf("pod %s/%s %s has Pulled events that disagree: %+v and %+v", e.Namespace, e.InvolvedObject.Name, uid, prev, p)
			}
			out[uid] = p
		}
		if list.Continue == "" {
			return out, nil
		}
		opts.Continue = list.Continue
	}
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
