package e2e

import (
	"os/exec"
	"syscall"
)

// killWithParent makes the kernel SIGKILL cmd's process if the test process
// dies first (say, killed by go test -timeout), so no agent outlives it.
func killWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
