package informers

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/podslo/podslo/internal/kube/kubetest"
	"github.com/podslo/podslo/internal/testenv"
	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/scope"
)

// userErrors is a Handler that keeps the UserError calls, safe for the
// watch goroutines.
type userErrors struct {
	mu     sync.Mutex
	uids   []types.UID
	synced bool
}

func (u *userErrors) Pod(*lifecycle.Pod)                        {}
func (u *userErrors) Deleted(types.UID, string, *lifecycle.Pod) {}
func (u *userErrors) UserError(uid types.UID, _ string) {
	u.mu.Lock()
	u.uids = append(u.uids, uid)
	u.mu.Unlock()
}
func (u *userErrors) ImagePull(types.UID, string, lifecycle.PullEvent) {}
func (u *userErrors) Synced(func() map[types.UID]struct{}, func() bool) {
	u.mu.Lock()
	u.synced = true
	u.mu.Unlock()
}

func (u *userErrors) seen() ([]types.UID, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.uids), u.synced
}

// In per-node mode, a FailedMount event that another node's kubelet
// reported never reaches the handler, through the real watch and its trim:
// the pipeline would hold it in memory for a pod that never comes. The
// events of one namespace arrive in order, so once this node's event has
// arrived, the other node's, created before it, has been handled too.
func TestPerNodeWatchDropsOtherNodesEvents(t *testing.T) {
	env := testenv.Start(t)
	testenv.CreateNamespace(t, env.Client, "ns", nil)
	h := &userErrors{}
	w, err := New(kubetest.Wrap(env.Client), h, Options{
		Scope:      scope.Scope{Node: "node-a", TotalShards: 1},
		RESTConfig: env.Config,
		Logger:     testenv.Logger(t),
	})
	require.NoError(t, err)
	testenv.Run(t, "watcher", w.Start)
	require.Eventually(t, func() bool { _, synced := h.seen(); return synced }, time.Minute, 20*time.Millisecond, "the watcher never synced")

	failedMount := func(name string, uid types.UID, host string) {
		t.Helper()
		_, err := env.Client.CoreV1().Events("ns").Create(context.Background(), &corev1.Event{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
			Reason:     "FailedMount", Type: corev1.EventTypeWarning,
			Message:        `MountVolume.SetUp failed for volume "config" : configmap "app" not found`,
			InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "ns", Name: name, UID: uid},
			Source:         corev1.EventSource{Component: "kubelet", Host: host},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	failedMount("theirs", "uid-theirs", "node-b")
	failedMount("mine", "uid-mine", "node-a")
	require.Eventually(t, func() bool { uids, _ := h.seen(); return slices.Contains(uids, "uid-mine") }, 30*time.Second, 20*time.Millisecond, "this node's event never reached the handler")
	uids, _ := h.seen()
	assert.Equal(t, []types.UID{"uid-mine"}, uids, "only this node's event reaches the handler")
}
