// Package testenv starts a real etcd and kube-apiserver, built from the Go
// module proxy by `make testbin`, for tests that cross the API.
package testenv

import (
	"fmt"
	"github.com/go-logr/logr"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// Env is a running control plane.
type Env struct {
	Config     *rest.Config
	Client     kubernetes.Interface
	Kubeconfig string

	env *envtest.Environment
}

// KillAPIServer kills kube-apiserver with SIGKILL, leaving etcd running, as
// in an API server crash. StartAPIServer brings it back on the same address
// with the same certificates, so clients reconnect as they would in a
// cluster. (envtest's own Stop is graceful and waits for open watches.)
func (e *Env) KillAPIServer(t testing.TB) {
	t.Helper()
	certDir := e.env.ControlPlane.GetAPIServer().CertDir
	procs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		t.Fatalf("list processes: %v", err)
	}
	for _, p := range procs {
		cmdline, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if filepath.Base(args[0]) != "kube-apiserver" || !strings.Contains(string(cmdline), certDir) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		proc, err := os.FindProcess(pid)
		if err == nil {
			err = proc.Signal(syscall.SIGKILL)
		}
		if err != nil {
			t.Fatalf("kill kube-apiserver %d: %v", pid, err)
		}
		return
	}
	t.Fatalf("no kube-apiserver process with cert dir %s", certDir)
}

// APIServerFlagUnset passes no such flag to kube-apiserver, not even
// envtest's default, e.g. "disable-admission-plugins": envtest disables
// the ServiceAccount admission plugin, so that pods get no service account
// token unless this unsets it.
func APIServerFlagUnset(name string) Option {
	return func(e *envtest.Environment) { e.ControlPlane.GetAPIServer().Configure().Disable(name) }
}

// CertDir is kube-apiserver's certificate directory. It holds the service
// account signing key (sa-signer.key) that a kube-controller-manager needs.
func (e *Env) CertDir() string { return e.env.ControlPlane.GetAPIServer().CertDir }

// StartAPIServer restarts a kube-apiserver killed by KillAPIServer.
func (e *Env) StartAPIServer(t testing.TB) {
	t.Helper()
	if err := e.env.ControlPlane.GetAPIServer().Start(); err != nil {
		t.Fatalf("restart kube-apiserver: %v", err)
	}
}

// repoRoot is the module root, found from this file's location.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// KubernetesVersion is the k8s.io/kubernetes version hack/tools pins, or
// $PODSLO_K8S_VERSION when set (the Makefile exports it).
func KubernetesVersion() (string, error) {
	// The version matrix (make test-versions) runs the tests against other
	// versions' binaries, and says which.
	if v := os.Getenv("PODSLO_K8S_VERSION"); v != "" {
		return v, nil
	}
	mod, err := os.ReadFile(filepath.Join(repoRoot(), "hack", "tools", "go.mod"))
	if err != nil {
		return "", err
	}
	m := kubernetesRequire.FindSubmatch(mod)
	if m == nil {
		return "", fmt.Errorf("k8s.io/kubernetes not required in hack/tools/go.mod")
	}
	return string(m[1]), nil
}

var kubernetesRequire = regexp.MustCompile(`(?m)^\s*(?:require\s+)?k8s\.io/kubernetes\s+(v\S+)`)

// BinDir is where `make testbin` puts the binaries: $PODSLO_TESTBIN, or
// $XDG_CACHE_HOME/podslo/testbin/<version> (~/.cache by default).
func BinDir() (string, error) {
	if d := os.Getenv("PODSLO_TESTBIN"); d != "" {
		return d, nil
	}
	v, err := KubernetesVersion()
	if err != nil {
		return "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(cache, "podslo", "testbin", v), nil
}

// Option configures the control plane Start runs.
type Option func(*envtest.Environment)

// APIServerFlag sets a kube-apiserver flag, such as
// APIServerFlag("feature-gates", "StrictIPCIDRValidation=false") to store
// what an older API server would have.
func APIServerFlag(name, value string) Option {
	return func(e *envtest.Environment) { e.ControlPlane.GetAPIServer().Configure().Set(name, value) }
}

// APIServerAddress serves kube-apiserver on host:port instead of a free
// loopback port; its serving certificate names host, and the kubernetes
// Service's endpoint is that address.
func APIServerAddress(host, port string) Option {
	return func(e *envtest.Environment) {
		s := e.ControlPlane.GetAPIServer()
		s.SecureServing.Address = host
		s.SecureServing.Port = port
	}
}

// Start starts etcd and kube-apiserver and stops them in t.Cleanup, also
// when the test fails. A missing binary fails the test: CI must never pass
// by skipping the real server. `go test -short` skips instead, on purpose.
func Start(t testing.TB, opts ...Option) *Env {
	t.Helper()
	if testing.Short() {
		t.Skip("integration test: needs etcd and kube-apiserver (run without -short)")
	}
	dir, err := BinDir()
	if err != nil {
		t.Fatalf("find test binaries: %v", err)
	}
	for _, bin := range []string{"etcd", "kube-apiserver"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			t.Fatalf("test binary %s missing in %s (run `make testbin`): %v", bin, dir, err)
		}
	}
	reapOrphans(t, dir)
	// envtest logs through controller-runtime's global logger, which warns
	// loudly when unset.
	ctrllog.SetLogger(logr.Discard())
	env := &envtest.Environment{BinaryAssetsDirectory: dir}
	// A fixed certificate directory survives a stop, so that StartAPIServer
	// serves the same certificates.
	env.ControlPlane.GetAPIServer().CertDir = t.TempDir()
	for _, o := range opts {
		o(env)
	}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start kube-apiserver and etcd from %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := writeKubeconfig(cfg, kubeconfig); err != nil {
		t.Fatalf("write kubeconfig: %v", err)
	}
	return &Env{Config: cfg, Client: client, Kubeconfig: kubeconfig, env: env}
}

func writeKubeconfig(cfg *rest.Config, path string) error {
	c := clientcmdapi.NewConfig()
	c.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	c.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	c.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	c.CurrentContext = "envtest"
	return clientcmd.WriteToFile(*c, path)
}

// envtestProcess matches the command lines envtest gives kube-apiserver
// (--cert-dir) and etcd (a k8s_test_framework_ data directory).
var envtestProcess = regexp.MustCompile(`--cert-dir=|k8s_test_framework_`)

// reapOrphans kills control-plane processes started from dir whose parent
// is gone: a test binary that panicked could not stop them, and envtest
// gives no way to make them die with it.
func reapOrphans(t testing.TB, dir string) {
	procs, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, p := range procs {
		stat, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		// The fields after the ")" closing the command name: state, ppid.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) < 2 || fields[1] != "1" {
			continue
		}
		exe, err := os.Readlink(filepath.Join(filepath.Dir(p), "exe"))
		if err != nil || filepath.Dir(exe) != dir {
			continue
		}
		// Only envtest's own: a kwok cluster (package demo, the end-to-end
		// tests) runs the same binaries detached on purpose, and may be
		// running right now in another package's test.
		cmdline, err := os.ReadFile(filepath.Join(filepath.Dir(p), "cmdline"))
		if err != nil || !envtestProcess.Match(cmdline) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
		if proc, err := os.FindProcess(pid); err == nil && proc.Signal(syscall.SIGKILL) == nil {
			t.Logf("killed orphaned %s (pid %d) left by an earlier crashed test run", exe, pid)
		}
	}
}

// PodsloBinary builds the podslo command into a temporary directory, for
// tests that must run it as a separate process (to kill it, say).
func PodsloBinary(t testing.TB) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "podslo")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = repoRoot()
	// As make test's builds outside -race: one compile of the dependencies
	// serves them all, also when this runs inside the race step.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build podslo: %v\n%s", err, out)
	}
	return bin
}

// ReleaseBinary builds podslo as it was at a released commit, for the
// upgrade tests: the source comes out of this repository's own history
// (git archive), so the test needs a clone with history, not a shallow one.
// The binary is cached by commit next to the control-plane binaries, since
// a commit always builds the same program.
func ReleaseBinary(t testing.TB, version, commit string) string {
	t.Helper()
	dir, err := BinDir()
	if err != nil {
		t.Fatalf("find test binaries: %v", err)
	}
	bin := filepath.Join(dir, "podslo-"+version+"-"+commit[:12])
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	src := t.TempDir()
	archive := exec.Command("git", "archive", "--format=tar", commit)
	archive.Dir = repoRoot()
	untar := exec.Command("tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		t.Fatalf("git archive: %v", err)
	}
	untar.Stdin = pipe
	var archiveErr strings.Builder
	archive.Stderr = &archiveErr
	if err := untar.Start(); err != nil {
		t.Fatalf("tar: %v", err)
	}
	if err := archive.Run(); err != nil {
		t.Fatalf("git archive %s (release %s; a shallow clone lacks it): %v: %s", commit, version, err, archiveErr.String())
	}
	if err := untar.Wait(); err != nil {
		t.Fatalf("untar release %s: %v", version, err)
	}
	build := exec.Command("go", "build", "-o", bin+".tmp", ".")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build podslo %s: %v\n%s", version, err, out)
	}
	if err := os.Rename(bin+".tmp", bin); err != nil {
		t.Fatalf("build podslo %s: %v", version, err)
	}
	return bin
}
