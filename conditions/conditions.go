package conditions

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

var (
	// ErrInvalidType means a condition type is not in label-key form.
	ErrInvalidType = errors.New("invalid condition type")
	// ErrInvalidStatus means a status other than True, False or Unknown.
	ErrInvalidStatus = errors.New("invalid condition status")
	// ErrInvalidReason means a reason that the API server would reject.
	ErrInvalidReason = errors.New("invalid condition reason")
	// ErrNotOwned means the caller tried to write a condition type it does not own.
	ErrNotOwned = errors.New("condition type not owned")
)

// reasonPattern and maxReasonLen are the rules metav1.Condition validation
// applies; checking them here turns a rejected PATCH into an error at the call site.
const (
	reasonPattern = `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`
	maxReasonLen  = 1024
)

var reasonRegexp = regexp.MustCompile(reasonPattern)

// ValidateType checks the label-key form the API server requires of condition
// types. Give custom types a domain prefix (podslo.io/Stable) so that they
// cannot collide with the kubelet's Ready or PodScheduled.
func ValidateType(t string) error {
	if msgs := validation.IsQualifiedName(t); len(msgs) > 0 {
		return fmt.Errorf("%w %q: %s", ErrInvalidType, t, strings.Join(msgs, "; "))
	}
	return nil
}

func validateStatus(status string) error {
	switch status {
	case string(metav1.ConditionTrue), string(metav1.ConditionFalse), string(metav1.ConditionUnknown):
		return nil
	}
	return fmt.Errorf("%w %q: must be True, False or Unknown", ErrInvalidStatus, status)
}

// validateReason enforces KEP-1623's rule that the writer always says why,
// because no other actor knows better.
func validateReason(reason string) error {
	switch {
	case reason == "":
		return fmt.Errorf("%w: reason is required", ErrInvalidReason)
	case len(reason) > maxReasonLen:
		return fmt.Errorf("%w: longer than %d characters", ErrInvalidReason, maxReasonLen)
	case !reasonRegexp.MatchString(reason):
		return fmt.Errorf("%w %q: must be CamelCase matching %s", ErrInvalidReason, reason, reasonPattern)
	}
	return nil
}

func validate(t, status, reason string) error {
	if err := validateStatus(status); err != nil {
		return fmt.Errorf("condition %q: %w", t, err)
	}
	if err := validateReason(reason); err != nil {
		return fmt.Errorf("condition %q: %w", t, err)
	}
	return nil
}

// transitionTime keeps the previous time unless the status really changed, so
// that lastTransitionTime tells an operator how long the current status has held.
// A missing previous time is filled in because KEP-1623 makes the field required.
func transitionTime(prev metav1.Time, prevStatus, status string, now metav1.Time) metav1.Time {
	if prevStatus != status || prev.IsZero() {
		// The API stores whole seconds; a sub-second now would differ from
		// what is read back and look like a change on every sync.
		return metav1.NewTime(now.Truncate(time.Second))
	}
	return prev
}

// GetPod returns a copy of the pod condition of type t, so that callers cannot
// write through it and bypass ownership.
func GetPod(conds []corev1.PodCondition, t corev1.PodConditionType) (corev1.PodCondition, bool) {
	for _, c := range conds {
		if c.Type == t {
			return c, true
		}
	}
	return corev1.PodCondition{}, false
}

// Owner is the only way to write conditions, so that a condition type the
// caller does not own is never touched. The zero Owner owns nothing. It
// writes pod conditions only: podslo has no object with metav1.Condition
// status, which apimachinery's meta.SetStatusCondition would serve.
//
// Its methods change the slice in place: pass a copy, never an object from an
// informer cache, which other readers share.
type Owner struct {
	types map[string]struct{}
}

// NewOwner validates types up front so that a typo fails at start-up rather
// than on the first PATCH. Owned types must carry a domain prefix: an
// unprefixed type such as Ready belongs to Kubernetes itself, and owning it
// would let the caller overwrite the kubelet.
func NewOwner(types ...string) (Owner, error) {
	o := Owner{types: make(map[string]struct{}, len(types))}
	for _, t := range types {
		if err := ValidateType(t); err != nil {
			return Owner{}, fmt.Errorf("new owner: %w", err)
		}
		if !strings.Contains(t, "/") {
			return Owner{}, fmt.Errorf("new owner: %w %q: custom condition types need a domain prefix (example.com/%s)", ErrInvalidType, t, t)
		}
		o.types[t] = struct{}{}
	}
	return o, nil
}

// Owns reports whether t is one of the owner's condition types.
func (o Owner) Owns(t string) bool {
	_, ok := o.types[t]
	return ok
}

func (o Owner) checkOwned(t string) error {
	if !o.Owns(t) {
		return fmt.Errorf("condition %q: %w", t, ErrNotOwned)
	}
	return nil
}

// SetPod writes cond into pod.Status.Conditions and reports whether anything
// changed, so that callers can skip no-op PATCHes. It derives the fields the
// caller must not choose: ObservedGeneration comes from pod.Generation and
// LastTransitionTime from now. LastProbeTime is left as it was, because
// KEP-1623 dropped heartbeat-style times for the write load they cause.
func (o Owner) SetPod(pod *corev1.Pod, cond corev1.PodCondition, now metav1.Time) (bool, error) {
	if err := o.checkOwned(string(cond.Type)); err != nil {
		return false, err
	}
	if err := validate(string(cond.Type), string(cond.Status), cond.Reason); err != nil {
		return false, err
	}
	conds := pod.Status.Conditions
	i := slices.IndexFunc(conds, func(c corev1.PodCondition) bool { return c.Type == cond.Type })
	if i < 0 {
		pod.Status.Conditions = append(conds, corev1.PodCondition{
			Type:               cond.Type,
			Status:             cond.Status,
			ObservedGeneration: pod.Generation,
			LastTransitionTime: transitionTime(metav1.Time{}, "", string(cond.Status), now),
			Reason:             cond.Reason,
			Message:            cond.Message,
		})
		return true, nil
	}
	prev := conds[i]
	next := prev
	next.Status = cond.Status
	next.ObservedGeneration = pod.Generation
	next.LastTransitionTime = transitionTime(prev.LastTransitionTime, string(prev.Status), string(cond.Status), now)
	next.Reason = cond.Reason
	next.Message = cond.Message
	if next.Status == prev.Status && next.ObservedGeneration == prev.ObservedGeneration &&
		next.LastTransitionTime.Equal(&prev.LastTransitionTime) &&
		next.Reason == prev.Reason && next.Message == prev.Message {
		return false, nil
	}
	conds[i] = next
	return true, nil
}

// deleteDirective is how a strategic-merge patch removes one element of a
// list merged by key; leaving the element out would keep it on the server.
type deleteDirective struct {
	Patch string                  `json:"$patch"`
	Type  corev1.PodConditionType `json:"type"`
}

// PodStatusPatch builds the strategic-merge PATCH body for pods/status. It
// carries only the owned conditions found in conds, so it can be given the
// whole pod.Status.Conditions: status.conditions is merged by "type", and types
// absent from the patch, such as the kubelet's, stay as they are on the server.
// Each type in removed, which must be owned, is deleted on the server.
func (o Owner) PodStatusPatch(conds []corev1.PodCondition, removed ...corev1.PodConditionType) ([]byte, error) {
	items := []any{}
	for _, c := range conds {
		if !o.Owns(string(c.Type)) {
			continue
		}
		if slices.Contains(removed, c.Type) {
			return nil, fmt.Errorf("pod status patch: condition %q is both set and removed", c.Type)
		}
		items = append(items, c)
	}
	for _, t := range removed {
		if err := o.checkOwned(string(t)); err != nil {
			return nil, fmt.Errorf("pod status patch: %w", err)
		}
		items = append(items, deleteDirective{Patch: "delete", Type: t})
	}
	body, err := json.Marshal(map[string]any{
		"status": map[string]any{"conditions": items},
	})
	if err != nil {
		return nil, fmt.Errorf("pod status patch: %w", err)
	}
	return body, nil
}
