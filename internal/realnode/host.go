package realnode

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

const (
	cgroupFS = "/sys/fs/cgroup"
	// netnsDir is where `ip netns` and a CRI without
	// netns_mounts_under_state_dir pin pod network namespaces.
	netnsDir = "/var/run/netns"
	// cniResults is libcni's cache of each attachment's result, a path
	// containerd does not let us move.
	cniResults = "/var/lib/cni/results"
	cniNetwork = "podslo-realnode"
)

// fixedDirs are the paths outside dir the runtime writes to whatever its
// configuration: containerd's shim sockets and libcni's cache. Teardown
// removes those that did not exist before the node started, once empty.
var fixedDirs = []string{"/run/containerd/s", "/run/containerd", cniResults, "/var/lib/cni", netnsDir}

// setupHost creates the bridge that carries NodeIP and the cgroup root the
// kubelet puts its pods under.
func (n *Node) setupHost() error {
	for _, args := range [][]string{
		{"link", "add", bridgeName, "type", "bridge"},
		{"addr", "add", NodeIP + "/24", "dev", bridgeName},
		{"link", "set", bridgeName, "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	// The kubelet refuses a cgroupRoot that does not exist in every
	// hierarchy ("invalid configuration: cgroup-root doesn't exist").
	for _, h := range cgroupHierarchies() {
		dir := filepath.Join(h, cgroupRoot)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		// A new v1 cpuset starts empty, and no task can join it.
		if filepath.Base(h) == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(h, f))
				if err == nil {
					err = os.WriteFile(filepath.Join(dir, f), v, 0o644)
				}
				if err != nil {
					return fmt.Errorf("cpuset %s: %w", f, err)
				}
			}
		}
	}
	return nil
}

// stopProcesses deletes every pod while the kubelet runs, then stops every
// process the node started, containerd's tasks before containerd, and
// removes kube-proxy's rules. It runs before the control plane stops.
func (n *Node) stopProcesses() {
	t := n.t
	if n.kubeletRunning() {
		n.deletePods()
	}
	for i := len(n.procs) - 1; i >= 0; i-- {
		p := n.procs[i]
		if t.Failed() {
			t.Logf("%s log (%s), last lines:\n%s", p.name, p.log, p.tail())
		}
		if p.name == "containerd" {
			if !p.exited() {
				n.removeContainers()
			}
		}
		p.stop(20 * time.Second)
		if p.name == "kube-proxy" {
			n.cleanupProxyRules()
		}
	}
}

// cleanHost removes what the processes leave on the host: mounts, network
// namespaces, cgroups, the bridge, files at fixed paths. It runs after the
// control plane stopped, and fails the test for anything left.
func (n *Node) cleanHost() {
	t := n.t
	if err := removeKubeRules(); err != nil {
		t.Errorf("remove the kubelet's and kube-proxy's iptables rules: %v", err)
	}
	unmountUnder(t, n.dir)
	for name := range netnsNames() {
		if !n.netnsBefore[name] && strings.HasPrefix(name, "cni-") {
			if out, err := exec.Command("ip", "netns", "delete", name).CombinedOutput(); err != nil {
				t.Errorf("delete netns %s: %v: %s", name, err, out)
			}
		}
	}
	removeCgroups(t)
	// A sandbox the kubelet never stopped (it died first) leaves its CNI
	// results: ours, and the loopback network's that containerd adds to
	// every pod.
	removeCNIResults(n.dir + "/")
	for _, d := range fixedDirs {
		if !n.existedBefore[d] {
			_ = os.Remove(d) // only if empty
		}
	}
	if linkExists(bridgeName) {
		if out, err := exec.Command("ip", "link", "delete", bridgeName).CombinedOutput(); err != nil {
			t.Errorf("delete bridge: %v: %s", err, out)
		}
	}
	if n.ipForward != "" && readTrim("/proc/sys/net/ipv4/ip_forward") != n.ipForward {
		_ = os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte(n.ipForward), 0o644)
	}
	for _, l := range n.Leftovers() {
		t.Errorf("left behind by the real node: %s", l)
	}
	if err := os.RemoveAll(n.dir); err != nil {
		t.Errorf("remove %s: %v", n.dir, err)
	}
}

func (n *Node) kubeletRunning() bool {
	for _, p := range n.procs {
		if p.name == "kubelet" {
			return !p.exited()
		}
	}
	return false
}

// deletePods deletes every pod gracefully and waits until the kubelet has
// confirmed each deletion, that is, stopped its containers and sandbox.
func (n *Node) deletePods() {
	ctx := context.Background()
	pods := n.Client.CoreV1().Pods(metav1.NamespaceAll)
	list, err := pods.List(ctx, metav1.ListOptions{})
	if err != nil {
		n.t.Errorf("list pods: %v", err)
		return
	}
	for _, p := range list.Items {
		_ = n.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
	}
	var left int
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		list, err := pods.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil // the next poll tells
		}
		left = len(list.Items)
		return left == 0, nil
	})
	if err != nil {
		n.t.Errorf("%d pods still present 90s after their deletion: %v", left, err)
	}
}

// Leftovers lists what the node has left on this machine: processes,
// mounts, network namespaces, cgroups, the bridge, the temp dir's mounts.
// Empty once teardown has run.
func (n *Node) Leftovers() []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err == nil && strings.Contains(string(b), n.dir+"/") {
			out = append(out, fmt.Sprintf("process %s: %s", filepath.Base(filepath.Dir(p)), strings.ReplaceAll(string(b), "\x00", " ")))
		}
	}
	for _, m := range mountPoints() {
		if m == n.dir || strings.HasPrefix(m, n.dir+"/") {
			out = append(out, "mount "+m)
		}
	}
	for name := range netnsNames() {
		if !n.netnsBefore[name] {
			out = append(out, "network namespace "+name)
		}
	}
	for _, d := range fixedDirs {
		entries, err := os.ReadDir(d)
		if err != nil {
			continue
		}
		if !n.existedBefore[d] && len(entries) == 0 {
			out = append(out, "directory "+d)
		}
		for _, e := range entries {
			if info, err := e.Info(); err == nil && !e.IsDir() && !info.ModTime().Before(n.started) {
				out = append(out, "file "+filepath.Join(d, e.Name()))
			}
		}
	}
	for _, h := range cgroupHierarchies() {
		if _, err := os.Stat(filepath.Join(h, cgroupRoot)); err == nil {
			out = append(out, "cgroup "+filepath.Join(h, cgroupRoot))
		}
	}
	if linkExists(bridgeName) {
		out = append(out, "bridge "+bridgeName)
	}
	if n.ipForward != "" && readTrim("/proc/sys/net/ipv4/ip_forward") != n.ipForward {
		out = append(out, "net.ipv4.ip_forward changed")
	}
	out = append(out, proxyRules()...)
	return out
}

// reapLeftovers removes what a test binary killed before its cleanup (a
// panic, a timeout) left: the bridge, the cgroup root and the KUBE-
// iptables chains. They belong to this harness, and lockMachine holds off
// any other real node.
func reapLeftovers(t testing.TB) {
	// A killed test binary takes its children along (DieWithParent), but
	// not containerd's shims and their containers, which keep mounts under
	// its directory.
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "podslo-rn-*"))
	for _, dir := range dirs {
		t.Logf("removing %s, left by an earlier run", dir)
		procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, p := range procs {
			if b, err := os.ReadFile(p); err == nil && strings.Contains(string(b), dir+"/") {
				var pid int
				if _, err := fmt.Sscan(filepath.Base(filepath.Dir(p)), &pid); err == nil {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		unmountUnder(t, dir)
		if err := os.RemoveAll(dir); err != nil {
			t.Logf("remove %s: %v", dir, err)
		}
	}
	// A SIGKILLed shim leaves its socket; a live one (another containerd's)
	// accepts connections, and stays.
	sockets, _ := os.ReadDir("/run/containerd/s")
	for _, e := range sockets {
		path := filepath.Join("/run/containerd/s", e.Name())
		if c, err := net.Dial("unix", path); err == nil {
			c.Close()
		} else if errors.Is(err, syscall.ECONNREFUSED) {
			_ = os.Remove(path)
		}
	}
	removeCNIResults(filepath.Join(os.TempDir(), "podslo-rn-"))
	for _, d := range fixedDirs {
		_ = os.Remove(d) // only if empty
	}
	// Their containers, orphaned with their shims, are still in the pods'
	// cgroups.
	_ = wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return killCgroupProcs() == 0, nil
	})
	if linkExists(bridgeName) {
		t.Logf("removing bridge %s left by an earlier run", bridgeName)
		_ = exec.Command("ip", "link", "delete", bridgeName).Run()
	}
	removeCgroups(t)
	if err := removeKubeRules(); err != nil {
		t.Logf("remove iptables rules left by an earlier run: %v", err)
	}
}

func linkExists(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name))
	return err == nil
}

func netnsNames() map[string]bool {
	names := map[string]bool{}
	entries, _ := os.ReadDir(netnsDir)
	for _, e := range entries {
		names[e.Name()] = true
	}
	return names
}

// cgroupHierarchies are the mounted cgroup v1 hierarchies (and the hybrid
// unified one), each a directory under /sys/fs/cgroup.
func cgroupHierarchies() []string {
	var hs []string
	for _, m := range mounts() {
		if (m.fstype == "cgroup" || m.fstype == "cgroup2") && strings.HasPrefix(m.point, cgroupFS+"/") {
			hs = append(hs, m.point)
		}
	}
	return hs
}

// removeCgroups removes cgroupRoot and everything under it, deepest first,
// in every hierarchy. A cgroup with a task left fails to go, and Leftovers
// reports it.
func removeCgroups(t testing.TB) {
	for _, h := range cgroupHierarchies() {
		root := filepath.Join(h, cgroupRoot)
		var dirs []string
		_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := syscall.Rmdir(dirs[i]); err != nil {
				t.Logf("remove cgroup %s: %v", dirs[i], err)
			}
		}
	}
}

// removeCNIResults removes libcni's cached results that name a path
// containing dir: the pod's network namespace, pinned under the node's
// containerd state.
func removeCNIResults(dir string) {
	entries, _ := os.ReadDir(cniResults)
	for _, e := range entries {
		path := filepath.Join(cniResults, e.Name())
		if b, err := os.ReadFile(path); err == nil && strings.Contains(string(b), dir) {
			_ = os.Remove(path)
		}
	}
}

// killCgroupProcs sends SIGKILL to every process in a cgroup under
// cgroupRoot and returns how many there were.
func killCgroupProcs() int {
	n := 0
	for _, h := range cgroupHierarchies() {
		_ = filepath.WalkDir(filepath.Join(h, cgroupRoot), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(b)) {
				var pid int
				if _, err := fmt.Sscan(f, &pid); err == nil && syscall.Kill(pid, syscall.SIGKILL) == nil {
					n++
				}
			}
			return nil
		})
	}
	return n
}

// unmountUnder unmounts every mount point under dir, deepest first
// (overlay rootfs, sandbox shm, the kubelet's volume tmpfs).
func unmountUnder(t testing.TB, dir string) {
	points := mountPoints()
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	for _, m := range points {
		if m == dir || strings.HasPrefix(m, dir+"/") {
			if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
				t.Errorf("unmount %s: %v", m, err)
			}
		}
	}
}

type mount struct{ point, fstype string }

// mounts reads /proc/self/mountinfo.
func mounts() []mount {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var ms []mount
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		// ID parent major:minor root point options [optional...] - fstype source super
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if len(fields) < 5 || sep < 0 || sep+1 >= len(fields) {
			continue
		}
		ms = append(ms, mount{point: unescapeOctal(fields[4]), fstype: fields[sep+1]})
	}
	return ms
}

func mountPoints() []string {
	var ps []string
	for _, m := range mounts() {
		ps = append(ps, m.point)
	}
	return ps
}

// unescapeOctal undoes mountinfo's \040-style escapes.
func unescapeOctal(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			var v int
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &v); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
