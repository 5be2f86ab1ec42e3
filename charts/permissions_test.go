package charts

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestVolumePermissions: the init container that gives the state
// directory to the exporter's uid is there in every mode that asks for it
// (issue 26, defect 6: a PersistentVolume that ignores fsGroup
// crash-looped the exporter, and only mode perNode had the container), and
// by default only where a root container costs nothing: per node, whose
// hostPath already needs the privileged Pod Security level.
func TestVolumePermissions(t *testing.T) {
	podSpec := func(t *testing.T, objs objects) corev1.PodSpec {
		for _, o := range objs {
			switch o.GetKind() {
			case "StatefulSet":
				return into[appsv1.StatefulSet](t, o).Spec.Template.Spec
			case "DaemonSet":
				if o.GetName() == "podslo-exporter" {
					return into[appsv1.DaemonSet](t, o).Spec.Template.Spec
				}
			}
		}
		t.Fatalf("no exporter workload in %v", objs.names())
		return corev1.PodSpec{}
	}
	for _, tc := range []struct {
		name string
		args []string
		want bool
	}{
		{"statefulSet, default", nil, false},
		{"statefulSet, on", []string{"--set", "exporter.volumePermissions.enabled=true"}, true},
		{"statefulSet on an existing claim, on", []string{"--set", "exporter.volumePermissions.enabled=true,exporter.persistence.existingClaim=mine"}, true},
		{"sharded, on", []string{"--set", "exporter.volumePermissions.enabled=true,exporter.sharding.replicas=3"}, true},
		{"perNode, default", []string{"--set", "exporter.mode=perNode"}, true},
		{"perNode, off", []string{"--set", "exporter.mode=perNode,exporter.volumePermissions.enabled=false"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := podSpec(t, rendering{release: "podslo", namespace: "monitoring", args: tc.args}.render(t))
			if !tc.want {
				assert.Empty(t, pod.InitContainers)
				return
			}
			require.Len(t, pod.InitContainers, 1)
			init := pod.InitContainers[0]
			assert.Equal(t, "state-permissions", init.Name)
			assert.Equal(t, "docker.io/library/busybox:1.37.0", init.Image)
			assert.Equal(t, []string{"sh", "-c", "chown 65532:65532 /var/lib/podslo && chmod 0700 /var/lib/podslo"}, init.Command)
			assert.Equal(t, []corev1.VolumeMount{{Name: "state", MountPath: "/var/lib/podslo"}}, init.VolumeMounts)
			assert.Equal(t, int64(0), *init.SecurityContext.RunAsUser)
			assert.Equal(t, &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}, Add: []corev1.Capability{"CHOWN", "FOWNER"}}, init.SecurityContext.Capabilities)
		})
	}
	t.Run("a bad value", func(t *testing.T) {
		_, err := Template(helm(t), "podslo", "monitoring", "--set", "exporter.volumePermissions.enabled=sometimes")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "volumePermissions")
	})
}

// TestNotesTellTheStateIsKept: `helm uninstall` keeps the state's claims,
// which nothing told the user (issue 26, defect 6). The notes, printed by
// `helm install` and `helm upgrade`, say so and how to delete them.
func TestNotesTellTheStateIsKept(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"single", nil, []string{
			"the PersistentVolumeClaim state-podslo-exporter-0.",
			"`helm uninstall` keeps it",
			"kubectl -n monitoring delete pvc -l app.kubernetes.io/instance=podslo,app.kubernetes.io/component=exporter",
			`If the exporter stops with "state dir is not writable"`,
			"set exporter.volumePermissions.enabled=true",
		}},
		{"sharded", []string{"--set", "exporter.sharding.replicas=3"}, []string{
			"the PersistentVolumeClaims state-podslo-exporter-0 to -2.",
			"`helm uninstall` keeps them",
		}},
		{"sharded, claims deleted with the StatefulSet", []string{"--set", "exporter.sharding.replicas=3,exporter.sharding.persistentVolumeClaimRetentionPolicy.whenDeleted=Delete"}, []string{
			"`helm uninstall` deletes them with the StatefulSet",
		}},
		{"existing claim", []string{"--set", "exporter.persistence.existingClaim=mine"}, []string{
			"your PersistentVolumeClaim mine.",
		}},
		// The retention the SLO rules need, where they are installed.
		{"rules", []string{"--set", "prometheusOperator=true"}, []string{
			"The SLO rules (PrometheusRule podslo-rules) compute each SLO's attainment and error budget over its window, up to 30d, from the raw series:",
			"the Prometheus that evaluates them must keep 30d (kube-prometheus-stack keeps 10d unless prometheus.prometheusSpec.retention says more)",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Run(helm(t), append([]string{"install", "podslo", ChartDir(), "--namespace", "monitoring", "--dry-run=client"}, tc.args...)...)
			require.NoError(t, err, "%s", out)
			for _, w := range tc.want {
				assert.Contains(t, string(out), w)
			}
		})
	}
}
