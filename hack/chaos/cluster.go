package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

const clusterName = "podslo-chaos"

// cluster is a kwok cluster made as hack/kwok/cluster.sh makes one (the
// same binaries, offline, on 127.0.0.1, deploy/kwok's node and pod stages),
// without kube-scheduler and kube-controller-manager: the run binds each
// pod itself through the binding subresource, which writes PodScheduled as
// the scheduler would, and creates the ServiceAccounts. This start-up
// duplicates hack/scale's (cluster.go there), which uses its own lighter pod
// stages: the two are separate modules with separate stage files.
type cluster struct {
	kwokctl    string
	workdir    string // KWOK_WORKDIR
	dir        string // the cluster's directory under workdir
	Kubeconfig string
	log        *slog.Logger
	// keepLogs, if set, is where the components' logs are copied before
	// the cluster is deleted.
	keepLogs string
	// apiserver is the restarted kube-apiserver, once the run restarted it.
	apiserver *exec.Cmd
	apiDone   chan struct{}
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
	c.dir = filepath.Join(c.workdir, "clusters", clusterName)
	deploy := filepath.Join(o.Repo, "deploy", "kwok")
	args := []string{"--name", clusterName,
		"--config", filepath.Join(deploy, "kwokctl.yaml"),
		"--config", filepath.Join(deploy, "node-stages.yaml"),
		"--config", filepath.Join(deploy, "pod-stages.yaml"),
		"--config", filepath.Join(o.Repo, "hack", "chaos", "kwok.yaml"),
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
	c.Kubeconfig = filepath.Join(c.dir, "kubeconfig.yaml")
	return c.waitAPI(ctx, 2*time.Minute)
}

// waitAPI polls kube-apiserver's /readyz.
func (c *cluster) waitAPI(ctx context.Context, timeout time.Duration) error {
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		return err
	}
	cfg.Timeout = 5 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", nil
	})
}

// down deletes the cluster: kwokctl kills its processes by their pid files
// (the run keeps kube-apiserver's current) and removes its directory.
func (c *cluster) down() {
	if c.kwokctl == "" {
		return
	}
	// A fresh context: the run's may be cancelled already.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if c.keepLogs != "" {
		// kwokctl removes the cluster's directory with its logs.
		if out, err := exec.CommandContext(ctx, "cp", "-r", filepath.Join(c.dir, "logs"), c.keepLogs).CombinedOutput(); err != nil {
			c.log.Warn("Keeping the cluster's logs failed", "err", err, "output", string(out))
		}
	}
	// --kubeconfig must name a file; a missing one is only logged.
	cmd := exec.CommandContext(ctx, c.kwokctl, "--name", clusterName, "delete", "cluster",
		"--kubeconfig", filepath.Join(c.workdir, "no-kubeconfig"))
	cmd.Env = c.env()
	if out, err := cmd.CombinedOutput(); err != nil {
		c.log.Error("Deleting the kwok cluster failed", "err", err, "output", string(out))
	} else {
		c.log.Info("Deleted the kwok cluster")
	}
	if c.apiserver != nil {
		// Killed by kwokctl through the pid file; reap it, or kill it if
		// kwokctl could not.
		select {
		case <-c.apiDone:
		case <-time.After(10 * time.Second):
			_ = c.apiserver.Process.Kill()
			<-c.apiDone
		}
	}
}

func (c *cluster) pidFile(component string) string {
	return filepath.Join(c.dir, "pids", component+".pid")
}

func readPid(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return pid, nil
}

// processImage is how to run a process again as it runs now: its
// executable, command line, environment and working directory, read from
// /proc (kwokctl starts kube-apiserver by a name on its own PATH).
type processImage struct {
	Exe  string
	Args []string
	Env  []string
	Dir  string
}

func imageOf(pid int) (*processImage, error) {
	read := func(name string) ([]string, error) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, name))
		if err != nil {
			return nil, err
		}
		return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00"), nil
	}
	args, err := read("cmdline")
	if err != nil {
		return nil, err
	}
	env, err := read("environ")
	if err != nil {
		return nil, err
	}
	dir, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		return nil, err
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return nil, err
	}
	return &processImage{Exe: exe, Args: args, Env: env, Dir: dir}, nil
}

func (p *processImage) flag(name string) string {
	for i, a := range p.Args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
		if a == "--"+name && i+1 < len(p.Args) {
			return p.Args[i+1]
		}
	}
	return ""
}

// apiImage is kube-apiserver's current process image.
func (c *cluster) apiImage() (int, *processImage, error) {
	pid, err := readPid(c.pidFile("kube-apiserver"))
	if err != nil {
		return 0, nil, fmt.Errorf("kube-apiserver's pid: %w", err)
	}
	img, err := imageOf(pid)
	if err != nil {
		return 0, nil, fmt.Errorf("kube-apiserver's command line: %w", err)
	}
	return pid, img, nil
}

// stopAPIServer kills kube-apiserver with SIGKILL (a crash, not a drain),
// leaving etcd and kwok running, and returns how to start it again.
func (c *cluster) stopAPIServer() (*processImage, error) {
	pid, img, err := c.apiImage()
	if err != nil {
		return nil, err
	}
	if c.apiserver != nil && c.apiserver.Process.Pid == pid {
		_ = c.apiserver.Process.Kill()
		<-c.apiDone
		return img, nil
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return nil, fmt.Errorf("kill kube-apiserver (pid %d): %w", pid, err)
	}
	// Not our child (kwokctl started it detached): wait until it is gone.
	for syscall.Kill(pid, 0) == nil {
		time.Sleep(20 * time.Millisecond)
	}
	return img, nil
}

// startAPIServer starts kube-apiserver again as it ran, logging where it
// logged, and records its pid where kwokctl will look for it.
func (c *cluster) startAPIServer(img *processImage) error {
	logf, err := os.OpenFile(filepath.Join(c.dir, "logs", "kube-apiserver.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(img.Exe, img.Args[1:]...)
	cmd.Args[0] = img.Args[0]
	cmd.Env, cmd.Dir = img.Env, img.Dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// Our child this time: killed with the run if the run dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("start kube-apiserver: %w", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	c.apiserver, c.apiDone = cmd, done
	return os.WriteFile(c.pidFile("kube-apiserver"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
}

// etcdClient connects to the cluster's etcd as kube-apiserver does, with
// the endpoint and certificates of its command line.
func (c *cluster) etcdClient() (*clientv3.Client, error) {
	_, img, err := c.apiImage()
	if err != nil {
		return nil, err
	}
	servers := img.flag("etcd-servers")
	if servers == "" {
		return nil, errors.New("kube-apiserver has no --etcd-servers")
	}
	cfg := clientv3.Config{Endpoints: strings.Split(servers, ","), DialTimeout: 5 * time.Second}
	if u, err := url.Parse(cfg.Endpoints[0]); err == nil && u.Scheme == "https" {
		tlsCfg := &tls.Config{MinVersion: tls.VersionTLS12}
		if ca := img.flag("etcd-cafile"); ca != "" {
			pem, err := os.ReadFile(ca)
			if err != nil {
				return nil, err
			}
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(pem)
			tlsCfg.RootCAs = pool
		}
		if cert, key := img.flag("etcd-certfile"), img.flag("etcd-keyfile"); cert != "" {
			pair, err := tls.LoadX509KeyPair(cert, key)
			if err != nil {
				return nil, err
			}
			tlsCfg.Certificates = []tls.Certificate{pair}
		}
		cfg.TLS = tlsCfg
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to etcd at %s: %w", servers, err)
	}
	return cli, nil
}

// compact compacts etcd at rev, as `etcdctl compact` does.
func compact(ctx context.Context, cli *clientv3.Client, rev int64) error {
	if _, err := cli.Compact(ctx, rev); err != nil {
		return fmt.Errorf("compact etcd at revision %d: %w", rev, err)
	}
	return nil
}

// grepLog returns the lines of a log file that contain any of the needles.
func grepLog(path string, needles ...string) []string {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range bytes.Split(b, []byte("\n")) {
		for _, n := range needles {
			if bytes.Contains(line, []byte(n)) {
				out = append(out, string(line))
				break
			}
		}
	}
	return out
}
