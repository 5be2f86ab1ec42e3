// Command sleeper is both the sandbox ("pause") image and the container
// image of the real-node tests, built offline: it waits for SIGTERM or
// SIGINT and exits 0, as the pause container does. With the argument
// "apiserver" it instead asks the API server for /version through the
// kubernetes Service, and exits 0 once it answered. With the argument
// "ignore-term" it ignores SIGTERM, so that only the kubelet's SIGKILL at
// the end of the grace period ends it. "sleep DURATION" sleeps and exits 0:
// a preStop exec hook that takes that long.
package main

import (
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
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
