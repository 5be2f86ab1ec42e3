package agent

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/podslo/podslo/internal/testenv"
)

// agentEnv is the test's environment without anything that names a node,
// plus extra.
func agentEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "NODE_NAME=") && !strings.HasPrefix(kv, "PODSLO_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// TestCommand runs the built `podslo agent` as a DaemonSet would, to check
// the command line wiring end to end: NODE_NAME, the clear error without
// it, /readyz, and a clean exit on SIGTERM.
func TestCommand(t *testing.T) {
	env := testenv.Start(t)
	bin := testenv.PodsloBinary(t)

	t.Run("no node name", func(t *testing.T) {
		cmd := exec.Command(bin, "agent", "--kubeconfig", env.Kubeconfig)
		cmd.Env = agentEnv()
		testenv.DieWithParent(cmd)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit)
		assert.Equal(t, 1, exit.ExitCode())
		assert.Equal(t, "podslo: --node-name is required: set it, or the NODE_NAME environment variable (a DaemonSet sets it from spec.nodeName)\n", stderr.String())
	})

	for _, tc := range []struct {
		name     string
		args     []string
		env      []string
		wantNode string
		// wantProbe is the probe settings the agent logs at start:
		// condition type, min period, max workers.
		wantProbe string
	}{
		{name: "NODE_NAME, as from the downward API", env: []string{"NODE_NAME=node-a"}, wantNode: "node-a"},
		{name: "PODSLO_NODE_NAME beats NODE_NAME", env: []string{"NODE_NAME=node-a", "PODSLO_NODE_NAME=node-b"}, wantNode: "node-b"},
		{name: "the flag beats both", args: []string{"--node-name", "node-c"}, env: []string{"NODE_NAME=node-a", "PODSLO_NODE_NAME=node-b"}, wantNode: "node-c"},
		{
			name: "probe flags", env: []string{"NODE_NAME=node-a", "PODSLO_MAX_PROBE_WORKERS=9"}, wantNode: "node-a",
			args:      []string{"--probe-condition-type", "example.com/Gate", "--min-probe-period", "250ms"},
			wantProbe: "example.com/Gate 250ms 9",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"agent", "--kubeconfig", env.Kubeconfig, "--listen-address", "127.0.0.1:0", "--log-format", "json"}, tc.args...)
			cmd := exec.Command(bin, args...)
			cmd.Env = agentEnv(tc.env...)
			testenv.DieWithParent(cmd)
			stderr, err := cmd.StderrPipe()
			require.NoError(t, err)
			require.NoError(t, cmd.Start())
			type serving struct {
				Msg, Address, Node string
				ProbeConditionType string
				MinProbePeriod     time.Duration
				MaxProbeWorkers    int
			}
			started := make(chan serving, 1)
			done := make(chan struct{})
			var logs bytes.Buffer
			go func() {
				defer close(done)
				sc := bufio.NewScanner(stderr)
				for sc.Scan() {
					logs.WriteString(sc.Text() + "\n")
					var line serving
					if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == "Serving metrics" {
						started <- line
					}
				}
				_ = cmd.Wait()
			}()
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				<-done
				if t.Failed() {
					t.Logf("agent logs:\n%s", logs.String())
				}
			})
			var line serving
			select {
			case line = <-started:
			case <-done:
				t.Fatal("agent exited before serving")
			case <-time.After(30 * time.Second):
				t.Fatal("agent did not serve within 30s")
			}
			assert.Equal(t, tc.wantNode, line.Node)
			if tc.wantProbe == "" {
				tc.wantProbe = fmt.Sprintf("%s %s %d", DefaultProbeConditionType, DefaultMinProbePeriod, DefaultMaxProbeWorkers)
			}
			assert.Equal(t, tc.wantProbe, fmt.Sprintf("%s %s %d", line.ProbeConditionType, line.MinProbePeriod, line.MaxProbeWorkers))
			require.Eventually(t, func() bool {
				resp, err := http.Get("http://" + line.Address + "/readyz")
				if err != nil {
					return false
				}
				resp.Body.Close()
				return resp.StatusCode == http.StatusOK
			}, 30*time.Second, 20*time.Millisecond, "agent never became ready")

			require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("agent did not stop within 30s of SIGTERM")
			}
			assert.Equal(t, 0, cmd.ProcessState.ExitCode(), "exit code after SIGTERM")
		})
	}
}
