package charts

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/podslo/podslo/internal/testenv"
)

// testHistogramLabelRBAC runs the exporter with node-label and owner-kind
// histogram labels as the account the chart renders for them, cluster-wide
// and with namespaced Roles: it becomes ready only once its Node,
// ReplicaSet and Job watches have listed, which the granted reads allow.
func testHistogramLabelRBAC(t *testing.T, env *testenv.Env, a *applier) {
	labels := []string{"--set-json", `exporter.histogramLabels=["zone=node-label:topology.kubernetes.io/zone","kind=owner-kind"]`}
	for name, r := range map[string]rendering{
		"cluster-wide": {release: "zoned", namespace: "zoned", args: labels},
		"namespaced": {release: "zonedtenant", namespace: "zoned-tenant", args: append([]string{
			"--set-json", `exporter.namespaces=["zone-a","zone-b"]`,
			"--set", "exporter.rbac.namespaced=true",
		}, labels...)},
	} {
		t.Run(name, func(t *testing.T) {
			objs := r.render(t)
			for _, ns := range []string{r.namespace, "zone-a", "zone-b"} {
				ensureNamespace(t, env.Client, ns, nil)
			}
			for _, o := range objs {
				switch o.GetKind() {
				case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
					require.NoError(t, a.apply(o, false))
				}
			}
			account := r.fullname() + "-exporter"
			sts := objs.get(t, "StatefulSet", account)
			cfg := env.ServiceAccountConfig(t, r.namespace, account, nil)
			runExporter(t, env, cfg, exporterContainer(t, podOf(t, sts, account+"-0", "").Spec).Args)
		})
	}
}
