package realnode

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// A pod whose name starts with SlowPodPrefix gets its network
// SlowSandboxDelay late (the chained CNI plugin podslo-delay, which the
// sleeper command also is): a sandbox slow enough for a test to restart
// an exporter between the pod's scheduling and its sandbox readiness.
const (
	SlowPodPrefix    = "slow-"
	SlowSandboxDelay = 6 * time.Second
)

// cniPlugins are the CNI plugins the node needs from the host.
var cniPlugins = []string{"bridge", "host-local", "loopback"}

// startContainerd starts containerd with its own root, state, sockets and
// CNI configuration under dir, and imports the sleeper image.
func (n *Node) startContainerd() error {
	n.t.Helper()
	cniConf := filepath.Join(n.dir, "net.d")
	if err := os.MkdirAll(cniConf, 0o755); err != nil {
		return err
	}
	// The bridge already has NodeIP; isGateway false and routes to the pod
	// subnet and, through the node, to the Services only: pods get no
	// default route, and the plugin has no reason to turn on IP forwarding. IPAM state lives under dir, not in
	// /var/lib/cni.
	conflist := fmt.Sprintf(`{
  "cniVersion": "1.0.0",
  "name": %q,
  "plugins": [{
    "type": "bridge", "bridge": %q, "isGateway": false, "ipMasq": false,
    "ipam": {"type": "host-local", "dataDir": %q,
      "ranges": [[{"subnet": %q, "rangeStart": "10.253.0.10"}]],
      "routes": [{"dst": %q}, {"dst": %q, "gw": %q}]}
  }, {
    "type": "podslo-delay", "podNamePrefix": %q, "delay": %q
  }]
}
`, cniNetwork, bridgeName, filepath.Join(n.dir, "cni-ipam"), podSubnet, podSubnet, ServiceCIDR, NodeIP, SlowPodPrefix, SlowSandboxDelay.String())
	if err := os.WriteFile(filepath.Join(cniConf, "10-podslo.conflist"), []byte(conflist), 0o644); err != nil {
		return err
	}
	// The plugins `make runtimebin` built, and the sleeper as podslo-delay
	// once it is built, in a bin dir of the node's own.
	cniBin := filepath.Join(n.dir, "cni-bin")
	if err := os.MkdirAll(cniBin, 0o755); err != nil {
		return err
	}
	for _, p := range cniPlugins {
		if err := os.Symlink(filepath.Join(n.rt.cniDir, p), filepath.Join(cniBin, p)); err != nil {
			return err
		}
	}
	// containerd 2's configuration format (version 3): the CRI's runtime
	// and image settings are plugins of their own.
	config := fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q
# Only the snapshotter the CRI uses.
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.erofs"]

[grpc]
  address = %[3]q
[ttrpc]
  address = "%[3]s.ttrpc"

[plugins."io.containerd.internal.v1.opt"]
  path = %[4]q

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = %[5]q
  # A hosts.toml per registry (StartRegistry), read at each pull: the
  # tests' registry on loopback speaks plain HTTP.
  [plugins."io.containerd.cri.v1.images".registry]
    config_path = %[9]q

[plugins."io.containerd.cri.v1.runtime"]
  # Root here lacks CAP_SYS_RESOURCE, so runc cannot set the pause
  # container's oom_score_adj (-998) below its own. Without this, every
  # sandbox fails: "runc create failed: unable to start container process:
  # can't get final child's PID from pipe: EOF".
  restrict_oom_score_adj = true
  # Pod network namespaces under the state dir, not /var/run/netns, so that
  # teardown finds every one of them among the mounts under dir.
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    # The handler of the tests' RuntimeClass "runc".
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      # The shim built with this containerd, not one found in $PATH (a
      # distribution's older containerd may have put its own there).
      runtime_path = %[10]q
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        # cgroupfs, as the kubelet's cgroupDriver: there is no systemd.
        SystemdCgroup = false
        # runc's state under dir, not /run/containerd/runc.
        Root = %[8]q
        BinaryName = %[11]q
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [%[6]q]
    conf_dir = %[7]q

[plugins."io.containerd.grpc.v1.cri"]
  # A port of its own for exec/attach/port-forward, on loopback.
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
`, filepath.Join(n.dir, "containerd"), filepath.Join(n.dir, "containerd-state"), n.Socket,
		filepath.Join(n.dir, "containerd-opt"), Image, cniBin, cniConf, filepath.Join(n.dir, "runc"), n.registryHosts(),
		filepath.Join(n.rt.containerdDir, "containerd-shim-runc-v2"), n.rt.runc)
	cfg := filepath.Join(n.dir, "containerd.toml")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		return err
	}
	p := n.start("containerd", filepath.Join(n.rt.containerdDir, "containerd"), "--config", cfg)
	n.poll(p, "containerd serving", time.Minute, func() bool { return n.ctr("version") == nil })
	// containerd serves even when its CRI plugin failed to load; the
	// kubelet would then fail with "unknown service runtime.v1.RuntimeService".
	plugins, err := n.ctrOutput("plugins", "list")
	if err != nil {
		return err
	}
	if !criLoaded(plugins) {
		return fmt.Errorf("containerd's CRI plugin did not load:\n%s\n%s", plugins, p.tail())
	}

	archive := filepath.Join(n.dir, "sleeper.tar")
	if err := buildImage(n.dir, archive); err != nil {
		return err
	}
	// containerd runs a CNI plugin only when it makes a sandbox, after
	// this.
	if err := os.Symlink(filepath.Join(n.dir, "sleeper"), filepath.Join(cniBin, "podslo-delay")); err != nil {
		return err
	}
	return n.ctr("images", "import", archive)
}

// criLoaded tells whether `ctr plugins list` shows the CRI plugin "ok".
func criLoaded(plugins string) bool {
	for _, line := range strings.Split(plugins, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == "io.containerd.grpc.v1" && f[1] == "cri" {
			return f[len(f)-1] == "ok"
		}
	}
	return false
}

// ctr runs ctr on the node's containerd, in the CRI's namespace.
func (n *Node) ctr(args ...string) error {
	_, err := n.ctrOutput(args...)
	return err
}

func (n *Node) ctrOutput(args ...string) (string, error) {
	cmd := exec.Command(n.rt.ctr(), append([]string{"--address", n.Socket, "--namespace", "k8s.io"}, args...)...)
	// Standard output only: containerd 2's ctr warns on standard error (the
	// cgroup v1 deprecation, on this host), which is no container ID.
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("ctr %s: %w\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	return string(out), nil
}

// KillSandbox kills the task of a pod's sandbox (pause) container with
// SIGKILL, as a crash would; the kubelet then re-creates the sandbox.
// It fails if the pod has no running sandbox.
func (n *Node) KillSandbox(podUID string) error {
	out, err := n.ctrOutput("containers", "list", "-q", `labels."io.kubernetes.pod.uid"==`+podUID+`,labels."io.cri-containerd.kind"==sandbox`)
	if err != nil {
		return err
	}
	// A sandbox killed before stays listed, without a task, until the
	// kubelet's garbage collection removes it: kill only running tasks.
	tasks, err := n.ctrOutput("tasks", "list")
	if err != nil {
		return err
	}
	running := map[string]bool{}
	for _, line := range strings.Split(tasks, "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[2] == "RUNNING" {
			running[f[0]] = true
		}
	}
	killed := 0
	for _, id := range strings.Fields(out) {
		if !running[id] {
			continue
		}
		if err := n.ctr("tasks", "kill", "--signal", "SIGKILL", id); err != nil {
			return err
		}
		killed++
	}
	if killed == 0 {
		return fmt.Errorf("no running sandbox for pod %s (containers %q)", podUID, out)
	}
	return nil
}

// removeContainers kills and deletes every task and container left in
// containerd, so that no shim outlives it. Deleting a sandbox's task ends
// the shim its containers share, so a delete may fail ("ttrpc: closed",
// "not found") for a task already gone: what counts is that none is left.
func (n *Node) removeContainers() {
	var out string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		var err error
		out, err = n.ctrOutput("tasks", "list", "-q")
		if err != nil || strings.TrimSpace(out) == "" {
			return err == nil, nil
		}
		for _, id := range strings.Fields(out) {
			// --force kills the task with SIGKILL and waits for it.
			_ = n.ctr("tasks", "delete", "--force", id)
		}
		return false, nil
	})
	if err != nil {
		n.t.Errorf("containerd tasks left: %v\n%s", err, out)
	}
	out, err = n.ctrOutput("containers", "list", "-q")
	if err != nil {
		n.t.Errorf("list containerd containers: %v", err)
		return
	}
	for _, id := range strings.Fields(out) {
		if err := n.ctr("containers", "delete", id); err != nil {
			n.t.Errorf("delete container: %v", err)
		}
	}
}
