package testenv

import (
	"os/exec"
	"syscall"
)

// DieWithParent makes cmd receive SIGKILL when the test binary dies, even
// by a panic that skips every t.Cleanup.
func DieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
