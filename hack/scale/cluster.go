package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const clusterName = "scale-bench"

// cluster is a kwok cluster made as hack/kwok/cluster.sh makes one (the
// same binaries, offline, on 127.0.0.1, deploy/kwok's node stages), but
// lighter, because at 100k pods on 2 cores the control plane and kwok, not
// the exporters, are the bottleneck: hack/scale/pod-stages.yaml starts a
// pod in one status patch instead of deploy/kwok's four, hack/scale/kwok.yaml
// gives kwok more workers, there is no kube-scheduler (pods are created
// bound) nor kube-controller-manager (the benchmark creates the default
// ServiceAccounts), and --disable-qps-limits lifts the API server's
// in-flight limits. cluster.sh takes no extra configuration.
type cluster struct {
	kwokctl    string
	workdir    string // KWOK_WORKDIR
	Kubeconfig string
	log        *slog.Logger
}

func (c *cluster) env() []string {
	env := append(os.Environ(), "KWOK_WORKDIR="+c.workdir)
	if _, err := exec.LookPath("kubectl"); err != nil {
		// As cluster.sh: without kubectl, kwokctl would download one and,
		// offline, retry for two minutes; /readyz is polled below instead.
		env = append(env, "KWOK_KUBECTL_BINARY=/bin/true")
	}
	return env
}

// up creates the cluster; down must be called even when up fails.
func (c *cluster) up(ctx context.Context, o *Options) error {
	c.kwokctl = filepath.Join(o.Kwokbin, "kwokctl")
	c.workdir = filepath.Join(o.Workdir, "kwok")
	deploy := filepath.Join(o.Repo, "deploy", "kwok")
	args := []string{"--name", clusterName,
		"--config", filepath.Join(deploy, "kwokctl.yaml"),
		"--config", filepath.Join(deploy, "node-stages.yaml"),
		"--config", filepath.Join(o.Repo, "hack", "scale", "pod-stages.yaml"),
		"--config", filepath.Join(o.Repo, "hack", "scale", "kwok.yaml"),
		"create", "cluster", "--kubeconfig", "",
		"--disable", "kube-scheduler,kube-controller-manager",
		"--disable-qps-limits",
		"--etcd-binary", filepath.Join(o.Testbin, "etcd"),
		"--kube-apiserver-binary", filepath.Join(o.Testbin, "kube-apiserver"),
		"--kwok-controller-binary", filepath.Join(o.Kwokbin, "kwok"),
	}
	cmd := exec.CommandContext(ctx, c.kwokctl, args...)
	cmd.Env = c.env()
	logf, err := os.Create(filepath.Join(o.Workdir, "kwokctl.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kwokctl create cluster (log in %s): %w", logf.Name(), err)
	}
	c.Kubeconfig = filepath.Join(c.workdir, "clusters", clusterName, "kubeconfig.yaml")
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", nil
	})
}

// down deletes the cluster: kwokctl kills its processes by their pid files
// and removes the cluster directory.
func (c *cluster) down() {
	if c.kwokctl == "" {
		return
	}
	// A fresh context: the run's may be cancelled already.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// --kubeconfig must name a file; a missing one is only logged.
	cmd := exec.CommandContext(ctx, c.kwokctl, "--name", clusterName, "delete", "cluster",
		"--kubeconfig", filepath.Join(c.workdir, "no-kubeconfig"))
	cmd.Env = c.env()
	if out, err := cmd.CombinedOutput(); err != nil {
		c.log.Error("Deleting the kwok cluster failed", "err", err, "output", string(out))
		return
	}
	c.log.Info("Deleted the kwok cluster")
}
