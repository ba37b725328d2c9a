//go:build unix

package guard

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// forwardedSignals are caught by the guard (so they do not end it while its
// child runs) and passed on to the child. SIGTSTP, SIGTTIN, SIGTTOU and
// SIGCONT are not caught: job control stops and continues the guard and the
// child together, as one process group.
var forwardedSignals = []os.Signal{
	syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
	syscall.SIGWINCH, syscall.SIGUSR1, syscall.SIGUSR2,
}

// shouldForward says whether the child needs sig from the guard. The child
// shares the guard's process group, so the signals a terminal sends to its
// foreground process group (Ctrl-C, Ctrl-\, a window resize) reach the child
// directly when the guard runs in the foreground; forwarding those again
// would deliver them twice (and a second Ctrl-C quits some harnesses).
func shouldForward(sig os.Signal) bool {
	switch sig {
	case syscall.SIGINT, syscall.SIGQUIT, syscall.SIGWINCH:
		return !inForeground()
	}
	return true
}

// inForeground reports whether this process's group is the foreground
// process group of its terminal: the one on stdin, stdout or stderr, else
// the controlling terminal.
func inForeground() bool {
	for fd := 0; fd <= 2; fd++ {
		if pgrp, err := unix.IoctlGetInt(fd, unix.TIOCGPGRP); err == nil {
			return pgrp == unix.Getpgrp()
		}
	}
	tty, err := os.Open("/dev/tty")
	if err != nil {
		return false // no controlling terminal: nothing delivers them twice
	}
	defer tty.Close()
	pgrp, err := unix.IoctlGetInt(int(tty.Fd()), unix.TIOCGPGRP)
	return err == nil && pgrp == unix.Getpgrp()
}
