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

	"github.com/podslo/podslo/hack/harness"
)

const clusterName = "podslo-chaos"

// cluster is the run's kwok cluster (harness.Cluster) with deploy/kwok's
// node and pod stages and hack/chaos/kwok.yaml, and the faults the run
// puts it through: kube-apiserver killed and started again, etcd
// compacted. The run binds each pod itself through the binding
// subresource, which writes PodScheduled as the scheduler would.
type cluster struct {
	*harness.Cluster
	// apiserver is the restarted kube-apiserver, once the run restarted it.
	apiserver *exec.Cmd
	apiDone   chan struct{}
}

// newCluster describes the run's cluster; keepLogs, if set, is where its
// components' logs are copied before it is deleted.
func newCluster(o *Options, keepLogs string, log *slog.Logger) *cluster {
	deploy := filepath.Join(o.Repo, "deploy", "kwok")
	return &cluster{Cluster: harness.NewCluster(harness.ClusterOptions{
		Name:    clusterName,
		Kwokbin: o.Kwokbin,
		Testbin: o.Testbin,
		Workdir: o.Workdir,
		Configs: []string{
			filepath.Join(deploy, "kwokctl.yaml"),
			filepath.Join(deploy, "node-stages.yaml"),
			filepath.Join(deploy, "pod-stages.yaml"),
			filepath.Join(o.Repo, "hack", "chaos", "kwok.yaml"),
		},
		KeepLogs: keepLogs,
		Logger:   log,
	})}
}

// down deletes the cluster (kwokctl kills its processes by their pid
// files, and the run keeps kube-apiserver's current), then reaps the
// kube-apiserver the run restarted.
func (c *cluster) down() {
	c.Delete()
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
	return filepath.Join(c.Dir, "pids", component+".pid")
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
	logf, err := os.OpenFile(filepath.Join(c.Dir, "logs", "kube-apiserver.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
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
