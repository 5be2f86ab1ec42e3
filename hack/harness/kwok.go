package harness

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

// ClusterOptions describe a kwok cluster.
type ClusterOptions struct {
	// Name is kwokctl's name for the cluster. Required.
	Name string
	// Kwokbin holds kwok and kwokctl (make kwokbin); Testbin holds etcd
	// and kube-apiserver (make testbin). Required.
	Kwokbin, Testbin string
	// Workdir holds the cluster (kwokctl's KWOK_WORKDIR is Workdir/kwok)
	// and kwokctl.log. Required.
	Workdir string
	// Configs are kwokctl's --config files, in order: the cluster, the
	// node and pod stages, kwok's own configuration.
	Configs []string
	// ReadyTimeout bounds the wait for kube-apiserver's /readyz after the
	// cluster is created. Default 2 minutes.
	ReadyTimeout time.Duration
	// KeepLogs, if set, is where Delete copies the components' logs
	// first: kwokctl removes them with the cluster.
	KeepLogs string
	// Logger receives Delete's outcome. Default: discard.
	Logger *slog.Logger
}

// Cluster is a kwok cluster made as hack/kwok/cluster.sh makes one (the
// same binaries, offline, on 127.0.0.1), without kube-scheduler and
// kube-controller-manager, whose work the harness's users do themselves
// (they bind pods, or create them bound, and create the ServiceAccounts),
// and with --disable-qps-limits, which lifts the API server's in-flight
// limits: on 2 cores the control plane, not the code measured, would
// otherwise be the bottleneck.
type Cluster struct {
	// Kubeconfig is the cluster's admin kubeconfig, once Create made it.
	Kubeconfig string
	// Dir is the cluster's directory, where kwokctl keeps the
	// components' pid files (pids/) and logs (logs/).
	Dir string

	opts    ClusterOptions
	kwokctl string
	workdir string
	created bool
}

// NewCluster returns the cluster o describes; Create makes it.
func NewCluster(o ClusterOptions) *Cluster {
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 2 * time.Minute
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	workdir := filepath.Join(o.Workdir, "kwok")
	dir := filepath.Join(workdir, "clusters", o.Name)
	return &Cluster{
		Kubeconfig: filepath.Join(dir, "kubeconfig.yaml"),
		Dir:        dir,
		opts:       o,
		kwokctl:    filepath.Join(o.Kwokbin, "kwokctl"),
		workdir:    workdir,
	}
}

func (c *Cluster) env() []string {
	env := append(os.Environ(), "KWOK_WORKDIR="+c.workdir)
	if _, err := exec.LookPath("kubectl"); err != nil {
		// As cluster.sh: without kubectl, kwokctl would download one and,
		// offline, retry for two minutes; /readyz is polled instead.
		env = append(env, "KWOK_KUBECTL_BINARY=/bin/true")
	}
	return env
}

// Create creates the cluster and waits until kube-apiserver is ready.
// Delete must be called even when Create fails: kwokctl may have started
// some of the components.
func (c *Cluster) Create(ctx context.Context) error {
	c.created = true
	var args []string
	args = append(args, "--name", c.opts.Name)
	for _, f := range c.opts.Configs {
		args = append(args, "--config", f)
	}
	args = append(args, "create", "cluster", "--kubeconfig", "",
		"--disable", "kube-scheduler,kube-controller-manager",
		"--disable-qps-limits",
		"--etcd-binary", filepath.Join(c.opts.Testbin, "etcd"),
		"--kube-apiserver-binary", filepath.Join(c.opts.Testbin, "kube-apiserver"),
		"--kwok-controller-binary", filepath.Join(c.opts.Kwokbin, "kwok"),
	)
	cmd := exec.CommandContext(ctx, c.kwokctl, args...)
	cmd.Env = c.env()
	logf, err := os.Create(filepath.Join(c.opts.Workdir, "kwokctl.log"))
	if err != nil {
		return fmt.Errorf("create kwokctl's log: %w", err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kwokctl create cluster (log in %s): %w", logf.Name(), err)
	}
	return c.WaitReady(ctx, c.opts.ReadyTimeout)
}

// WaitReady polls kube-apiserver's /readyz until it answers ok, for at
// most timeout: after Create, or after a restart of kube-apiserver.
func (c *Cluster) WaitReady(ctx context.Context, timeout time.Duration) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return fmt.Errorf("read the kubeconfig %s: %w", c.Kubeconfig, err)
	}
	cfg.Timeout = 5 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", nil
	})
	if err != nil {
		return fmt.Errorf("wait for kube-apiserver's /readyz: %w", err)
	}
	return nil
}

// Delete deletes the cluster: kwokctl kills its processes by their pid
// files and removes its directory. It does nothing if Create was never
// called, and runs on a context of its own, since the caller's may be
// cancelled already.
func (c *Cluster) Delete() {
	if !c.created {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	log := c.opts.Logger
	if c.opts.KeepLogs != "" {
		if out, err := exec.CommandContext(ctx, "cp", "-r", filepath.Join(c.Dir, "logs"), c.opts.KeepLogs).CombinedOutput(); err != nil {
			log.Warn("Keeping the cluster's logs failed", "err", err, "output", string(out))
		}
	}
	// --kubeconfig must name a file; a missing one is only logged.
	cmd := exec.CommandContext(ctx, c.kwokctl, "--name", c.opts.Name, "delete", "cluster",
		"--kubeconfig", filepath.Join(c.workdir, "no-kubeconfig"))
	cmd.Env = c.env()
	if out, err := cmd.CombinedOutput(); err != nil {
		log.Error("Deleting the kwok cluster failed", "err", err, "output", string(out))
		return
	}
	log.Info("Deleted the kwok cluster")
}
