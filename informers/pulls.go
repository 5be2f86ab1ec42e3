package informers

import (
	"regexp"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/podslo/podslo/lifecycle"
)

// pullReasons are the reasons of the kubelet's image events that podslo
// watches, each through a watch of its own (a field selector cannot say
// "one of"): Pulled (pulled, with its durations, or already present) and
// Failed (ErrImagePull). Pulling says nothing the Pulled message does not
// (its "including waiting" duration starts at the Pulling event), and
// BackOff ("Back-off pulling image") always follows a Failed pull, while
// the same reason is written at every crash-looping container's restart:
// neither is watched, though both are read if a watch hands one on.
var pullReasons = []string{"Pulled", "Failed"}

// reasonSelector asks the API server for events of reason on pods only.
func reasonSelector(reason string) string {
	return fields.AndSelectors(
		fields.OneTermEqualSelector("reason", reason),
		fields.OneTermEqualSelector("involvedObject.kind", "Pod"),
	).String()
}

// eventSelectors are the selectors of every event watch: FailedMount, then
// the image events, each narrowed by the scope's namespace selector.
func eventSelectors(namespaceSelector string) []string {
	out := []string{eventSelector(namespaceSelector)}
	for _, r := range pullReasons {
		sel := reasonSelector(r)
		if namespaceSelector != "" {
			sel += "," + namespaceSelector
		}
		out = append(out, sel)
	}
	return out
}

// pulledMessage is the kubelet's Pulled message for an image it pulled, in
// the three forms kubelets have written: the duration of the pull alone
// (before 1.28), then with the pull including its wait in the pull queue,
// then with the image size (1.29 on):
//
//	Successfully pulled image "nginx" in 1.234s
//	Successfully pulled image "nginx" in 1.234s (1.5s including waiting)
//	Successfully pulled image "nginx" in 1.234s (1.5s including waiting). Image size: 72 bytes.
//
// Durations are Go's time.Duration strings, truncated to the millisecond
// by the kubelet ("812ms", "1m2.345s"), which time.ParseDuration reads
// exactly.
var pulledMessage = regexp.MustCompile(`^Successfully pulled image "[^"]*" in (\S+?)(?: \((\S+) including waiting\))?(?:\. Image size: (\d+) bytes\.?)?$`)

// pullEvent reads a kubelet image event: which container it is about, and
// what happened to its image. false for an event about an ephemeral
// container (no start-up), or one that says nothing of a pull: a Failed container start, a BackOff of a crashing container, a
// Pulled message without a duration (kubelets before 1.21).
func pullEvent(ev *corev1.Event) (lifecycle.PullEvent, bool) {
	e := lifecycle.PullEvent{Container: ev.InvolvedObject.FieldPath}
	switch {
	case e.Container == "":
		// About the pod, not a container: kwok's stages write no
		// fieldPath. lifecycle counts it for a one-container pod only.
	case strings.HasPrefix(e.Container, "spec.containers{"):
	case strings.HasPrefix(e.Container, "spec.initContainers{"):
		e.Init = true
	default:
		return e, false
	}
	msg := ev.Message
	switch ev.Reason {
	case "Pulled":
		if strings.HasPrefix(msg, `Container image "`) && strings.Contains(msg, `" already present on machine`) {
			e.Result = lifecycle.PullCached
			return e, true
		}
		m := pulledMessage.FindStringSubmatch(msg)
		if m == nil {
			return e, false
		}
		d := m[1]
		if m[2] != "" {
			d = m[2]
		}
		took, err := time.ParseDuration(d)
		if err != nil || took < 0 {
			return e, false
		}
		e.Result, e.Ms = lifecycle.PullDone, uint32(min(took.Milliseconds(), 1<<32-1))
		if m[3] != "" {
			// Digits only (the expression), so an error is a size beyond
			// uint64: not a size any image has, and the pull still counts.
			if b, err := strconv.ParseUint(m[3], 10, 64); err == nil {
				e.Bytes = b
			}
		}
		return e, true
	case "Failed":
		// "Failed to pull image "x": ...", then "Error: ErrImagePull" and,
		// at each retry, "Error: ImagePullBackOff".
		if strings.HasPrefix(msg, "Failed to pull image ") || msg == "Error: ErrImagePull" || msg == "Error: ImagePullBackOff" {
			e.Result = lifecycle.PullFailed
			return e, true
		}
	case "BackOff":
		if strings.HasPrefix(msg, "Back-off pulling image ") {
			e.Result = lifecycle.PullFailed
			return e, true
		}
	}
	return e, false
}
