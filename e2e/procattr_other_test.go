//go:build !linux

package e2e

import "os/exec"

// killWithParent is a no-op where there is no parent-death signal; the
// t.Cleanup of each process still stops it.
func killWithParent(*exec.Cmd) {}
