package charts

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/podslo/podslo/netpolicy"
)

const profileMount = "/etc/podslo/network-plugin-profile"

// exporterOf returns the exporter's pod spec and container.
func exporterOf(t *testing.T, objs objects) (*appsv1.StatefulSet, corev1.Container) {
	t.Helper()
	sts := into[appsv1.StatefulSet](t, objs.get(t, "StatefulSet", "podslo-exporter"))
	require.Len(t, sts.Spec.Template.Spec.Containers, 1)
	return sts, sts.Spec.Template.Spec.Containers[0]
}

// grants reports whether the role has a rule on resource in group.
func grants(role *rbacv1.ClusterRole, group, resource string) []string {
	for _, r := range role.Rules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) {
			return r.Verbs
		}
	}
	return nil
}

func hasObject(objs objects, kind, name string) bool {
	return slices.Contains(objs.names(), kind+"/"+name)
}

// TestNetworkPolicyValues: exporter.networkPolicies becomes the exporter's
// NetworkPolicy flags, its ClusterRole's networkpolicies rule and the
// profile's ConfigMap.
func TestNetworkPolicyValues(t *testing.T) {
	const profileConfigMap = "podslo-exporter-network-plugin-profile"

	t.Run("defaults: watched, no profile", func(t *testing.T) {
		objs := defaults.render(t)
		role := into[rbacv1.ClusterRole](t, objs.get(t, "ClusterRole", "podslo-exporter"))
		assert.Equal(t, []string{"get", "list", "watch"}, grants(role, "networking.k8s.io", "networkpolicies"))
		assert.False(t, hasObject(objs, "ConfigMap", profileConfigMap))
		sts, c := exporterOf(t, objs)
		for _, a := range c.Args {
			assert.NotContains(t, a, "network", "the exporter's defaults need no flag")
		}
		assert.NotContains(t, sts.Spec.Template.Annotations, "checksum/network-plugin-profile")
	})

	t.Run("off: no watch, no permission", func(t *testing.T) {
		objs := defaults.render(t, "--set", "exporter.networkPolicies.enabled=false")
		role := into[rbacv1.ClusterRole](t, objs.get(t, "ClusterRole", "podslo-exporter"))
		assert.Nil(t, grants(role, "networking.k8s.io", "networkpolicies"))
		assert.Len(t, role.Rules, 2, "pods, claims and events; storage classes")
		_, c := exporterOf(t, objs)
		assert.Contains(t, c.Args, "--networkpolicies=false")
	})

	t.Run("a profile in values", func(t *testing.T) {
		objs := defaults.render(t, "--set-json", `exporter.networkPolicies.profile={"name":"example-cni","maxVersion":"1.12","unimplemented":["egress","sctp"],"enforcing":"False"}`)
		cm := into[corev1.ConfigMap](t, objs.get(t, "ConfigMap", profileConfigMap))
		assert.Equal(t, "monitoring", cm.Namespace)
		require.Contains(t, cm.Data, "profile.yaml")
		// What the exporter will read: the quoted version survives.
		p, err := netpolicy.ParseProfile([]byte(cm.Data["profile.yaml"]))
		require.NoError(t, err, cm.Data["profile.yaml"])
		assert.Equal(t, "example-cni", p.Name)
		assert.Equal(t, "1.12", p.MaxVersion.String())
		assert.Equal(t, "egress,sctp", p.Unimplemented.String())
		assert.Equal(t, netpolicy.StatusFalse, p.Enforcing)

		sts, c := exporterOf(t, objs)
		assert.Contains(t, c.Args, "--network-plugin-profile="+profileMount+"/profile.yaml")
		assert.Contains(t, c.VolumeMounts, corev1.VolumeMount{Name: "network-plugin-profile", MountPath: profileMount, ReadOnly: true})
		assert.Contains(t, sts.Spec.Template.Spec.Volumes, corev1.Volume{Name: "network-plugin-profile", VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: profileConfigMap}},
		}})
		// The exporter reads the profile once: a new one must roll the pod.
		sum := sha256.Sum256([]byte(strings.TrimSpace(cm.Data["profile.yaml"])))
		assert.Equal(t, hex.EncodeToString(sum[:]), sts.Spec.Template.Annotations["checksum/network-plugin-profile"])
		other, _ := exporterOf(t, defaults.render(t, "--set-json", `exporter.networkPolicies.profile={"name":"example-cni","maxVersion":"1.11"}`))
		assert.NotEqual(t, sts.Spec.Template.Annotations["checksum/network-plugin-profile"], other.Spec.Template.Annotations["checksum/network-plugin-profile"])
	})

	t.Run("a profile file, as it is", func(t *testing.T) {
		file := filepath.Join(Root(), "netpolicy", "testdata", "example-cni.yaml")
		want, err := os.ReadFile(file)
		require.NoError(t, err)
		objs := defaults.render(t, "--set-file", "exporter.networkPolicies.profile="+file, "--set", "exporter.podAnnotations.team=a")
		cm := into[corev1.ConfigMap](t, objs.get(t, "ConfigMap", profileConfigMap))
		assert.Equal(t, strings.TrimSpace(string(want)), strings.TrimSpace(cm.Data["profile.yaml"]), "comments and quoting kept")
		sts, c := exporterOf(t, objs)
		assert.Contains(t, c.Args, "--network-plugin-profile="+profileMount+"/profile.yaml")
		assert.Equal(t, "a", sts.Spec.Template.Annotations["team"], "podAnnotations kept beside the checksum")
		assert.NotEmpty(t, sts.Spec.Template.Annotations["checksum/network-plugin-profile"])
	})

	t.Run("events: a role of their own", func(t *testing.T) {
		assert.False(t, hasObject(defaults.render(t), "ClusterRole", "podslo-exporter-events"), "off by default")
		objs := defaults.render(t, "--set", "exporter.networkPolicies.events=true")
		_, c := exporterOf(t, objs)
		assert.Contains(t, c.Args, "--networkpolicy-events")
		role := into[rbacv1.ClusterRole](t, objs.get(t, "ClusterRole", "podslo-exporter-events"))
		assert.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}}}, role.Rules)
		binding := into[rbacv1.ClusterRoleBinding](t, objs.get(t, "ClusterRoleBinding", "podslo-exporter-events"))
		assert.Equal(t, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "podslo-exporter-events"}, binding.RoleRef)
		assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "podslo-exporter", Namespace: "monitoring"}}, binding.Subjects)
		main := into[rbacv1.ClusterRole](t, objs.get(t, "ClusterRole", "podslo-exporter"))
		for _, r := range main.Rules {
			assert.Subset(t, []string{"get", "list", "watch"}, r.Verbs, "the main role still only reads")
		}
	})

	t.Run("target pods", func(t *testing.T) {
		_, c := exporterOf(t, defaults.render(t, "--set", "exporter.networkPolicies.targetPods=true"))
		assert.Contains(t, c.Args, "--networkpolicy-target-pods")
	})
}

// TestProfileSchemaFeatures: the schema admits exactly the feature names
// the exporter knows, so that the chart refuses what the exporter would.
func TestProfileSchemaFeatures(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(ChartDir(), "values.schema.json"))
	require.NoError(t, err)
	var schema struct {
		Properties struct {
			Exporter struct {
				Properties struct {
					NetworkPolicies struct {
						Properties struct {
							Profile struct {
								AnyOf []struct {
									Properties struct {
										Unimplemented struct {
											Items struct {
												Enum []string `json:"enum"`
											} `json:"items"`
										} `json:"unimplemented"`
									} `json:"properties"`
								} `json:"anyOf"`
							} `json:"profile"`
						} `json:"properties"`
					} `json:"networkPolicies"`
				} `json:"properties"`
			} `json:"exporter"`
		} `json:"properties"`
	}
	require.NoError(t, json.Unmarshal(raw, &schema))
	var enum []string
	for _, alt := range schema.Properties.Exporter.Properties.NetworkPolicies.Properties.Profile.AnyOf {
		if e := alt.Properties.Unimplemented.Items.Enum; e != nil {
			enum = e
		}
	}
	assert.Equal(t, netpolicy.FeatureNames(), enum)
}

// TestProfileNewerThanMaxVersion: the chart refuses, as the exporter
// does, an unimplemented feature newer than maxVersion; its copy of the
// features' versions is netpolicy.Table's.
func TestProfileNewerThanMaxVersion(t *testing.T) {
	bin := helm(t)
	for _, row := range netpolicy.Table {
		t.Run(row.Name, func(t *testing.T) {
			profile := func(max netpolicy.Version) string {
				return fmt.Sprintf(`exporter.networkPolicies.profile={"name":"cni","maxVersion":%q,"unimplemented":[%q]}`, max, row.Name)
			}
			_, err := Template(bin, "podslo", "monitoring", "--set-json", profile(row.Version))
			assert.NoError(t, err, "a plugin of %s knows %s", row.Version, row.Name)
			if row.Version == netpolicy.Base {
				return
			}
			_, err = Template(bin, "podslo", "monitoring", "--set-json", profile(row.Version-1))
			assert.ErrorContains(t, err, fmt.Sprintf("exporter.networkPolicies.profile.unimplemented: %s (%s) is newer than maxVersion %s", row.Name, row.Version, row.Version-1))
			_, perr := netpolicy.ParseProfile([]byte(fmt.Sprintf("{name: cni, maxVersion: %q, unimplemented: [%s]}", row.Version-1, row.Name)))
			assert.Error(t, perr, "the exporter refuses it too")
		})
	}
}
