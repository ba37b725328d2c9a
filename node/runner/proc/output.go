package proc

import (
	"errors"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// DrainDelay is how long an output pipe of a Piped process is read after
// the process has exited and its group was killed while nothing is left
// in it: only a process that escaped the group (setsid) can still hold it
// open, and it must not hold the turn.
const DrainDelay = 2 * time.Second

// outputPipe is fak's end of an output pipe. It reads until every writer
// is gone (io.EOF) or, once the process has exited, until it stays empty
// for DrainDelay.
type outputPipe struct{ f *os.File }

func (o *outputPipe) exited() { _ = o.f.SetReadDeadline(time.Now().Add(DrainDelay)) }

func (o *outputPipe) Read(b []byte) (int, error) {
	for {
		n, err := o.f.Read(b)
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return n, err
		}
		// A past deadline fails reads even with data waiting: read what
		// is there, and stop only at an empty pipe.
		if pending(o.f) == 0 {
			return n, io.EOF
		}
		if err := o.f.SetReadDeadline(time.Now().Add(DrainDelay)); err != nil {
			return n, err
		}
	}
}

// pending is the number of bytes waiting in a pipe (FIONREAD, which is
// TIOCINQ on Linux).
func pending(f *os.File) int {
	conn, err := f.SyscallConn()
	if err != nil {
		return 0
	}
	n := 0
	_ = conn.Control(func(fd uintptr) {
		n, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ)
	})
	return n
}
