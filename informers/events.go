package informers

import (
	"fmt"
	"regexp"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
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

// eventSelector is failedMountSelector narrowed by the scope's namespace
// selector. The API server cannot select events by the node or the shard
// of their pod: handleEvent drops those.
func eventSelector(namespaceSelector string) string {
	if namespaceSelector == "" {
		return failedMountSelector
	}
	return failedMountSelector + "," + namespaceSelector
}

func (w *Watcher) handleEvent(obj any) {
	ev, ok := obj.(*corev1.Event)
	if !ok || ev.Reason != "FailedMount" || ev.InvolvedObject.UID == "" {
		return
	}
	if !w.opts.Scope.OwnsUID(ev.InvolvedObject.UID) {
		// Another shard's pod.
		return
	}
	if n := w.opts.Scope.Node; n != "" && ev.Source.Host != "" && ev.Source.Host != n {
		// The kubelet of another node reported it: another node's pod.
		// Events without a host wait in the pipeline for a pod that never
		// comes, and expire.
		return
	}
	if !w.userError.MatchString(ev.Message) {
		return
	}
	w.handler.UserError(ev.InvolvedObject.UID, ev.InvolvedObject.Namespace+"/"+ev.InvolvedObject.Name)
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
