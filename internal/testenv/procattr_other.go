//go:build !linux

package testenv

import "os/exec"

// DieWithParent is a no-op where the OS has no parent-death signal.
func DieWithParent(*exec.Cmd) {}
