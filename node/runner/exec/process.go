package exec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fak-dev/fak/node/runner"
	"github.com/fak-dev/fak/node/runner/proc"
)

// drainDelay is how long an output pipe is read after the process has
// exited and its group was killed while nothing is left in it: only a
// process that escaped the group (setsid) can still hold it open.
const drainDelay = 2 * time.Second

// process is one turn's running command. Its stdin, stdout and stderr are
// pipes fak owns (exec.Cmd copies none), so the process exiting never
// cuts its output short: everything it wrote before exiting is read.
type process struct {
	p          *proc.Process
	kill       context.CancelFunc // kills the whole group
	stdin      *stdinWriter
	stdout     *outputPipe
	stderr     *tail
	stderrPipe *outputPipe
	stderrRead chan struct{} // closed once stderr is read to its end

	exited chan struct{} // closed once the process is reaped and its group killed
	killed bool          // kill was called before the process exited
	mu     sync.Mutex
}

// startProcess starts the command of s; ctx ending kills its group.
func startProcess(ctx context.Context, s proc.Spec) (*process, error) {
	pctx, kill := context.WithCancel(ctx)
	p, err := proc.Command(pctx, s)
	if err != nil {
		kill()
		return nil, runner.Failf(ReasonExecStart, "%v", err)
	}
	var ends []*os.File // the child's ends, then ours
	closeAll := func() {
		for _, f := range ends {
			f.Close()
		}
	}
	for range 3 {
		r, w, err := os.Pipe()
		if err != nil {
			kill()
			closeAll()
			return nil, err
		}
		ends = append(ends, r, w)
	}
	inR, inW, outR, outW, errR, errW := ends[0], ends[1], ends[2], ends[3], ends[4], ends[5]
	p.Cmd.Stdin, p.Cmd.Stdout, p.Cmd.Stderr = inR, outW, errW
	err = p.Start()
	// The child has its own copies; ours would keep the pipes open.
	inR.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		kill()
		inW.Close()
		outR.Close()
		errR.Close()
		return nil, runner.Failf(ReasonExecStart, "cannot start %q: %v", s.Argv[0], err)
	}
	pr := &process{
		p: p, stdin: newStdinWriter(inW),
		stdout: &outputPipe{f: outR}, stderr: newTail(), stderrPipe: &outputPipe{f: errR},
		stderrRead: make(chan struct{}), exited: make(chan struct{}),
	}
	pr.kill = func() {
		pr.mu.Lock()
		select {
		case <-pr.exited:
		default:
			pr.killed = true
		}
		pr.mu.Unlock()
		kill()
	}
	go func() {
		defer close(pr.stderrRead)
		_, _ = io.Copy(pr.stderr, pr.stderrPipe)
	}()
	go func() {
		_ = p.Wait() // the exit status is read from ProcessState
		kill()
		// The group is dead: its pipes end once empty, unless an
		// escaped process holds them.
		pr.stdout.exited()
		pr.stderrPipe.exited()
		pr.mu.Lock()
		close(pr.exited)
		pr.mu.Unlock()
	}()
	return pr, nil
}

// Read reads the process's stdout.
func (pr *process) Read(b []byte) (int, error) { return pr.stdout.Read(b) }

// outputPipe is fak's end of an output pipe. It reads until every writer
// is gone (io.EOF) or, once the process has exited, until it stays empty
// for drainDelay.
type outputPipe struct{ f *os.File }

func (o *outputPipe) exited() { _ = o.f.SetReadDeadline(time.Now().Add(drainDelay)) }

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
		if err := o.f.SetReadDeadline(time.Now().Add(drainDelay)); err != nil {
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

// stop kills the group unless the process is already gone, waits for
// it, and releases the pipes. It is safe to call more than once.
func (pr *process) stop() {
	pr.kill()
	<-pr.exited
	pr.stdin.abort()
	pr.stdout.f.Close()
	<-pr.stderrRead
	pr.stderrPipe.f.Close()
}

// waitExit waits for the process to exit; after grace its group is
// killed. It reports whether the process exited by itself.
func (pr *process) waitExit(grace time.Duration) bool {
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-pr.exited:
	case <-t.C:
		pr.kill()
		<-pr.exited
	}
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return !pr.killed
}

// pid is the process's id, which is also its group's.
func (pr *process) pid() int { return pr.p.Pid() }

// exitStatus describes how the exited process ended: nil for status 0,
// else an EXIT_STATUS failure carrying the tail of its stderr (read to
// its end first).
func (pr *process) exitStatus(what string) error {
	<-pr.stderrRead
	st := pr.p.Cmd.ProcessState
	if st == nil {
		return runner.Failf(ReasonExitStatus, "%s: the process was not reaped", what)
	}
	if st.Success() {
		return nil
	}
	status := fmt.Sprintf("exit status %d", st.ExitCode())
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		status = "killed by signal " + ws.Signal().String()
	}
	if what != "" {
		status += " " + what
	}
	if t := pr.stderr.String(); t != "" {
		return runner.Failf(ReasonExitStatus, "%s: %s", status, t)
	}
	return runner.Failf(ReasonExitStatus, "%s (nothing on stderr)", status)
}
