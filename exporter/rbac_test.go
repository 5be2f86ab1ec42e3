package exporter

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/podslo/podslo/internal/testenv"
)

// TestShippedRBACIsReadOnlyAndSufficient runs the exporter as the service
// account of deploy/exporter/rbac.yaml on a real API server: it must sync
// and observe, and the API server must refuse it every write.
// tokenKubeconfig writes a kubeconfig for cfg's server and bearer token (a
// ServiceAccount's), for an exporter to run as that identity.
func tokenKubeconfig(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	c := clientcmdapi.NewConfig()
	c.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	c.AuthInfos["sa"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	c.Contexts["sa"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "sa"}
	c.CurrentContext = "sa"
	path := filepath.Join(t.TempDir(), "sa-kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*c, path))
	return path
}

func TestShippedRBACIsReadOnlyAndSufficient(t *testing.T) {
	env := testenv.Start(t)
	ctx := context.Background()
	admin := env.Client
	testenv.CreateNamespace(t, admin, "podslo", nil)

	var err error
	for _, obj := range testenv.Manifests(t, filepath.Join("..", "deploy", "exporter", "rbac.yaml")) {
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			_, err = admin.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			for _, rule := range o.Rules {
				assert.Subset(t, []string{"get", "list", "watch"}, rule.Verbs, "the exporter's role only reads")
			}
			_, err = admin.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = admin.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		default:
			t.Fatalf("unexpected %T in rbac.yaml", obj)
		}
		require.NoError(t, err)
	}

	tok, err := admin.CoreV1().ServiceAccounts("podslo").CreateToken(ctx, "podslo-exporter", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	require.NoError(t, err)
	saConfig := &rest.Config{Host: env.Config.Host, BearerToken: tok.Status.Token, TLSClientConfig: rest.TLSClientConfig{CAData: env.Config.CAData}}
	kubeconfig := tokenKubeconfig(t, saConfig)

	url := startExporter(t, Options{Kubeconfig: kubeconfig, StateDir: t.TempDir()})
	testenv.CreateNamespace(t, admin, "apps", nil)
	p := testenv.CreatePod(t, admin, "apps", podSpec{name: "web", team: "a"}.pod())
	base := time.Now().Add(-time.Minute).Truncate(time.Second)
	kubelet(t, admin, p, condAt(corev1.PodScheduled, corev1.ConditionTrue, base), condAt(corev1.PodReadyToStartContainers, corev1.ConditionTrue, base.Add(2*time.Second)))
	eventuallyValue(t, url, "podslo_pod_sandbox_creation_seconds", map[string]string{"pod": "web"}, 2)

	sa, err := kubernetes.NewForConfig(saConfig)
	require.NoError(t, err)
	type access struct{ group, resource, subresource, verb string }
	allowed := func(a access) bool {
		r, err := sa.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Group: a.group, Resource: a.resource, Subresource: a.subresource, Verb: a.verb},
		}}, metav1.CreateOptions{})
		require.NoError(t, err)
		return r.Status.Allowed
	}
	for _, res := range []access{{"", "pods", "", ""}, {"", "persistentvolumeclaims", "", ""}, {"", "events", "", ""}, {"storage.k8s.io", "storageclasses", "", ""}, {"networking.k8s.io", "networkpolicies", "", ""}} {
		for _, verb := range []string{"get", "list", "watch"} {
			res.verb = verb
			assert.True(t, allowed(res), "%+v", res)
		}
	}
	for _, res := range []access{{"", "pods", "", ""}, {"", "pods", "status", ""}, {"", "persistentvolumeclaims", "", ""}, {"storage.k8s.io", "storageclasses", "", ""}, {"", "events", "", ""}, {"", "secrets", "", ""}, {"", "configmaps", "", ""}, {"networking.k8s.io", "networkpolicies", "", ""}} {
		for _, verb := range []string{"create", "update", "patch", "delete", "deletecollection"} {
			res.verb = verb
			assert.False(t, allowed(res), "%+v must be refused", res)
		}
	}
	// And a real write is refused by the API server itself.
	_, err = sa.CoreV1().Pods("apps").Patch(ctx, "web", "application/merge-patch+json", []byte(`{"metadata":{"labels":{"x":"y"}}}`), metav1.PatchOptions{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "forbidden")
}
