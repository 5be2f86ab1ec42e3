package alerts

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podslo/podslo/internal/testenv"
)

// TestAlertmanagerExample: alertmanager.yaml, the grouping the README
// advises, on a real Alertmanager. One SLO's page for a RuntimeClass and
// for a StorageClass of one cluster is one group on the platform
// receiver; the page holds back the ticket of the same SLO until it
// resolves.
func TestAlertmanagerExample(t *testing.T) {
	out, err := exec.Command(testenv.Amtool(t), "check-config", "alertmanager.yaml").CombinedOutput()
	require.NoError(t, err, "amtool check-config:\n%s", out)
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	example, err := os.ReadFile("alertmanager.yaml")
	require.NoError(t, err)
	assert.True(t, strings.Contains(string(readme), "```yaml\n"+exampleBody(example)+"\n```"), "the README shows alerts/alertmanager.yaml as it is")

	url := startAlertmanager(t, "alertmanager.yaml")
	const alert = "PodsloSandboxCreationLatencyBudgetBurn"
	page := func(class, value string) map[string]string {
		return map[string]string{"alertname": alert, "cluster": "prod", "severity": "critical", "long": "1h", "short": "5m", class: value}
	}
	ticket := map[string]string{"alertname": alert, "cluster": "prod", "severity": "warning", "long": "1d", "short": "2h", "runtime_class": "kata"}
	other := map[string]string{"alertname": "PodsloExporterDown", "severity": "warning"}
	now := time.Now()
	postAlerts(t, url, now.Add(time.Hour), page("runtime_class", "kata"), page("storage_class", "ebs"), ticket, other)

	type groupAlert struct {
		Labels map[string]string `json:"labels"`
		Status struct {
			State       string   `json:"state"`
			InhibitedBy []string `json:"inhibitedBy"`
		} `json:"status"`
	}
	type group struct {
		Labels   map[string]string     `json:"labels"`
		Receiver struct{ Name string } `json:"receiver"`
		Alerts   []groupAlert          `json:"alerts"`
	}
	// Alertmanager's dispatcher groups what it received on its own
	// goroutine: the groups come a moment after the POST.
	assert.EventuallyWithT(t, func(c *assert.CollectT) {
		var groups []group
		getJSON(c, url+"/api/v2/alerts/groups?inhibited=false", &groups)
		var got []string
		for _, g := range groups {
			var classes []string
			for _, a := range g.Alerts {
				classes = append(classes, a.Labels["runtime_class"]+a.Labels["storage_class"]+"/"+a.Labels["severity"])
			}
			slices.Sort(classes)
			got = append(got, fmt.Sprintf("%s %s %v", g.Receiver.Name, g.Labels["alertname"], classes))
		}
		slices.Sort(got)
		assert.Equal(c, []string{
			"platform PodsloExporterDown [/warning]",
			"platform " + alert + " [ebs/critical kata/critical]",
		}, got, "one group per SLO and cluster, the ticket held back")
	}, 10*time.Second, 50*time.Millisecond)

	ticketAlert := func(c require.TestingT) groupAlert {
		var alerts []groupAlert
		getJSON(c, url+"/api/v2/alerts?filter=severity%3D%22warning%22&filter=alertname%3D%22"+alert+"%22", &alerts)
		require.Len(c, alerts, 1)
		return alerts[0]
	}
	a := ticketAlert(t)
	assert.Equal(t, "suppressed", a.Status.State)
	assert.NotEmpty(t, a.Status.InhibitedBy)

	// The pages resolve: the ticket is no longer held back.
	postAlerts(t, url, now.Add(-time.Second), page("runtime_class", "kata"), page("storage_class", "ebs"))
	assert.EventuallyWithT(t, func(c *assert.CollectT) { assert.Equal(c, "active", ticketAlert(c).Status.State) }, 10*time.Second, 100*time.Millisecond)
}

// exampleBody is the example without its comment header.
func exampleBody(b []byte) string {
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

// startAlertmanager runs Alertmanager with config on a free loopback port,
// without its cluster listener, until the test ends; it returns its URL.
func startAlertmanager(t *testing.T, config string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	cfg, err := filepath.Abs(config)
	require.NoError(t, err)
	// Killed when the test ends, and with the test binary.
	testenv.StartCommand(t, "alertmanager", exec.Command(testenv.Alertmanager(t), "--config.file="+cfg, "--storage.path="+t.TempDir(),
		"--web.listen-address="+addr, "--cluster.listen-address="))
	url := "http://" + addr
	testenv.WaitHTTP(t, url+"/-/ready", "alertmanager")
	return url
}

// postAlerts sends alerts as Prometheus does, each ending at ends.
func postAlerts(t *testing.T, url string, ends time.Time, alerts ...map[string]string) {
	t.Helper()
	type postable struct {
		Labels   map[string]string `json:"labels"`
		StartsAt time.Time         `json:"startsAt"`
		EndsAt   time.Time         `json:"endsAt"`
	}
	var body []postable
	for _, a := range alerts {
		body = append(body, postable{Labels: a, StartsAt: ends.Add(-2 * time.Hour), EndsAt: ends})
	}
	b, err := json.Marshal(body)
	require.NoError(t, err)
	resp, err := http.Post(url+"/api/v2/alerts", "application/json", bytes.NewReader(b))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

func getJSON(t require.TestingT, url string, v any) {
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, url)
	require.NoError(t, json.NewDecoder(resp.Body).Decode(v))
}
