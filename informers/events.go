package informers

import (
	"fmt"
	"regexp"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/store"
)

// DefaultUserErrorEventRegex matches the kubelet's FailedMount messages for
// a Secret or ConfigMap that does not exist: the pod author's mistake, which
// KEP-3085 says to leave out of the SLIs.
//
// The KEP's form, `MountVolume.SetUp failed for volume "(secret|config-map)
// .*" : (secret|config-map) ".*" not found`, matches no real message: the
// volume name is the pod's own (e.g. "config"), and the kubelet writes
// `configmap "x" not found` (before 1.10-ish: `configmaps "x" not found`),
// never "config-map". Projected volumes list several errors in brackets.
// This form accepts all of those, and the KEP's own, and nothing else:
//
//	MountVolume.SetUp failed for volume "config" : configmap "app" not found
//	MountVolume.SetUp failed for volume "creds" : secret "db" not found
//	MountVolume.SetUp failed for volume "kube-api-access-x" : [configmap "a" not found, secret "b" not found]
const DefaultUserErrorEventRegex = `MountVolume\.SetUp failed for volume "[^"]*" : \[?(?:[^\]]*, )?(?:secrets?|configmaps?|config-map) "[^"]*" not found`

// failedMountSelector asks the API server for FailedMount events on pods
// only, so that the events cache holds nothing else.
var failedMountSelector = fields.AndSelectors(
	fields.OneTermEqualSelector("reason", "FailedMount"),
	fields.OneTermEqualSelector("involvedObject.kind", "Pod"),
).String()

func (w *Watcher) handleEvent(obj any) {
	ev, ok := obj.(*corev1.Event)
	if !ok || ev.Reason != "FailedMount" || ev.InvolvedObject.UID == "" {
		return
	}
	if !w.userError.MatchString(ev.Message) {
		return
	}
	if err := w.MarkUserError(ev.InvolvedObject.UID); err != nil {
		w.log.Error("Recording a user error failed", "pod", ev.InvolvedObject.Namespace+"/"+ev.InvolvedObject.Name, "err", err)
	}
}

// MarkUserError records that the pod's own spec blocks its sandbox. A pod
// the store has no record of is either not seen yet (the pod watch lags the
// event watch) or already forgotten (events outlive their pods by an hour):
// the mark then waits in memory for the pod, and a deleted pod is never
// brought back.
func (w *Watcher) MarkUserError(uid types.UID) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	prev, known := w.store.Get(uid)
	if !known {
		if _, waiting := w.failed[uid]; !waiting {
			if _, ok := w.pendingUserErrors[uid]; !ok {
				w.pendingUserErrors[uid] = w.opts.Now()
			}
			return nil
		}
	}
	if prev.UserError {
		return nil
	}
	w.log.Info("Pod blocked by a missing Secret or ConfigMap, left out of the sandbox SLIs", "uid", uid)
	return w.apply(store.Change{UID: uid, State: lifecycle.MarkUserError(prev)})
}

func compileUserErrorRegex(expr string) (*regexp.Regexp, error) {
	if expr == "" {
		expr = DefaultUserErrorEventRegex
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("user error event regex %q: %w", expr, err)
	}
	return re, nil
}
