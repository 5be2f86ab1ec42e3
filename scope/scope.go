package scope

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Scope is which pods an exporter instance owns. The zero value, like
// Unscoped, owns every pod of the cluster.
type Scope struct {
	// Namespaces is the allowlist (--namespaces): each gets its own
	// namespaced watch. Empty: every namespace.
	Namespaces []string `json:"namespaces,omitempty"`
	// NamespacesDenylist (--namespaces-denylist) is left out by a field
	// selector, metadata.namespace!=a,metadata.namespace!=b, on every
	// watch. With Namespaces set too, as in kube-state-metrics, it removes
	// namespaces from the allowlist.
	NamespacesDenylist []string `json:"namespacesDenylist,omitempty"`
	// Node (--node-name) keeps the pods bound to this node, by the field
	// selector spec.nodeName=<node>. Empty: every node.
	Node string `json:"node,omitempty"`
	// Shard and TotalShards (--shard, --total-shards) keep the pods whose
	// UID hashes to Shard out of TotalShards (ShardOf). Default 0 of 1.
	Shard       int `json:"shard"`
	TotalShards int `json:"totalShards"`
}

// Unscoped is the scope of a single cluster-wide exporter, and of a state
// written before scopes were persisted.
var Unscoped = Scope{TotalShards: 1}

// Validate reports every invalid field at once.
func (s *Scope) Validate() error {
	var errs []error
	check := func(flag string, namespaces []string) {
		seen := map[string]bool{}
		for _, ns := range namespaces {
			switch {
			case ns == "":
				errs = append(errs, fmt.Errorf("--%s must not contain an empty namespace", flag))
			case len(validation.IsDNS1123Label(ns)) > 0:
				errs = append(errs, fmt.Errorf("--%s: %q is not a valid namespace name: %s", flag, ns, strings.Join(validation.IsDNS1123Label(ns), "; ")))
			case seen[ns]:
				errs = append(errs, fmt.Errorf("--%s lists %q twice", flag, ns))
			}
			seen[ns] = true
		}
	}
	check("namespaces", s.Namespaces)
	check("namespaces-denylist", s.NamespacesDenylist)
	if len(s.Namespaces) > 0 && len(s.WatchedNamespaces()) == 0 {
		errs = append(errs, fmt.Errorf("--namespaces-denylist %s removes every namespace of --namespaces %s: nothing would be watched",
			strings.Join(s.NamespacesDenylist, ","), strings.Join(s.Namespaces, ",")))
	}
	if s.Node != "" && len(validation.IsDNS1123Subdomain(s.Node)) > 0 {
		errs = append(errs, fmt.Errorf("--node-name %q is not a valid node name: %s", s.Node, strings.Join(validation.IsDNS1123Subdomain(s.Node), "; ")))
	}
	switch {
	case s.TotalShards < 1:
		errs = append(errs, fmt.Errorf("--total-shards must be at least 1, got %d", s.TotalShards))
	case s.Shard < 0 || s.Shard >= s.TotalShards:
		errs = append(errs, fmt.Errorf("--shard must be in [0, --total-shards) = [0, %d), got %d", s.TotalShards, s.Shard))
	}
	return errors.Join(errs...)
}

// WatchedNamespaces is the namespaces each watch is opened in: the
// allowlist less the denylist, or one entry, metav1.NamespaceAll, for a
// cluster-wide watch.
func (s *Scope) WatchedNamespaces() []string {
	if len(s.Namespaces) == 0 {
		return []string{metav1.NamespaceAll}
	}
	out := make([]string, 0, len(s.Namespaces))
	for _, ns := range s.Namespaces {
		if !slices.Contains(s.NamespacesDenylist, ns) {
			out = append(out, ns)
		}
	}
	slices.Sort(out)
	return out
}

// NamespaceSelector is the field selector every namespaced watch carries:
// metadata.namespace!=a,... for the denylist, or "" for none. It is sent
// with the allowlist's watches too, as kube-state-metrics does, although
// WatchedNamespaces has already removed the denied ones.
func (s *Scope) NamespaceSelector() string {
	return and(s.namespaceTerms())
}

func (s *Scope) namespaceTerms() []fields.Selector {
	sel := make([]fields.Selector, 0, len(s.NamespacesDenylist)+1)
	for _, ns := range s.NamespacesDenylist {
		sel = append(sel, fields.OneTermNotEqualSelector("metadata.namespace", ns))
	}
	return sel
}

// PodSelector is the field selector of the pod watch: NamespaceSelector and
// spec.nodeName=<node>, both indexed by the API server's watch cache.
func (s *Scope) PodSelector() string {
	sel := s.namespaceTerms()
	if s.Node != "" {
		sel = append(sel, fields.OneTermEqualSelector("spec.nodeName", s.Node))
	}
	return and(sel)
}

func and(sel []fields.Selector) string {
	if len(sel) == 0 {
		return ""
	}
	return fields.AndSelectors(sel...).String()
}

// Sharded reports whether the pods are split by UID.
func (s *Scope) Sharded() bool { return s.TotalShards > 1 }

// OwnsUID reports whether a pod with this UID falls into this shard.
func (s *Scope) OwnsUID(uid types.UID) bool {
	return !s.Sharded() || ShardOf(uid, s.TotalShards) == s.Shard
}

// Owns reports whether this scope owns a pod with this namespace, node and
// UID. A pod not bound yet (node "") belongs to no per-node scope.
func (s *Scope) Owns(namespace, node string, uid types.UID) bool {
	if len(s.Namespaces) > 0 && !slices.Contains(s.Namespaces, namespace) || slices.Contains(s.NamespacesDenylist, namespace) {
		return false
	}
	if s.Node != "" && node != s.Node {
		return false
	}
	return s.OwnsUID(uid)
}

// SameFilters reports whether s and o select the same namespaces and node,
// whatever their shards: then a pod's ownership depends on its UID only.
func (s *Scope) SameFilters(o *Scope) bool {
	return slices.Equal(s.WatchedNamespaces(), o.WatchedNamespaces()) &&
		sortedEqual(s.NamespacesDenylist, o.NamespacesDenylist) && s.Node == o.Node
}

// Equal reports whether s and o own the same pods.
func (s *Scope) Equal(o *Scope) bool {
	return s.SameFilters(o) && s.Shard == o.Shard && s.TotalShards == o.TotalShards
}

func sortedEqual(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// String is the scope for logs.
func (s Scope) String() string {
	var parts []string
	if len(s.Namespaces) > 0 {
		parts = append(parts, "namespaces="+strings.Join(s.Namespaces, ","))
	}
	if len(s.NamespacesDenylist) > 0 {
		parts = append(parts, "namespaces-denylist="+strings.Join(s.NamespacesDenylist, ","))
	}
	if s.Node != "" {
		parts = append(parts, "node="+s.Node)
	}
	parts = append(parts, fmt.Sprintf("shard=%d/%d", s.Shard, s.TotalShards))
	return strings.Join(parts, " ")
}

// Marshal encodes the scope for the store.
func (s *Scope) Marshal() []byte {
	b, _ := json.Marshal(s) // a struct of strings and ints always encodes
	return b
}

// Unmarshal decodes what Marshal wrote.
func Unmarshal(b []byte) (Scope, error) {
	var s Scope
	if err := json.Unmarshal(b, &s); err != nil {
		return Scope{}, fmt.Errorf("decode persisted scope: %w", err)
	}
	if err := s.Validate(); err != nil {
		return Scope{}, fmt.Errorf("persisted scope: %w", err)
	}
	return s, nil
}

// ShardOf is the shard, in [0, total), of a pod UID: Lamping and Veach's
// jump consistent hash of the 64-bit FNV-1a hash of the UID string. It is
// kube-state-metrics' function (pkg/sharding), so a podslo shard and a
// kube-state-metrics shard with the same index and total own the same pods.
// Jump hashing moves the fewest pods when the total changes: from M to M+1
// shards, about 1/(M+1) of the pods move, all to the new shard.
func ShardOf(uid types.UID, total int) int {
	h := fnv.New64a()
	_, _ = h.Write([]byte(uid))
	return int(jump(h.Sum64(), total))
}

// jump is the jump consistent hash ("A Fast, Minimal Memory, Consistent
// Hash Algorithm", Lamping and Veach, 2014): it follows the key's
// pseudo-random sequence of bucket jumps until one lands past the end.
func jump(key uint64, buckets int) int32 {
	var b, j int64 = -1, 0
	for j < int64(buckets) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return int32(b)
}
