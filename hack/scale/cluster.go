package main

import (
	"log/slog"
	"path/filepath"
	"time"

	"github.com/podslo/podslo/hack/harness"
)

const clusterName = "scale-bench"

// newCluster describes the benchmark's kwok cluster (harness.Cluster):
// deploy/kwok's node stages, but lighter pod stages, because at 100k pods
// on 2 cores the control plane and kwok, not the exporters, are the
// bottleneck: hack/scale/pod-stages.yaml starts a pod in one status patch
// instead of deploy/kwok's four, and hack/scale/kwok.yaml gives kwok more
// workers. Pods are created bound, and the benchmark creates the default
// ServiceAccounts.
func newCluster(o *Options, log *slog.Logger) *harness.Cluster {
	deploy := filepath.Join(o.Repo, "deploy", "kwok")
	return harness.NewCluster(harness.ClusterOptions{
		Name:    clusterName,
		Kwokbin: o.Kwokbin,
		Testbin: o.Testbin,
		Workdir: o.Workdir,
		Configs: []string{
			filepath.Join(deploy, "kwokctl.yaml"),
			filepath.Join(deploy, "node-stages.yaml"),
			filepath.Join(o.Repo, "hack", "scale", "pod-stages.yaml"),
			filepath.Join(o.Repo, "hack", "scale", "kwok.yaml"),
		},
		ReadyTimeout: time.Minute,
		Logger:       log,
	})
}
