package demo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// clusterName names the kwok cluster; its files live under the demo's own
// temporary KWOK_WORKDIR, so two demos never share one.
const clusterName = "podslo-demo"

// cluster is a kwok cluster run by kwokctl with the binary runtime: every
// component a process on this machine, on 127.0.0.1.
type cluster struct {
	kwokctl    string
	workdir    string
	kubeconfig string
	client     kubernetes.Interface
}

// startCluster runs `kwokctl create cluster` with podslo's stages and the
// local binaries: nothing is downloaded.
func (d *Demo) startCluster(ctx context.Context, workdir string) (*cluster, error) {
	c := &cluster{kwokctl: filepath.Join(d.opts.KwokBinDir, "kwokctl"), workdir: workdir}
	kwok := filepath.Join(d.opts.SourceDir, "deploy", "kwok")
	args := []string{"--name", clusterName,
		"--config", filepath.Join(kwok, "kwokctl.yaml"),
		"--config", filepath.Join(kwok, "node-stages.yaml"),
		"--config", filepath.Join(kwok, "pod-stages.yaml"),
		// An empty --kubeconfig leaves ~/.kube/config alone.
		"create", "cluster", "--kubeconfig", "",
		"--etcd-binary", filepath.Join(d.opts.BinDir, "etcd"),
		"--kube-apiserver-binary", filepath.Join(d.opts.BinDir, "kube-apiserver"),
		"--kube-controller-manager-binary", filepath.Join(d.opts.BinDir, "kube-controller-manager"),
		"--kube-scheduler-binary", filepath.Join(d.opts.BinDir, "kube-scheduler"),
		"--kwok-controller-binary", filepath.Join(d.opts.KwokBinDir, "kwok"),
	}
	if err := c.run(ctx, args...); err != nil {
		// A half-created cluster has processes running already.
		_ = c.stop()
		return nil, fmt.Errorf("create the kwok cluster: %w", err)
	}
	c.kubeconfig = filepath.Join(workdir, "clusters", clusterName, "kubeconfig.yaml")
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		_ = c.stop()
		return nil, fmt.Errorf("read the kwok cluster's kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	if c.client, err = kubernetes.NewForConfig(cfg); err != nil {
		_ = c.stop()
		return nil, fmt.Errorf("create a client of the kwok cluster: %w", err)
	}
	if err := c.waitReady(ctx); err != nil {
		_ = c.stop()
		return nil, err
	}
	return c, nil
}

// waitReady polls /readyz: kwokctl is not told to wait, because its own
// wait shells out to kubectl, which a fresh machine lacks.
func (c *cluster) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var last error
	for {
		body, err := c.client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && string(body) == "ok" {
			return nil
		}
		last = err
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the kwok cluster's API server: %w (last: %v)", ctx.Err(), last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// stop deletes the cluster: kwokctl kills its processes by their pid files
// and removes the cluster's directory. It runs on a fresh context: the
// demo's own has ended by then.
func (c *cluster) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// --kubeconfig must name a file; a missing one is only logged.
	return c.run(ctx, "--name", clusterName, "delete", "cluster", "--kubeconfig", filepath.Join(c.workdir, "no-kubeconfig"))
}

func (c *cluster) run(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, c.kwokctl, args...)
	cmd.Env = append(os.Environ(), "KWOK_WORKDIR="+c.workdir)
	// kwokctl checks the API server with kubectl and downloads one when
	// none is on PATH, which offline costs two minutes of retries.
	if _, err := exec.LookPath("kubectl"); err != nil {
		cmd.Env = append(cmd.Env, "KWOK_KUBECTL_BINARY=/bin/true")
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return fmt.Errorf("kwokctl %v: %w\n%s", args, err, out.String())
		}
		return fmt.Errorf("kwokctl: %w", err)
	}
	return nil
}
