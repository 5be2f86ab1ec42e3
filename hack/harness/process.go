package harness

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Process is a command the harness runs and supervises, such as an
// exporter under test: its output goes to a log file, it runs in a process
// group of its own (a Ctrl-C reaches the harness only, which stops it in
// order, and a signal to the group reaches its children), and it is
// SIGKILLed if the harness dies.
type Process struct {
	Cmd     *exec.Cmd
	Started time.Time

	done   chan struct{}
	exited time.Time
	err    error
}

// StartProcess starts cmd with its stdout and stderr in the file logPath,
// appended to when appendLog, else truncated. cmd.SysProcAttr may carry
// settings of its own (a cgroup); the process group and the death signal
// are added to them.
func StartProcess(cmd *exec.Cmd, logPath string, appendLog bool) (*Process, error) {
	flags := os.O_CREATE | os.O_WRONLY | os.O_TRUNC
	if appendLog {
		flags = os.O_CREATE | os.O_WRONLY | os.O_APPEND
	}
	logf, err := os.OpenFile(logPath, flags, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open the log of %s: %w", cmd.Path, err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid, cmd.SysProcAttr.Pdeathsig = true, syscall.SIGKILL
	p := &Process{Cmd: cmd, done: make(chan struct{})}
	p.Started = time.Now()
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	go func() {
		err := cmd.Wait()
		p.exited = time.Now()
		logf.Close()
		p.err = err
		close(p.done)
	}()
	return p, nil
}

// Done is closed once the process exited and its log is closed.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exit is when the process exited and what cmd.Wait returned; valid once
// Done is closed.
func (p *Process) Exit() (time.Time, error) {
	<-p.done
	return p.exited, p.err
}

// Signal sends sig to the process's group.
func (p *Process) Signal(sig syscall.Signal) error {
	return syscall.Kill(-p.Cmd.Process.Pid, sig)
}
