package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/podslo/podslo/internal/testenv"
)

// TestShippedDaemonSet keeps deploy/agent/agent.yaml in step with the code
// and with the other files of deploy/agent, which the security test loads.
func TestShippedDaemonSet(t *testing.T) {
	var ds *appsv1.DaemonSet
	for _, obj := range testenv.Manifests(t, filepath.Join("..", "deploy", "agent", "agent.yaml")) {
		switch o := obj.(type) {
		case *corev1.Namespace:
			assert.Equal(t, agentNamespace, o.Name)
		case *appsv1.DaemonSet:
			ds = o
		default:
			t.Fatalf("unexpected %T in agent.yaml", obj)
		}
	}
	require.NotNil(t, ds)
	spec := ds.Spec.Template.Spec
	assert.Equal(t, agentNamespace, ds.Namespace)
	assert.Equal(t, agentAccount, spec.ServiceAccountName, "the account rbac.yaml binds and admission.yaml restricts")
	require.Len(t, spec.Containers, 1)
	c := spec.Containers[0]
	assert.Equal(t, "agent", c.Args[0])
	var nodeName *corev1.EnvVar
	for i := range c.Env {
		if c.Env[i].Name == "NODE_NAME" {
			nodeName = &c.Env[i]
		}
	}
	require.NotNil(t, nodeName, "NODE_NAME is how the agent learns its node")
	assert.Equal(t, "spec.nodeName", nodeName.ValueFrom.FieldRef.FieldPath)
	assert.Equal(t, []corev1.ContainerPort{{Name: "metrics", ContainerPort: 8081}}, c.Ports)
	assert.True(t, strings.HasSuffix(DefaultListenAddress, ":8081"))
	assert.Equal(t, "/readyz", c.ReadinessProbe.HTTPGet.Path)
	assert.Equal(t, "/healthz", c.LivenessProbe.HTTPGet.Path)
	assert.Equal(t, []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, spec.Tolerations, "every node's pods need the condition")

	raw, err := os.ReadFile(filepath.Join("..", "deploy", "agent", "kustomization.yaml"))
	require.NoError(t, err)
	var k struct{ Resources []string }
	require.NoError(t, utilyaml.Unmarshal(raw, &k))
	files, err := filepath.Glob(filepath.Join("..", "deploy", "agent", "*.yaml"))
	require.NoError(t, err)
	var want []string
	for _, f := range files {
		if filepath.Base(f) != "kustomization.yaml" {
			want = append(want, filepath.Base(f))
		}
	}
	assert.ElementsMatch(t, want, k.Resources, "kustomization.yaml must list every manifest")
}
