package realnode

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/podslo/podslo/internal/testenv"
)

// The node's network. The kubelet refuses a loopback node IP, so the node
// gets an address of its own on a bridge the harness creates, which the
// CNI bridge plugin then plugs the pods into. The range is private, routed
// nowhere, and pods get no default route: every packet stays on this
// machine, between the host and its pods.
const (
	// NodeName is the one node's name.
	NodeName = "realnode"
	// NodeIP is the node's InternalIP, the bridge's address: the API server
	// reaches the kubelet there, and pods reach the host there.
	NodeIP     = "10.253.0.1"
	bridgeName = "podslo-rn0"
	podSubnet  = "10.253.0.0/24"
	// ServiceCIDR is the Services' range; pods route it to the node, where
	// kube-proxy's rules translate it.
	ServiceCIDR = "10.0.0.0/24"
	// serviceIP is the kubernetes Service's, the first in ServiceCIDR.
	serviceIP = "10.0.0.1"
	// cgroupRoot holds every pod cgroup of the kubelet, in each cgroup v1
	// hierarchy, so that teardown knows what to remove.
	cgroupRoot = "podslo-realnode"
)

// Node is a running control plane with one real node.
type Node struct {
	*testenv.Env
	// Socket is containerd's address (ctr --address).
	Socket string

	t     testing.TB
	dir   string
	bin   string
	rt    runtimeBins
	procs []*proc // in start order; stopped in reverse
	// What the host had before, to tell what the node left behind.
	netnsBefore   map[string]bool
	existedBefore map[string]bool
	ipForward     string
	started       time.Time
}

// Start starts a control plane (internal/testenv) on NodeIP,
// kube-scheduler, kube-controller-manager, containerd, a kubelet registered
// as NodeName and kube-proxy, and tears everything down in t.Cleanup, also
// when the test fails; the teardown fails the test if anything is left
// behind. It needs root, the binaries of `make nodebin` (the control
// plane, kubelet and kube-proxy, and `make runtimebin`'s containerd, runc
// and CNI plugins), and Debian's iproute2 and iptables: a missing one fails
// the test, and only `go test -short` skips.
// opts are further options of the control plane (internal/testenv).
func Start(t testing.TB, opts ...testenv.Option) *Node {
	t.Helper()
	if testing.Short() {
		t.Skip("real-node test: needs root, a kubelet and containerd (run without -short)")
	}
	if os.Geteuid() != 0 {
		t.Fatal("the real node needs root (namespaces, mounts, cgroups, a bridge)")
	}
	bin, err := testenv.BinDir()
	if err != nil {
		t.Fatalf("find test binaries: %v", err)
	}
	for _, b := range []string{"kube-scheduler", "kube-controller-manager", "kubelet", "kube-proxy"} {
		if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
			t.Fatalf("test binary %s missing in %s (run `make nodebin`): %v", b, bin, err)
		}
	}
	rt, err := findRuntime()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"ip", "iptables", "iptables-save", "ip6tables-save"} {
		if _, err := exec.LookPath(b); err != nil {
			t.Fatalf("%s not found (Debian: apt-get install iproute2 iptables): %v", b, err)
		}
	}
	lockMachine(t)
	reapLeftovers(t)

	// Not t.TempDir: containerd's socket path must stay under 108 bytes.
	dir, err := os.MkdirTemp("", "podslo-rn-")
	if err != nil {
		t.Fatalf("temp dir: %v", err)
	}
	n := &Node{Socket: filepath.Join(dir, "containerd.sock"), t: t, dir: dir, bin: bin, rt: rt, netnsBefore: netnsNames()}
	n.ipForward = readTrim("/proc/sys/net/ipv4/ip_forward")
	n.started = time.Now()
	n.existedBefore = map[string]bool{}
	for _, d := range fixedDirs {
		_, err := os.Stat(d)
		n.existedBefore[d] = err == nil
	}
	// Registered before the control plane's cleanup, so it runs after it.
	t.Cleanup(n.cleanHost)
	if err := n.setupHost(); err != nil {
		t.Fatalf("prepare the host: %v", err)
	}

	env := testenv.Start(t, append([]testenv.Option{
		// On the node's address, not loopback: pods reach the API server
		// there, through the kubernetes Service and kube-proxy, as in a
		// cluster. It is the address the Service's endpoints advertise.
		testenv.APIServerAddress(NodeIP, freePort(t, NodeIP)),
		testenv.APIServerFlag("service-cluster-ip-range", ServiceCIDR),
		// The node's Hostname address ("realnode") resolves nowhere: the
		// API server must dial the kubelet on its InternalIP, or it answers
		// the node proxy (logs, the kubelet's /metrics) with an error.
		testenv.APIServerFlag("kubelet-preferred-address-types", "InternalIP"),
		// Pods reach the API server at the kubernetes Service's IP, the
		// first of ServiceCIDR, and verify its certificate there.
		testenv.APIServerServingIPs(t, NodeIP, serviceIP)}, opts...)...)
	n.Env = env
	// Registered after the control plane's, so it runs before it stops:
	// the kubelet deletes its pods while the API server is up.
	t.Cleanup(n.stopProcesses)

	ca := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(ca, env.Config.CAData, 0o600); err != nil {
		t.Fatal(err)
	}
	kc := env.Kubeconfig
	port := freePort(t, "127.0.0.1")
	n.start("kube-scheduler", filepath.Join(bin, "kube-scheduler"), "--kubeconfig="+kc, "--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port="+port, "--cert-dir="+filepath.Join(dir, "scheduler"))
	n.waitHealthy("kube-scheduler", "https://127.0.0.1:"+port+"/healthz")
	port = freePort(t, "127.0.0.1")
	n.start("kube-controller-manager", filepath.Join(bin, "kube-controller-manager"), "--kubeconfig="+kc, "--leader-elect=false",
		"--bind-address=127.0.0.1", "--secure-port="+port, "--cert-dir="+filepath.Join(dir, "controller-manager"),
		"--service-account-private-key-file="+filepath.Join(env.CertDir(), "sa-signer.key"), "--root-ca-file="+ca,
		"--use-service-account-credentials=false")
	n.waitHealthy("kube-controller-manager", "https://127.0.0.1:"+port+"/healthz")

	if err := n.startContainerd(); err != nil {
		t.Fatalf("containerd: %v", err)
	}
	if err := n.startKubelet(); err != nil {
		t.Fatalf("kubelet: %v", err)
	}
	if err := n.startProxy(); err != nil {
		t.Fatalf("kube-proxy: %v", err)
	}
	return n
}

// lockPath serializes real nodes on this machine: they share the bridge
// name, the node address and the cgroup root.
const lockPath = "/tmp/podslo-realnode.lock"

// lockMachine waits until no other real node runs on this machine (another
// test binary, another checkout), and holds the lock until the test ends,
// after every other cleanup.
func lockMachine(t testing.TB) {
	t.Helper()
	f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatalf("open %s: %v", lockPath, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatalf("lock %s: %v", lockPath, err)
	}
	t.Cleanup(func() { f.Close() }) // closing releases the lock
}

// proc is a process the node runs, its output in a log file under dir.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

func (n *Node) start(name, bin string, args ...string) *proc {
	n.t.Helper()
	p := &proc{name: name, log: filepath.Join(n.dir, name+".log"), done: make(chan struct{})}
	f, err := os.Create(p.log)
	if err != nil {
		n.t.Fatalf("%s log: %v", name, err)
	}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	testenv.DieWithParent(p.cmd)
	if err := p.cmd.Start(); err != nil {
		f.Close()
		n.t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		f.Close()
		close(p.done)
	}()
	n.procs = append(n.procs, p)
	return p
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends SIGTERM, and SIGKILL after grace.
func (p *proc) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// tail is the end of p's log, for a failure message.
func (p *proc) tail() string {
	b, _ := os.ReadFile(p.log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return strings.Join(lines, "\n")
}

// poll calls ok every 100ms until it is true, p exits or d passes.
func (n *Node) poll(p *proc, what string, d time.Duration, ok func() bool) {
	n.t.Helper()
	errExited := errors.New("exited")
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, d, true, func(context.Context) (bool, error) {
		if ok() {
			return true, nil
		}
		if p != nil && p.exited() {
			return false, errExited
		}
		return false, nil
	})
	switch {
	case errors.Is(err, errExited):
		n.t.Fatalf("%s exited (%v) before %s:\n%s", p.name, p.err, what, p.tail())
	case err != nil:
		msg := ""
		if p != nil {
			msg = p.tail()
		}
		n.t.Fatalf("no %s within %v: %v\n%s", what, d, err, msg)
	}
}

func (n *Node) waitHealthy(name, url string) {
	n.t.Helper()
	// The components serve a self-signed certificate; only 200 matters.
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	n.poll(n.procs[len(n.procs)-1], name+" healthy", time.Minute, func() bool {
		resp, err := client.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

func (n *Node) startKubelet() error {
	n.t.Helper()
	root := filepath.Join(n.dir, "kubelet")
	port, healthz := freePort(n.t, NodeIP), freePort(n.t, "127.0.0.1")
	config := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
# The API server reaches the kubelet (logs, exec, its /metrics through the
# node proxy) on the node's own address.
address: %[1]s
port: %[2]s
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %[3]s
# The bridge is reachable from this machine and its pods only; the tests
# scrape the kubelet's /metrics through the API server's node proxy, and
# the test API server has no kubelet client certificate.
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix://%[4]s
# This host is on cgroup v1: without failCgroupV1 false the kubelet 1.35+
# exits ("kubelet is configured to not run on a host using cgroup v1").
failCgroupV1: false
# cgroupfs, as containerd's runc runtime here (SystemdCgroup false): there is
# no systemd to create slices, and with systemd the kubelet looks for
# podslo_realnode.slice ("invalid configuration: cgroup has some missing
# paths"). containerd 2 also tells the kubelet its driver (RuntimeConfig);
# the two agree.
cgroupDriver: cgroupfs
cgroupRoot: /%[5]s
failSwapOn: false
# No iptables chains of the kubelet's own on the host: they would outlive
# the test.
makeIPTablesUtilChains: false
podLogsDir: %[6]s
# The node's filesystems are this machine's, shared with everything else on
# it: the default thresholds (nodefs.available<10%%, imagefs.available<15%%)
# put a CI machine with a full-ish disk under DiskPressure, and the kubelet
# evicts the pods under test. Absolute thresholds evict only when the disk is
# really full. Image GC at the default 85%% would delete the images the
# tests imported offline, which no registry can give back.
evictionHard:
  memory.available: 100Mi
  nodefs.available: 512Mi
  nodefs.inodesFree: 1%%
  imagefs.available: 512Mi
  imagefs.inodesFree: 1%%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
volumePluginDir: %[7]s
`, NodeIP, port, healthz, n.Socket, cgroupRoot, filepath.Join(n.dir, "pod-logs"), filepath.Join(n.dir, "volume-plugins"))
	cfg := filepath.Join(n.dir, "kubelet.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		return err
	}
	p := n.start("kubelet", filepath.Join(n.bin, "kubelet"), "--config="+cfg, "--kubeconfig="+n.Kubeconfig,
		"--root-dir="+root, "--cert-dir="+filepath.Join(n.dir, "kubelet-pki"), "--hostname-override="+NodeName,
		"--node-ip="+NodeIP, "--v=2")
	n.poll(p, "node "+NodeName+" Ready", 2*time.Minute, func() bool {
		node, err := n.Client.CoreV1().Nodes().Get(context.Background(), NodeName, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue
			}
		}
		return false
	})
	return nil
}

// KillKubelet kills the kubelet with SIGKILL, as a crash would, and waits
// for it to exit; its pods keep running in containerd.
func (n *Node) KillKubelet() {
	n.t.Helper()
	for _, p := range n.procs {
		if p.name == "kubelet" {
			_ = p.cmd.Process.Kill()
			<-p.done
			return
		}
	}
	n.t.Fatal("no kubelet")
}

// KubeletMetrics is the kubelet's own /metrics, read through the API
// server's node proxy, as Prometheus reads it in a cluster.
func (n *Node) KubeletMetrics(ctx context.Context) ([]byte, error) {
	body, err := n.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", NodeName, "proxy", "metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("kubelet /metrics through the node proxy: %w: %s", err, body)
	}
	return body, nil
}

// freePort is a port free on host right now.
func freePort(t testing.TB, host string) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatalf("free port on %s: %v", host, err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

func readTrim(path string) string {
	b, _ := os.ReadFile(path)
	return strings.TrimSpace(string(b))
}

// repoRoot is the module root, found from this file's location.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}
