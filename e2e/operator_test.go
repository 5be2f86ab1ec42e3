package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/podslo/podslo/charts"
	"github.com/podslo/podslo/demo"
	"github.com/podslo/podslo/internal/charttest"
	"github.com/podslo/podslo/internal/testenv"
)

// The monitoring stack of a cluster that runs the Prometheus Operator, as
// kube-prometheus-stack sets it up: the chart installed with `helm
// install`, the Operator turning its ServiceMonitor and PrometheusRules
// into a Prometheus' configuration, that Prometheus 3 scraping native
// histograms, and an Alertmanager it sends to, which notifies a webhook.
const (
	chartNamespace      = "podslo"
	monitoringNamespace = "monitoring"
	// promName is the Prometheus object's: the Operator names what it
	// generates after it (prometheus-<name>, prometheus-<name>-rulefiles-0).
	promName = "e2e"
	// routingTeam is the chart's monitoring.alertLabels, which every alert
	// must carry to Alertmanager.
	routingTeam = "platform"
	// extraSLO is an SLO of the chart's values (monitoring.extraSLOs), and
	// extraAlert its alert.
	extraSLO   = "kata_sandbox_creation_latency"
	extraAlert = "PodsloKataSandboxCreationLatencyBudgetBurn"
)

var prometheusResource = schema.GroupVersionResource{Group: "monitoring.coreos.com", Version: "v1", Resource: "prometheuses"}

// operatorStack is the Prometheus the Operator configured, and what its
// Alertmanager notified.
type operatorStack struct {
	prom prom
	hook *webhook
}

// startOperatorStack installs the Operator's CRDs and the chart into the
// demo's cluster, runs the Operator, and then Prometheus with exactly the
// configuration, rule files and flags the Operator generated for a
// Prometheus object, and an Alertmanager with alerts/alertmanager.yaml. The
// chart's pods are the simulator's: the monitors' targets are relabelled
// to the demo's exporter and agents (chart values); docs/testing.md says
// what else differs from a cluster.
func startOperatorStack(t *testing.T, ep demo.Endpoints, promListen, amListen, operatorListen string) operatorStack {
	t.Helper()
	ctx := context.Background()
	cfg, err := clientcmd.BuildConfigFromFlags("", ep.Kubeconfig)
	require.NoError(t, err)
	c, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	dir := t.TempDir()
	tlsFiles := apiServerTLSFiles(t, cfg, dir)

	crds, err := filepath.Glob(filepath.Join(testenv.PrometheusOperatorCRDs(t), "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, crds)
	testenv.InstallCRDs(t, cfg, crds...)

	hook := startWebhook(t)
	startAlertmanager(t, hook.url, amListen)

	// The Operator, on the cluster's API server as its own client.
	testenv.StartCommand(t, "prometheus-operator", exec.Command(testenv.PrometheusOperator(t),
		"--apiserver="+cfg.Host, "--ca-file="+tlsFiles.ca, "--cert-file="+tlsFiles.cert, "--key-file="+tlsFiles.key,
		"--web.listen-address="+operatorListen, "--namespaces="+monitoringNamespace+","+chartNamespace))

	// The chart, with the monitoring objects on: the API server serves
	// the Operator's kinds now, so it renders them.
	for _, ns := range []string{chartNamespace, monitoringNamespace} {
		_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	createChartVolume(t, c)
	values := filepath.Join(dir, "values.yaml")
	require.NoError(t, os.WriteFile(values, []byte(fmt.Sprintf(`exporter:
  persistence:
    storageClassName: podslo-state
  # The e2e's ground truth is its own namespace's NetworkPolicies.
  networkPolicies:
    enabled: false
  serviceMonitor:
    interval: 5s
    relabelings:
      # The simulator's pods have addresses nothing listens on: scrape
      # the demo's exporter instead.
      - action: replace
        targetLabel: __address__
        replacement: %q
agent:
  enabled: true
  podMonitor:
    interval: 5s
    # Each node's agent pod is scraped at the demo's agent of that node.
    relabelings:%s
monitoring:
  alertLabels:
    team: %s
  # An SLO of the chart's values: kata's sandboxes (10 s to 15 s in the
  # simulator) held to 20s, which they meet while the 5s SLO pages.
  extraSLOs:
    %s:
      from: sandbox_creation_latency
      alert: %s
      title: kata sandbox creation latency
      matchers: ['runtime_class="kata"']
      objective: 95
      threshold: 20s
`, ep.Exporter, agentRelabelings(ep.Agents), routingTeam, extraSLO, extraAlert)), 0o644))
	out, err := charts.Run(charttest.Helm(t), "install", "podslo", charts.ChartDir(), "--namespace", chartNamespace,
		"--kubeconfig", ep.Kubeconfig, "--values", values)
	require.NoError(t, err, "helm install: %s", out)

	// A Prometheus object as kube-prometheus-stack makes one, selecting
	// every ServiceMonitor and PrometheusRule, outside the cluster (its
	// API server and certificates given), scraping native histograms, with
	// the version of the Prometheus it runs.
	release, err := testenv.PrometheusRelease()
	require.NoError(t, err)
	require.NoError(t, createSecret(ctx, c, "alertmanagers", map[string]string{"alertmanagers.yaml": fmt.Sprintf("- api_version: v2\n  static_configs:\n    - targets: [%q]\n", amListen)}))
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "monitoring.coreos.com/v1", "kind": "Prometheus",
		"metadata": map[string]any{"name": promName, "namespace": monitoringNamespace},
		"spec": map[string]any{
			"version":                         release,
			"scrapeInterval":                  "5s",
			"evaluationInterval":              "5s",
			"scrapeNativeHistograms":          true,
			"serviceMonitorSelector":          map[string]any{},
			"serviceMonitorNamespaceSelector": map[string]any{},
			"podMonitorSelector":              map[string]any{},
			"podMonitorNamespaceSelector":     map[string]any{},
			"ruleSelector":                    map[string]any{},
			"ruleNamespaceSelector":           map[string]any{},
			"apiserverConfig": map[string]any{
				"host":      cfg.Host,
				"tlsConfig": map[string]any{"caFile": tlsFiles.ca, "certFile": tlsFiles.cert, "keyFile": tlsFiles.key},
			},
			"additionalAlertManagerConfigs": map[string]any{"name": "alertmanagers", "key": "alertmanagers.yaml"},
		},
	}}
	_, err = dyn.Resource(prometheusResource).Namespace(monitoringNamespace).Create(ctx, obj, metav1.CreateOptions{})
	require.NoError(t, err)

	// What the Operator generated: the configuration, the rule files, the
	// StatefulSet's flags.
	var config []byte
	var args []string
	rules := map[string]map[string]string{}
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		s, err := c.CoreV1().Secrets(monitoringNamespace).Get(ctx, "prometheus-"+promName, metav1.GetOptions{})
		require.NoError(ct, err)
		config, err = gunzip(s.Data["prometheus.yaml.gz"])
		require.NoError(ct, err)
		// The rule files, once both PrometheusRules are in them.
		cms, err := c.CoreV1().ConfigMaps(monitoringNamespace).List(ctx, metav1.ListOptions{LabelSelector: "prometheus-name=" + promName})
		require.NoError(ct, err)
		n := 0
		for _, cm := range cms.Items {
			rules[cm.Name] = cm.Data
			n += len(cm.Data)
		}
		require.Equal(ct, 2, n, "rule files")
		sts, err := c.AppsV1().StatefulSets(monitoringNamespace).Get(ctx, "prometheus-"+promName, metav1.GetOptions{})
		require.NoError(ct, err)
		args = nil
		for _, ctr := range sts.Spec.Template.Spec.Containers {
			if ctr.Name == "prometheus" {
				args = ctr.Args
			}
		}
		require.NotEmpty(ct, args)
		assert.Contains(ct, string(config), "job_name: serviceMonitor/"+chartNamespace+"/")
	}, 2*time.Minute, time.Second, "the Operator generated no configuration with podslo's ServiceMonitor and rules")

	// The Operator carried the ServiceMonitor's and the PodMonitor's
	// scrapeClassicHistograms into their jobs, and the Prometheus
	// object's scrapeNativeHistograms.
	var generated struct {
		Global        map[string]any
		ScrapeConfigs []map[string]any `json:"scrape_configs"`
	}
	require.NoError(t, yaml.Unmarshal(config, &generated))
	jobs := 0
	for _, job := range generated.ScrapeConfigs {
		name, _ := job["job_name"].(string)
		if !strings.HasPrefix(name, "serviceMonitor/"+chartNamespace+"/") && !strings.HasPrefix(name, "podMonitor/"+chartNamespace+"/") {
			continue
		}
		jobs++
		assert.Equal(t, true, job["always_scrape_classic_histograms"], "job %s keeps no classic histograms", name)
		native := job["scrape_native_histograms"]
		if native == nil {
			native = generated.Global["scrape_native_histograms"]
		}
		assert.Equal(t, true, native, "job %s scrapes no native histograms", name)
	}
	assert.Equal(t, 2, jobs, "the chart's jobs in the generated configuration:\n%s", config)
	t.Logf("The Operator's configuration:\n%s", config)

	// The pod's files, where its volumes would mount them: /etc/prometheus
	// becomes dir/etc. The config reloader expands the pod's name.
	etc := filepath.Join(dir, "etc")
	local := strings.NewReplacer("/etc/prometheus/", etc+"/", "$(POD_NAME)", "prometheus-"+promName+"-0", "$(SHARD)", "0")
	require.NoError(t, os.MkdirAll(filepath.Join(etc, "config_out"), 0o755))
	configFile := filepath.Join(etc, "config_out", "prometheus.env.yaml")
	require.NoError(t, os.WriteFile(configFile, []byte(local.Replace(string(config))), 0o644))
	for name, files := range rules {
		d := filepath.Join(etc, "rules", name)
		require.NoError(t, os.MkdirAll(d, 0o755))
		for f, text := range files {
			require.NoError(t, os.WriteFile(filepath.Join(d, f), []byte(text), 0o644))
		}
	}
	if web, err := c.CoreV1().Secrets(monitoringNamespace).Get(ctx, "prometheus-"+promName+"-web-config", metav1.GetOptions{}); err == nil {
		require.NoError(t, os.MkdirAll(filepath.Join(etc, "web_config"), 0o755))
		for f, b := range web.Data {
			require.NoError(t, os.WriteFile(filepath.Join(etc, "web_config", f), b, 0o600))
		}
	}
	var flags []string
	for _, a := range args {
		switch name, _, _ := strings.Cut(a, "="); name {
		case "--config.file":
			a = "--config.file=" + configFile
		case "--storage.tsdb.path":
			a = "--storage.tsdb.path=" + filepath.Join(dir, "data")
		case "--web.listen-address":
			continue
		}
		flags = append(flags, local.Replace(a))
	}
	t.Logf("The Operator's Prometheus flags: %q", flags)
	testenv.StartCommand(t, "prometheus (Operator)", exec.Command(testenv.Prometheus(t), append(flags, "--web.listen-address="+promListen)...))
	p := prom{base: "http://" + promListen}
	testenv.WaitHTTP(t, p.base+"/-/ready", "the Operator's Prometheus")
	// It found the chart's exporter through the Service's endpoints, and
	// sends to the Alertmanager.
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		up := p.query(ct, `up{job="podslo-exporter"} == 1`)
		assert.Len(ct, up, 1, "the exporter's target, found through the ServiceMonitor")
		up = p.query(ct, `up{job="podslo-agent"} == 1`)
		assert.Len(ct, up, len(ep.Agents), "the agents' targets, found through the PodMonitor")
		var body struct {
			Data struct{ ActiveAlertmanagers []struct{ URL string } }
		}
		getJSON(ct, p.base+"/api/v1/alertmanagers", &body)
		assert.Len(ct, body.Data.ActiveAlertmanagers, 1)
	}, 2*time.Minute, time.Second, "the Operator's Prometheus scrapes no exporter or knows no Alertmanager")
	return operatorStack{prom: p, hook: hook}
}

// agentRelabelings point each node's agent target at the demo's agent of
// that node, as PodMonitor relabelings (YAML, indented for the values).
func agentRelabelings(agents []string) string {
	var b strings.Builder
	for i, a := range agents {
		fmt.Fprintf(&b, "\n      - sourceLabels: [__meta_kubernetes_pod_node_name]\n        regex: %q\n        targetLabel: __address__\n        replacement: %q", demo.NodeName(i), a)
	}
	return b.String()
}

// tlsFiles are the API server's CA and the client's certificate and key.
type tlsFiles struct{ ca, cert, key string }

// apiServerTLSFiles returns cfg's TLS files, writing those it holds inline
// into dir.
func apiServerTLSFiles(t *testing.T, cfg *rest.Config, dir string) tlsFiles {
	t.Helper()
	file := func(path string, data []byte, name string) string {
		if path != "" {
			return path
		}
		require.NotEmpty(t, data, "the kubeconfig has no %s", name)
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, data, 0o600))
		return p
	}
	return tlsFiles{
		ca:   file(cfg.CAFile, cfg.CAData, "ca.crt"),
		cert: file(cfg.CertFile, cfg.CertData, "client.crt"),
		key:  file(cfg.KeyFile, cfg.KeyData, "client.key"),
	}
}

// createChartVolume gives the chart's exporter its state volume: a
// PersistentVolume of a class no provisioner serves, as on a cluster
// without dynamic provisioning.
func createChartVolume(t *testing.T, c kubernetes.Interface) {
	t.Helper()
	_, err := c.CoreV1().PersistentVolumes().Create(context.Background(), &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: "podslo-state"},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:               corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")},
			AccessModes:            []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName:       "podslo-state",
			PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/lib/podslo"}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
}

func createSecret(ctx context.Context, c kubernetes.Interface, name string, data map[string]string) error {
	_, err := c.CoreV1().Secrets(monitoringNamespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: monitoringNamespace}, StringData: data,
	}, metav1.CreateOptions{})
	return err
}

func gunzip(b []byte) ([]byte, error) {
	r, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

func getJSON(t require.TestingT, url string, v any) {
	helper(t)
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, url)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
}

// startAlertmanager runs Alertmanager with alerts/alertmanager.yaml, its
// receiver "platform" notifying hook, and its grouping timers shortened
// from minutes to seconds: the test sees a notification, and its
// resolution, as an operator would minutes later.
func startAlertmanager(t *testing.T, hook, listen string) {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "alerts", "alertmanager.yaml"))
	require.NoError(t, err)
	var cfg map[string]any
	require.NoError(t, yaml.Unmarshal(raw, &cfg))
	route := cfg["route"].(map[string]any)
	for _, r := range route["routes"].([]any) {
		r := r.(map[string]any)
		r["group_wait"], r["group_interval"] = "5s", "10s"
	}
	found := false
	for _, r := range cfg["receivers"].([]any) {
		r := r.(map[string]any)
		if r["name"] == "platform" {
			r["webhook_configs"] = []any{map[string]any{"url": hook, "send_resolved": true}}
			found = true
		}
	}
	require.True(t, found, "alerts/alertmanager.yaml has no receiver platform")
	out, err := yaml.Marshal(cfg)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "alertmanager.yaml")
	require.NoError(t, os.WriteFile(path, out, 0o644))
	testenv.StartCommand(t, "alertmanager", exec.Command(testenv.Alertmanager(t), "--config.file="+path, "--storage.path="+t.TempDir(),
		"--web.listen-address="+listen, "--cluster.listen-address="))
	testenv.WaitHTTP(t, "http://"+listen+"/-/ready", "alertmanager")
}

// notifiedAlert is one alert of an Alertmanager webhook notification.
type notifiedAlert struct {
	Status string
	Labels map[string]string
}

// webhook records Alertmanager's notifications.
type webhook struct {
	url string
	mu  sync.Mutex
	got []notifiedAlert
}

func startWebhook(t *testing.T) *webhook {
	t.Helper()
	w := &webhook{}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var n struct {
			Receiver string
			Alerts   []notifiedAlert
		}
		if err := json.NewDecoder(r.Body).Decode(&n); err != nil {
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		w.mu.Lock()
		w.got = append(w.got, n.Alerts...)
		w.mu.Unlock()
	}))
	l, err := net.Listen("tcp", host+":0")
	require.NoError(t, err)
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	w.url = srv.URL
	return w
}

// notified returns the alerts notified so far with status and every label
// of labels.
func (w *webhook) notified(status string, labels map[string]string) []notifiedAlert {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []notifiedAlert
next:
	for _, a := range w.got {
		if a.Status != status {
			continue
		}
		for k, v := range labels {
			if a.Labels[k] != v {
				continue next
			}
		}
		out = append(out, a)
	}
	return out
}
