package informers

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/podslo/podslo/internal/kube/kubetest"
	"github.com/podslo/podslo/lifecycle"
)

// recorder is a Handler that records what the watch hands on.
type recorder struct{ calls []string }

func (r *recorder) Pod(p *lifecycle.Pod) {
	r.calls = append(r.calls, "pod "+string(p.UID)+" "+p.RuntimeClass+"/"+p.StorageClass)
}
func (r *recorder) Deleted(uid types.UID, ref string, final *lifecycle.Pod) {
	r.calls = append(r.calls, "deleted "+string(uid)+" "+ref+" final="+map[bool]string{true: "yes", false: "no"}[final != nil])
}
func (r *recorder) UserError(uid types.UID, ref string) {
	r.calls = append(r.calls, "user error "+string(uid)+" "+ref)
}
func (r *recorder) ImagePull(uid types.UID, ref string, e lifecycle.PullEvent) {
	r.calls = append(r.calls, fmt.Sprintf("image pull %s %s %s %d %d", uid, ref, e.Container, e.Result, e.Ms))
}
func (r *recorder) Synced(func() map[types.UID]struct{}, func() bool) {
	r.calls = append(r.calls, "synced")
}

func podNamed(name string, uid types.UID) *lifecycle.Pod {
	return &lifecycle.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid}, RuntimeClassName: "kata"}
}

// The watch hands every pod on with its classes, and tells a pod deleted
// while it was down: gone from a relist, or its name back with another UID
// (deleted and re-created under the same name), which no Deleted delta
// reports since the key still exists.
func TestWatchHandsOnPodsAndDeletions(t *testing.T) {
	rec := &recorder{}
	w, err := New(kubetest.Wrap(fake.NewClientset()), rec, Options{})
	require.NoError(t, err)
	w.classes = *resolver(t)
	pw := newPodWatch("", nil)
	keys := pw.keys
	w.processPodDelta(pw, cache.Delta{Type: cache.Added, Object: podNamed("web", "old")})
	w.processPodDelta(pw, cache.Delta{Type: cache.Added, Object: podNamed("db", "d1")})
	w.processPodDelta(pw, cache.Delta{Type: cache.Replaced, Object: podNamed("web", "new")})
	ref, ok, err := keys.GetByKey("ns/db")
	require.NoError(t, err)
	require.True(t, ok)
	w.processPodDelta(pw, cache.Delta{Type: cache.Deleted, Object: cache.DeletedFinalStateUnknown{Key: "ns/db", Obj: ref}})
	w.processPodDelta(pw, cache.Delta{Type: cache.Deleted, Object: podNamed("web", "new")})
	assert.Equal(t, []string{
		"pod old kata/none",
		"pod d1 kata/none",
		"deleted old ns/web final=no",
		"pod new kata/none",
		"deleted d1 ns/db final=no",
		"deleted new ns/web final=yes",
	}, rec.calls)
	assert.Empty(t, keys.ListKeys())
}

func TestPodKeys(t *testing.T) {
	k := newPodKeys()
	set := func(key string, uid types.UID) []any { e, was := k.set(key, uid); return []any{e, was} }
	assert.Equal(t, []any{"add", types.UID("")}, set("ns/a", "u1"))
	assert.Equal(t, []any{"update", types.UID("u1")}, set("ns/a", "u1"))
	assert.Equal(t, []any{"update", types.UID("u1")}, set("ns/a", "u2"), "same name, new pod")
	assert.Equal(t, map[types.UID]struct{}{"u2": {}}, k.live())
	got, ok, err := k.GetByKey("ns/a")
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, &podRef{Namespace: "ns", Name: "a", UID: "u2"}, got)
	k.remove("ns/a")
	_, ok, _ = k.GetByKey("ns/a")
	assert.False(t, ok)
	assert.Zero(t, k.len())
}

// listedRecorder records whether each pod handed on came from a list.
type listedRecorder struct {
	recorder
	listed []bool
}

func (r *listedRecorder) Pod(p *lifecycle.Pod) { r.listed = append(r.listed, p.Listed) }

// A list's pods, which show only the current state, are marked Listed; a
// watch's, which show every change, are not (lifecycle's
// restarted_before_seen reads it). A later watch event of a listed pod
// is a watch's again.
func TestListedPods(t *testing.T) {
	rec := &listedRecorder{}
	w, err := New(kubetest.Wrap(fake.NewClientset()), rec, Options{})
	require.NoError(t, err)
	w.classes = *resolver(t)
	pw := newPodWatch("", nil)
	w.processPodDelta(pw, cache.Delta{Type: cache.Replaced, Object: podNamed("web", "w1")})
	w.processPodDelta(pw, cache.Delta{Type: cache.Updated, Object: podNamed("web", "w1")})
	w.processPodDelta(pw, cache.Delta{Type: cache.Added, Object: podNamed("db", "d1")})
	w.processPodDelta(pw, cache.Delta{Type: cache.Replaced, Object: podNamed("db", "d1")})
	assert.Equal(t, []bool{true, false, false, true}, rec.listed)
}
