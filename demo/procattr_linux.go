package demo

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill the child when the demo dies, even
// by SIGKILL, so that no Prometheus outlives it.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
