// Command sleeper is both the sandbox ("pause") image and the container
// image of the real-node tests, built offline: it waits for SIGTERM or
// SIGINT and exits 0, as the pause container does.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// As PID 1 of its namespace, it gets only the signals it handles.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
