package cmd

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The exporter's binary (the podslo_exporter tag, bin/podslo-exporter)
// links none of what only the agent and the demo run, nor client-go's
// clientset: an exporter's memory is mostly its binary's pages
// (docs/benchmarks.md, issue 38). The full binary has them, so that the
// list is known to name real packages.
func TestExporterBinaryLeavesOut(t *testing.T) {
	deps := func(tags string) map[string]bool {
		args := []string{"list", "-deps"}
		if tags != "" {
			args = append(args, "-tags", tags)
		}
		out, err := exec.Command("go", append(args, "github.com/podslo/podslo")...).CombinedOutput()
		require.NoError(t, err, "go list: %s", out)
		m := map[string]bool{}
		for _, p := range strings.Fields(string(out)) {
			m[p] = true
		}
		return m
	}
	full, exporter := deps(""), deps("podslo_exporter")
	for _, pkg := range []string{
		"github.com/podslo/podslo/agent",
		"github.com/podslo/podslo/demo",
		"google.golang.org/grpc",
		"k8s.io/client-go/kubernetes",
		"k8s.io/client-go/kubernetes/scheme",
		"k8s.io/client-go/discovery",
		"github.com/google/gnostic-models/openapiv2",
		"k8s.io/api/batch/v1",
		"k8s.io/api/resource/v1",
	} {
		assert.True(t, full[pkg], "the full binary links %s", pkg)
		assert.False(t, exporter[pkg], "the exporter's binary links %s", pkg)
	}
	for _, pkg := range []string{"github.com/podslo/podslo/exporter", "github.com/podslo/podslo/internal/kube", "k8s.io/api/core/v1"} {
		assert.True(t, exporter[pkg], "the exporter's binary links %s", pkg)
	}
}
