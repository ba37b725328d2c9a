//go:build !linux

package proc

import (
	"os/exec"
	"syscall"
)

// dieWithNode: there is no parent-death signal off Linux.
func dieWithNode(*syscall.SysProcAttr) {}

func startFromLockedThread(cmd *exec.Cmd) error { return cmd.Start() }
