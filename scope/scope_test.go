package scope

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
)

// TestShardOfMatchesKubeStateMetrics pins ShardOf to kube-state-metrics'
// own function: the expected shards were computed with its code
// (hash/fnv New64a over the UID, then github.com/dgryski/go-jump Hash), so a
// change of the hash fails here rather than moving every pod.
func TestShardOfMatchesKubeStateMetrics(t *testing.T) {
	for _, tc := range []struct {
		uid   string
		total int
		want  int
	}{
		{"8d3f4a52-2b1e-4c7a-9f0e-1a2b3c4d5e6f", 1, 0},
		{"8d3f4a52-2b1e-4c7a-9f0e-1a2b3c4d5e6f", 2, 0},
		{"8d3f4a52-2b1e-4c7a-9f0e-1a2b3c4d5e6f", 3, 2},
		{"8d3f4a52-2b1e-4c7a-9f0e-1a2b3c4d5e6f", 4, 2},
		{"8d3f4a52-2b1e-4c7a-9f0e-1a2b3c4d5e6f", 7, 5},
		{"8d3f4a52-2b1e-4c7a-9f0e-1a2b3c4d5e6f", 100, 27},
		{"00000000-0000-0000-0000-000000000000", 1, 0},
		{"00000000-0000-0000-0000-000000000000", 2, 1},
		{"00000000-0000-0000-0000-000000000000", 3, 1},
		{"00000000-0000-0000-0000-000000000000", 4, 1},
		{"00000000-0000-0000-0000-000000000000", 7, 1},
		{"00000000-0000-0000-0000-000000000000", 100, 20},
		{"a", 1, 0},
		{"a", 2, 1},
		{"a", 3, 2},
		{"a", 4, 2},
		{"a", 7, 2},
		{"a", 100, 31},
		{"", 1, 0},
		{"", 2, 1},
		{"", 3, 1},
		{"", 4, 1},
		{"", 7, 1},
		{"", 100, 90},
		{"f47ac10b-58cc-4372-a567-0e02b2c3d479", 1, 0},
		{"f47ac10b-58cc-4372-a567-0e02b2c3d479", 2, 0},
		{"f47ac10b-58cc-4372-a567-0e02b2c3d479", 3, 2},
		{"f47ac10b-58cc-4372-a567-0e02b2c3d479", 4, 2},
		{"f47ac10b-58cc-4372-a567-0e02b2c3d479", 7, 2},
		{"f47ac10b-58cc-4372-a567-0e02b2c3d479", 100, 13},
		{"123e4567-e89b-12d3-a456-426614174000", 1, 0},
		{"123e4567-e89b-12d3-a456-426614174000", 2, 0},
		{"123e4567-e89b-12d3-a456-426614174000", 3, 0},
		{"123e4567-e89b-12d3-a456-426614174000", 4, 3},
		{"123e4567-e89b-12d3-a456-426614174000", 7, 4},
		{"123e4567-e89b-12d3-a456-426614174000", 100, 16},
	} {
		assert.Equal(t, tc.want, ShardOf(types.UID(tc.uid), tc.total), "ShardOf(%q, %d)", tc.uid, tc.total)
	}
}

// TestShardOfSpreadsAndMovesLittle: every UID lands in exactly one shard,
// the shards are balanced, and going from M to M+1 shards moves pods only to
// the new shard, about 1/(M+1) of them.
func TestShardOfSpreadsAndMovesLittle(t *testing.T) {
	const n = 20000
	for _, total := range []int{2, 3, 4} {
		counts := make([]int, total)
		moved := 0
		for i := range n {
			uid := types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i))
			owners := 0
			for s := range total {
				sc := Scope{Shard: s, TotalShards: total}
				if sc.OwnsUID(uid) {
					owners++
					counts[s]++
				}
			}
			require.Equal(t, 1, owners, "uid %s in %d shards of %d", uid, owners, total)
			before, after := ShardOf(uid, total-1), ShardOf(uid, total)
			if before != after {
				moved++
				assert.Equal(t, total-1, after, "a pod moved between old shards going from %d to %d", total-1, total)
			}
		}
		for s, c := range counts {
			assert.InDelta(t, n/total, c, 0.05*n/float64(total), "shard %d of %d holds %d of %d pods", s, total, c, n)
		}
		assert.InDelta(t, n/total, moved, 0.05*n/float64(total), "pods moved going from %d to %d shards", total-1, total)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		scope Scope
		err   string
	}{
		{"unscoped", Unscoped, ""},
		{"allow and deny, as in kube-state-metrics", Scope{Namespaces: []string{"a", "b"}, NamespacesDenylist: []string{"b"}, TotalShards: 1}, ""},
		{"deny removes every allowed namespace", Scope{Namespaces: []string{"a"}, NamespacesDenylist: []string{"a"}, TotalShards: 1}, "--namespaces-denylist a removes every namespace of --namespaces a: nothing would be watched"},
		{"empty namespace", Scope{Namespaces: []string{""}, TotalShards: 1}, "--namespaces must not contain an empty namespace"},
		{"invalid namespace", Scope{NamespacesDenylist: []string{"Kube_System"}, TotalShards: 1}, `--namespaces-denylist: "Kube_System" is not a valid namespace name`},
		{"duplicate namespace", Scope{Namespaces: []string{"a", "a"}, TotalShards: 1}, `--namespaces lists "a" twice`},
		{"invalid node", Scope{Node: "node a", TotalShards: 1}, `--node-name "node a" is not a valid node name`},
		{"no shards", Scope{}, "--total-shards must be at least 1, got 0"},
		{"shard past total", Scope{Shard: 2, TotalShards: 2}, "--shard must be in [0, --total-shards) = [0, 2), got 2"},
		{"negative shard", Scope{Shard: -1, TotalShards: 2}, "--shard must be in [0, --total-shards) = [0, 2), got -1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.scope.Validate()
			if tc.err == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.err)
		})
	}
}

func TestSelectorsAndOwnership(t *testing.T) {
	s := Scope{NamespacesDenylist: []string{"kube-system", "kube-public"}, Node: "node-1", TotalShards: 1}
	assert.Equal(t, []string{""}, s.WatchedNamespaces(), "a denylist alone watches cluster-wide")
	assert.Equal(t, "metadata.namespace!=kube-system,metadata.namespace!=kube-public", s.NamespaceSelector())
	assert.Equal(t, "metadata.namespace!=kube-system,metadata.namespace!=kube-public,spec.nodeName=node-1", s.PodSelector())
	assert.True(t, s.Owns("default", "node-1", "u"))
	assert.False(t, s.Owns("kube-system", "node-1", "u"), "denied namespace")
	assert.False(t, s.Owns("default", "node-2", "u"), "other node")
	assert.False(t, s.Owns("default", "", "u"), "not bound yet")

	a := Scope{Namespaces: []string{"b", "a", "c"}, NamespacesDenylist: []string{"c"}, TotalShards: 1}
	assert.Equal(t, []string{"a", "b"}, a.WatchedNamespaces())
	assert.Equal(t, "", Unscoped.PodSelector())
	assert.False(t, a.Owns("c", "", "u"))
	assert.True(t, a.Owns("a", "", "u"))
}

func TestEqualAndRoundTrip(t *testing.T) {
	a := Scope{Namespaces: []string{"a", "b"}, Node: "n", Shard: 1, TotalShards: 3}
	b := Scope{Namespaces: []string{"b", "a"}, Node: "n", Shard: 1, TotalShards: 3}
	assert.True(t, a.Equal(&b), "order of namespaces does not matter")
	c := b
	c.TotalShards = 4
	assert.True(t, a.SameFilters(&c))
	assert.False(t, a.Equal(&c))
	d := b
	d.Node = "m"
	assert.False(t, a.SameFilters(&d))

	got, err := Unmarshal(a.Marshal())
	require.NoError(t, err)
	assert.Equal(t, a, got)
	_, err = Unmarshal([]byte(`{"totalShards":0}`))
	assert.ErrorContains(t, err, "persisted scope: --total-shards must be at least 1")
	_, err = Unmarshal([]byte(`{`))
	assert.ErrorContains(t, err, "decode persisted scope")
}
