package lifecycle

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestDeepCopyNodeLabels: a copy's node labels are its own, so that a
// copy can be changed without changing the Node watch's map the original
// shares.
func TestDeepCopyNodeLabels(t *testing.T) {
	p := &Pod{NodeName: "a", NodeLabels: map[string]string{"zone": "z1"}, OwnerKind: "Deployment"}
	c := p.DeepCopyObject().(*Pod)
	assert.Equal(t, p, c)
	c.NodeLabels["zone"] = "z2"
	assert.Equal(t, "z1", p.NodeLabels["zone"])
}
