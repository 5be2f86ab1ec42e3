package netpolicy

import (
	"cmp"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/labels"
)

// State holds the trimmed policies the watch delivered, and, when target
// pods are counted, the labels of every pod. It lives in memory only: a
// policy is a few hundred bytes and its checks are recomputed from the
// spec, which the watch lists again at every start, so there is nothing
// to remember across restarts that the badger store would keep better.
type State struct {
	mu       sync.RWMutex
	policies map[string]*Policy
	// pods is namespace -> pod name -> labels; nil unless counting.
	pods map[string]map[string]labels.Set
}

// NewState returns an empty State; countPods keeps pod labels for
// TargetPods.
func NewState(countPods bool) *State {
	s := &State{policies: map[string]*Policy{}}
	if countPods {
		s.pods = map[string]map[string]labels.Set{}
	}
	return s
}

// CountsPods reports whether the state keeps pod labels.
func (s *State) CountsPods() bool { return s.pods != nil }

// Policy records an added or updated policy.
func (s *State) Policy(p *Policy) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.policies[p.Key()] = p
}

// PolicyDeleted forgets a policy, and with it its series.
func (s *State) PolicyDeleted(namespace, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.policies, namespace+"/"+name)
}

// PodLabels records a pod's labels; the map is kept, not copied, and
// must not change afterwards. A no-op unless the state counts pods.
func (s *State) PodLabels(namespace, name string, l map[string]string) {
	if s.pods == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ns := s.pods[namespace]
	if ns == nil {
		ns = map[string]labels.Set{}
		s.pods[namespace] = ns
	}
	ns[name] = l
}

// PodDeleted forgets a pod's labels.
func (s *State) PodDeleted(namespace, name string) {
	if s.pods == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ns := s.pods[namespace]
	delete(ns, name)
	if len(ns) == 0 {
		delete(s.pods, namespace)
	}
}

// Get returns the policy of key namespace/name, or nil.
func (s *State) Get(key string) *Policy {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.policies[key]
}

// Len is the number of policies.
func (s *State) Len() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.policies)
}

// Each calls fn for every policy, sorted by namespace and name, with the
// number of pods its podSelector selects in its namespace (KEP-2136's
// unresolved "TargetMatch"), or -1 when the state does not count pods or
// the selector did not parse. fn runs outside the lock.
func (s *State) Each(fn func(p *Policy, targetPods int)) {
	type entry struct {
		p       *Policy
		targets int
	}
	s.mu.RLock()
	all := make([]entry, 0, len(s.policies))
	for _, p := range s.policies {
		all = append(all, entry{p, s.targetPodsLocked(p)})
	}
	s.mu.RUnlock()
	slices.SortFunc(all, func(a, b entry) int {
		return cmp.Or(cmp.Compare(a.p.Namespace, b.p.Namespace), cmp.Compare(a.p.Name, b.p.Name))
	})
	for _, e := range all {
		fn(e.p, e.targets)
	}
}

func (s *State) targetPodsLocked(p *Policy) int {
	if s.pods == nil || p.PodSelector == nil {
		return -1
	}
	n := 0
	for _, l := range s.pods[p.Namespace] {
		if p.PodSelector.Matches(l) {
			n++
		}
	}
	return n
}
