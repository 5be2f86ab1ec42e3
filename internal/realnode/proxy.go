package realnode

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// startProxy starts kube-proxy in iptables mode, so that pods reach the API
// server through the kubernetes Service, as in a cluster.
func (n *Node) startProxy() error {
	n.t.Helper()
	healthz, metrics := freePort(n.t, "127.0.0.1"), freePort(n.t, "127.0.0.1")
	config := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %[1]q
hostnameOverride: %[2]s
mode: iptables
clusterCIDR: %[3]s
healthzBindAddress: 127.0.0.1:%[4]s
metricsBindAddress: 127.0.0.1:%[5]s
# NodePorts on the node's address only.
nodePortAddresses: [%[6]s/32]
# No host sysctl changes: zero leaves the conntrack settings alone, and
# without localhost NodePorts kube-proxy does not set route_localnet.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
iptables:
  localhostNodePorts: false
`, n.Kubeconfig, NodeName, podSubnet, healthz, metrics, NodeIP)
	cfg := filepath.Join(n.dir, "kube-proxy.yaml")
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		return err
	}
	p := n.start("kube-proxy", filepath.Join(n.bin, "kube-proxy"), "--config="+cfg, "--v=2")
	n.poll(p, "kube-proxy healthy", time.Minute, func() bool {
		resp, err := http.Get("http://127.0.0.1:" + healthz + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return nil
}

// cleanupProxyRules removes kube-proxy's iptables chains once it stopped:
// they live in the host's tables, and would outlive the test.
func (n *Node) cleanupProxyRules() {
	cmd := exec.Command(filepath.Join(n.bin, "kube-proxy"), "--cleanup", "--v=2")
	if out, err := cmd.CombinedOutput(); err != nil && len(proxyRules()) > 0 {
		n.t.Errorf("kube-proxy --cleanup: %v\n%s", err, out)
	}
}

// removeKubeRules removes every KUBE- rule and chain from the host's
// iptables and ip6tables, for what kube-proxy --cleanup does not own: the
// kubelet's KUBE-FIREWALL (INPUT and OUTPUT jumps), which it installs even
// with makeIPTablesUtilChains false. Only one real node runs at a time
// (lockMachine), and no other kubelet runs here, so every KUBE- chain is
// the node's.
func removeKubeRules() error {
	for _, family := range []string{"iptables", "ip6tables"} {
		b, err := exec.Command(family + "-save").Output()
		if err != nil {
			return fmt.Errorf("%s-save: %w", family, err)
		}
		table := ""
		var chains [][2]string
		for _, line := range strings.Split(string(b), "\n") {
			switch {
			case strings.HasPrefix(line, "*"):
				table = line[1:]
			case strings.HasPrefix(line, ":KUBE-"):
				chains = append(chains, [2]string{table, strings.Fields(line[1:])[0]})
			case strings.HasPrefix(line, "-A ") && strings.Contains(line, "KUBE-"):
				// Rules inside KUBE- chains go with their chain; a jump from a
				// built-in chain is deleted by its own spec.
				chain := strings.Fields(line)[1]
				if !strings.HasPrefix(chain, "KUBE-") {
					args := append([]string{"-t", table, "-D"}, strings.Fields(line[3:])...)
					if out, err := exec.Command(family, args...).CombinedOutput(); err != nil {
						return fmt.Errorf("%s %s: %w: %s", family, strings.Join(args, " "), err, out)
					}
				}
			}
		}
		for _, c := range chains {
			_ = exec.Command(family, "-t", c[0], "-F", c[1]).Run()
		}
		for _, c := range chains {
			if out, err := exec.Command(family, "-t", c[0], "-X", c[1]).CombinedOutput(); err != nil {
				return fmt.Errorf("%s -t %s -X %s: %w: %s", family, c[0], c[1], err, out)
			}
		}
	}
	return nil
}

// proxyRules lists the KUBE- chains and rules left in the host's iptables
// and ip6tables.
func proxyRules() []string {
	var out []string
	for _, save := range []string{"iptables-save", "ip6tables-save"} {
		b, err := exec.Command(save).Output()
		if err != nil {
			out = append(out, fmt.Sprintf("%s failed: %v", save, err))
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.Contains(line, "KUBE-") {
				out = append(out, save+": "+line)
			}
		}
	}
	return out
}
