package agent

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/podslo/podslo/internal/testenv"
)

const (
	agentNamespace = "podslo"
	agentAccount   = "podslo-agent"
	policyName     = "podslo-agent-node-restriction"
)

// applyShipped creates every object of deploy/agent/rbac.yaml and
// admission.yaml, as they are shipped.
func applyShipped(t *testing.T, c kubernetes.Interface) {
	t.Helper()
	ctx := context.Background()
	var err error
	for _, file := range []string{"rbac.yaml", "admission.yaml"} {
		for _, obj := range testenv.Manifests(t, filepath.Join("..", "deploy", "agent", file)) {
			switch o := obj.(type) {
			case *corev1.ServiceAccount:
				_, err = c.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
			case *rbacv1.ClusterRole:
				_, err = c.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
			case *rbacv1.ClusterRoleBinding:
				_, err = c.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
			case *admissionregistrationv1.ValidatingAdmissionPolicy:
				_, err = c.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, o, metav1.CreateOptions{})
			case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
				_, err = c.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, o, metav1.CreateOptions{})
			default:
				t.Fatalf("unexpected %T in %s", obj, file)
			}
			require.NoError(t, err)
		}
	}
}

// agentToken returns a token of the agent's service account bound to pod,
// as the kubelet projects it into the agent's container; nil pod gives a
// token bound to nothing, which carries no node.
func agentToken(t *testing.T, env *testenv.Env, pod *corev1.Pod) *rest.Config {
	t.Helper()
	return env.ServiceAccountConfig(t, agentNamespace, agentAccount, pod)
}

func TestSecurityBoundary(t *testing.T) {
	env := testenv.Start(t)
	admin := env.Client
	ctx := context.Background()
	createNode(t, admin, "node-a")
	createNode(t, admin, "node-b")
	testenv.CreateNamespace(t, admin, agentNamespace, nil)
	testenv.CreateNamespace(t, admin, "apps", nil)
	applyShipped(t, admin)

	agentA := testenv.CreatePod(t, admin, agentNamespace, testenv.PodSpec{Name: "podslo-agent-a", Node: "node-a", ServiceAccount: agentAccount})
	webA := testenv.CreatePod(t, admin, "apps", testenv.PodSpec{Name: "web-a", Node: "node-a"})
	testenv.CreatePod(t, admin, "apps", testenv.PodSpec{Name: "web-b", Node: "node-b"})
	testenv.CreatePod(t, admin, "apps", testenv.PodSpec{Name: "probe-b", Node: "node-b"})
	tokenA := agentToken(t, env, agentA)
	asAgentA := testenv.ClientFor(t, tokenA)

	t.Run("the pod-bound token names the node", func(t *testing.T) {
		r, err := asAgentA.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		require.NoError(t, err)
		assert.Equal(t, "system:serviceaccount:podslo:podslo-agent", r.Status.UserInfo.Username)
		assert.Equal(t, authenticationv1.ExtraValue{"node-a"}, r.Status.UserInfo.Extra["authentication.kubernetes.io/node-name"])
	})

	// Policies take effect when the API server's policy informer has them:
	// wait until a known-bad write is refused, on a pod kept for this.
	require.Eventually(t, func() bool {
		return apierrors.IsForbidden(testenv.PatchStableCondition(asAgentA, "apps", "probe-b"))
	}, 30*time.Second, 50*time.Millisecond, "the admission policy never took effect")

	t.Run("policy", func(t *testing.T) {
		err := testenv.PatchStableCondition(asAgentA, "apps", "web-b")
		require.Error(t, err)
		assert.True(t, apierrors.IsForbidden(err), "%v", err)
		assert.EqualError(t, err, `pods "web-b" is forbidden: ValidatingAdmissionPolicy '`+policyName+`' with binding '`+policyName+`' denied request: `+
			`the podslo agent of node "node-a" may not write the status of pod apps/web-b on node "node-b": an agent writes to pods on its own node only, and its token must be bound to its own pod`)

		require.NoError(t, testenv.PatchStableCondition(asAgentA, "apps", "web-a"), "its own node's pod")
		p, err := admin.CoreV1().Pods("apps").Get(ctx, "web-a", metav1.GetOptions{})
		require.NoError(t, err)
		cond, ok := stableOf(p)
		require.True(t, ok)
		assert.Equal(t, ReasonNotReady, cond.Reason)

		err = testenv.PatchStableCondition(testenv.ClientFor(t, agentToken(t, env, nil)), "apps", "web-a")
		assert.True(t, apierrors.IsForbidden(err), "a token without a node: %v", err)
		assert.ErrorContains(t, err, `the podslo agent of node "" may not write the status of pod apps/web-a on node "node-a"`)

		assert.NoError(t, testenv.PatchStableCondition(admin, "apps", "web-b"), "the policy binds the agent only")
	})

	t.Run("rbac", func(t *testing.T) {
		type access struct{ group, resource, subresource, verb string }
		allowed := func(a access) bool {
			r, err := asAgentA.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
				ResourceAttributes: &authorizationv1.ResourceAttributes{Group: a.group, Resource: a.resource, Subresource: a.subresource, Verb: a.verb, Namespace: "apps"},
			}}, metav1.CreateOptions{})
			require.NoError(t, err)
			return r.Status.Allowed
		}
		want := map[access]bool{}
		for _, verb := range []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"} {
			read := verb == "get" || verb == "list" || verb == "watch"
			want[access{"", "pods", "", verb}] = read
			want[access{"", "pods", "status", verb}] = verb == "patch"
			want[access{"", "events", "", verb}] = verb == "create" || verb == "patch"
			for _, res := range []string{"replicasets", "statefulsets", "daemonsets"} {
				want[access{"apps", res, "", verb}] = read
			}
			for _, res := range []access{{"", "pods", "ephemeralcontainers", ""}, {"", "pods", "resize", ""}, {"", "pods", "eviction", ""}, {"", "pods", "exec", ""}, {"", "pods", "binding", ""},
				{"", "nodes", "", ""}, {"", "nodes", "status", ""}, {"events.k8s.io", "events", "", ""}, {"", "secrets", "", ""}, {"", "configmaps", "", ""},
				{"", "serviceaccounts", "token", ""}, {"apps", "deployments", "", ""}, {"apps", "replicasets", "status", ""}, {"apps", "replicasets", "scale", ""}} {
				res.verb = verb
				want[res] = false
			}
		}
		got := map[access]bool{}
		for a := range want {
			got[a] = allowed(a)
		}
		assert.Equal(t, want, got)
	})

	t.Run("the agent runs on its shipped permissions", func(t *testing.T) {
		rec := record(t, admin, "apps")
		url := startAgent(t, Options{NodeName: "node-a"}, WithRestConfig(tokenA))
		ready := now()
		kubelet(t, admin, webA, kubeletStatus{ready: true, readySince: ready})
		// First the condition the policy test wrote, then the agent's.
		got := rec.waitStable(t, "web-a", 2)
		assert.Equal(t, []transition{
			{"False", ReasonNotReady, time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
			{"True", ReasonMinReadySecondsElapsed, ready},
		}, transitions(got))
		assert.Equal(t, float64(0), scrape(t, url).writes[resultForbidden])
	})

	t.Run("an agent told the wrong node is refused by the API server", func(t *testing.T) {
		// The token says node-a; the flag says node-b. The field selector
		// hands the agent node-b's pods, the local check passes, and the
		// policy is what stops the write.
		url := startAgent(t, Options{NodeName: "node-b"}, WithRestConfig(tokenA))
		fresh := testenv.CreatePod(t, admin, "apps", testenv.PodSpec{Name: "fresh-b", Node: "node-b"})
		kubelet(t, admin, fresh, kubeletStatus{ready: true, readySince: now()})
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.GreaterOrEqual(c, scrape(c, url).writes[resultForbidden], float64(1))
		}, 30*time.Second, 20*time.Millisecond)
		assert.Zero(t, scrape(t, url).writes[resultSuccess])
		p, err := admin.CoreV1().Pods("apps").Get(ctx, "fresh-b", metav1.GetOptions{})
		require.NoError(t, err)
		_, ok := stableOf(p)
		assert.False(t, ok, "fresh-b was only ever written by refused requests")
	})
}
