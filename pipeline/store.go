package pipeline

import (
	"k8s.io/apimachinery/pkg/types"

	"github.com/podslo/podslo/lifecycle"
	"github.com/podslo/podslo/store"
)

// Store is what the pipeline reads and writes of the state: *store.Store
// implements it. A test passes one whose Apply fails, as a full disk does.
type Store interface {
	// Get is the remembered state of a pod, and whether there is one.
	Get(uid types.UID) (lifecycle.State, bool)
	// Meta is a live pod's name, classes and labels; nil when the pod was
	// not seen live since the store opened.
	Meta(uid types.UID) *store.PodMeta
	// Apply writes one pod's change in one transaction; when it fails,
	// nothing changed.
	Apply(c store.Change) error
	// UIDs and Pods visit every remembered pod.
	UIDs(fn func(uid types.UID))
	Pods(fn func(uid types.UID, state *lifecycle.State, meta *store.PodMeta))
	// Len is the number of remembered pods.
	Len() int
	// Setting and SetSetting read and write a named setting (the scope).
	Setting(name string) ([]byte, bool)
	SetSetting(name string, value []byte) error
}

var _ Store = (*store.Store)(nil)
