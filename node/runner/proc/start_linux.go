//go:build linux

package proc

import (
	"os/exec"
	"runtime"
	"sync"
	"syscall"
)

// dieWithNode has the kernel SIGKILL the process when the node dies, even
// when nothing else is left to kill it (the reaper gone too). It reaches
// only the process itself; the rest of its group is the reaper's.
func dieWithNode(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }

// The parent-death signal fires when the thread that forked the child
// exits, not the process (prctl(2), golang/go#27505). Go forks from
// whichever thread runs the goroutine, and ends a thread when a goroutine
// locked to it (LockOSThread) exits without unlocking; a thread exit
// would then kill a turn whose node lives. Go ends no thread otherwise,
// but a library may lock one, so every process is started from one
// goroutine locked to its thread for the life of the process: a thread
// that exits only with it.
var forker struct {
	once sync.Once
	reqs chan forkRequest
}

type forkRequest struct {
	cmd  *exec.Cmd
	done chan error
}

// startFromLockedThread starts cmd from the forking thread.
func startFromLockedThread(cmd *exec.Cmd) error {
	forker.once.Do(func() {
		forker.reqs = make(chan forkRequest)
		go func() {
			runtime.LockOSThread() // never unlocked
			for r := range forker.reqs {
				r.done <- r.cmd.Start()
			}
		}()
	})
	done := make(chan error, 1)
	forker.reqs <- forkRequest{cmd: cmd, done: done}
	return <-done
}
