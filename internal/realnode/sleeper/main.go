// Command sleeper is both the sandbox ("pause") image and the container
// image of the real-node tests, built offline: it waits for SIGTERM or
// SIGINT and exits 0, as the pause container does. With the argument
// "apiserver" it instead asks the API server for /version through the
// kubernetes Service, and exits 0 once it answered. With the argument
// "ignore-term" it ignores SIGTERM, so that only the kubelet's SIGKILL at
// the end of the grace period ends it. "sleep DURATION" sleeps and exits 0:
// a preStop exec hook that takes that long. "fail-between FROM TO" (Unix
// milliseconds) exits 1 from FROM until TO and 0 otherwise: an exec
// readiness probe that fails for a while and recovers.
//
// Run by containerd as a CNI plugin (CNI_COMMAND set), it is instead the
// chained plugin "podslo-delay": it passes the previous plugin's result on,
// after sleeping for the configured delay when the pod's name starts with
// the configured prefix. That makes a real sandbox as slow as a test needs
// (a slow CNI IP allocation, say), so that an exporter can be killed and
// restarted between a pod's scheduling and its sandbox.
package main

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

func main() {
	if cmd := os.Getenv("CNI_COMMAND"); cmd != "" {
		os.Exit(delayPlugin(cmd))
	}
	if len(os.Args) > 1 && os.Args[1] == "apiserver" {
		os.Exit(askAPIServer())
	}
	if len(os.Args) > 2 && os.Args[1] == "sleep" {
		d, err := time.ParseDuration(os.Args[2])
		if err != nil {
			fmt.Println(err)
			os.Exit(2)
		}
		time.Sleep(d)
		return
	}
	if len(os.Args) > 3 && os.Args[1] == "fail-between" {
		os.Exit(failBetween(os.Args[2], os.Args[3]))
	}
	// As PID 1 of its namespace, it gets only the signals it handles.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	if len(os.Args) > 1 && os.Args[1] == "ignore-term" {
		// Handled, not ignored: waiting on the channel keeps the Go
		// runtime from taking an idle main for a deadlock.
		for s := range stop {
			fmt.Println("ignoring", s)
		}
	}
	<-stop
}

// failBetween is 1 from the Unix millisecond from until to, else 0; 2 for
// arguments that do not parse.
func failBetween(from, to string) int {
	var f, u int64
	if _, err := fmt.Sscan(from, &f); err != nil {
		fmt.Println(err)
		return 2
	}
	if _, err := fmt.Sscan(to, &u); err != nil {
		fmt.Println(err)
		return 2
	}
	if now := time.Now().UnixMilli(); now >= f && now < u {
		fmt.Println("failing until", time.UnixMilli(u).UTC().Format(time.RFC3339Nano))
		return 1
	}
	return 0
}

// askAPIServer proves the pod reaches the API server at the address the
// kubelet gives every pod for the kubernetes Service.
func askAPIServer() int {
	addr := net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT"))
	// The test pods mount no service account (and so no CA): any answer
	// proves the route, kube-proxy's rules and the server.
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := client.Get("https://" + addr + "/version")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Printf("%s %s\n%s\n", addr, resp.Status, body)
	return 0
}

// delayPlugin is the CNI plugin "podslo-delay" (see the package comment).
// Its configuration adds podNamePrefix and delay (a Go duration) to the
// network's.
func delayPlugin(command string) int {
	switch command {
	case "VERSION":
		fmt.Println(`{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0"]}`)
		return 0
	case "ADD":
	default:
		// DEL, CHECK, GC, STATUS: nothing of its own to undo or check.
		return 0
	}
	var conf struct {
		CNIVersion    string          `json:"cniVersion"`
		PodNamePrefix string          `json:"podNamePrefix"`
		Delay         string          `json:"delay"`
		PrevResult    json.RawMessage `json:"prevResult"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&conf); err != nil {
		return cniError(fmt.Sprintf("podslo-delay: decode the configuration: %v", err))
	}
	for _, kv := range strings.Split(os.Getenv("CNI_ARGS"), ";") {
		name, ok := strings.CutPrefix(kv, "K8S_POD_NAME=")
		if !ok || conf.PodNamePrefix == "" || !strings.HasPrefix(name, conf.PodNamePrefix) {
			continue
		}
		d, err := time.ParseDuration(conf.Delay)
		if err != nil {
			return cniError(fmt.Sprintf("podslo-delay: delay %q: %v", conf.Delay, err))
		}
		time.Sleep(d)
	}
	if len(conf.PrevResult) == 0 {
		return cniError("podslo-delay: no prevResult: chain it after a plugin that makes one")
	}
	os.Stdout.Write(conf.PrevResult)
	return 0
}

// cniError writes a CNI error result and returns the exit code for it.
func cniError(msg string) int {
	b, _ := json.Marshal(map[string]any{"cniVersion": "1.0.0", "code": 999, "msg": msg})
	os.Stdout.Write(b)
	return 1
}
