package provider

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

// drainDelay is how long an output pipe is read after the CLI has exited
// and its group was killed while nothing is left in it: only a process
// that escaped the group (setsid) can still hold it open.
const drainDelay = 2 * time.Second

// process is one turn's CLI. Its stdout and stderr are pipes fak owns
// (exec.Cmd copies none), so the CLI exiting never cuts its output short:
// everything it wrote before exiting is read. Its stdin is a pipe when
// the CLI takes input there (claude, codex), else /dev/null (gemini).
type process struct {
	p          *proc.Process
	kill       context.CancelFunc // kills the whole group
	stdin      *stdinWriter       // nil: /dev/null
	stdout     *outputPipe
	stderr     *tail
	stderrPipe *outputPipe
	stderrRead chan struct{} // closed once stderr is read to its end

	exited chan struct{} // closed once the CLI is reaped and its group killed
	killed bool          // kill was called before the CLI exited
	mu     sync.Mutex
}

// startProcess starts the CLI of s; ctx ending kills its group.
func startProcess(ctx context.Context, s proc.Spec, withStdin bool) (*process, error) {
	pctx, kill := context.WithCancel(ctx)
	p, err := proc.Command(pctx, s)
	if err != nil {
		kill()
		return nil, runner.Failf(ReasonRuntimeStart, "%v", err)
	}
	var ours, theirs []*os.File
	closeAll := func(fs []*os.File) {
		for _, f := range fs {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		if r, w, err = os.Pipe(); err == nil {
			ours, theirs = append(ours, r, w), append(theirs, r, w)
		}
		return r, w, err
	}
	outR, outW, err1 := pipe()
	errR, errW, err2 := pipe()
	var inR, inW *os.File
	var err3 error
	if withStdin {
		inR, inW, err3 = pipe()
	}
	if err := errors.Join(err1, err2, err3); err != nil {
		kill()
		closeAll(ours)
		return nil, err
	}
	p.Cmd.Stdout, p.Cmd.Stderr = outW, errW
	if withStdin {
		p.Cmd.Stdin = inR
	}
	err = p.Start()
	// The child has its own copies; ours would keep the pipes open.
	outW.Close()
	errW.Close()
	if inR != nil {
		inR.Close()
	}
	if err != nil {
		kill()
		outR.Close()
		errR.Close()
		if inW != nil {
			inW.Close()
		}
		return nil, runner.Failf(ReasonRuntimeStart, "cannot start %q: %v (install the CLI or name it in the runtime block's command)", s.Argv[0], err)
	}
	pr := &process{
		p: p, stdout: &outputPipe{f: outR}, stderr: &tail{}, stderrPipe: &outputPipe{f: errR},
		stderrRead: make(chan struct{}), exited: make(chan struct{}),
	}
	if inW != nil {
		pr.stdin = newStdinWriter(inW)
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

// Read reads the CLI's stdout.
func (pr *process) Read(b []byte) (int, error) { return pr.stdout.Read(b) }

// send queues b for the CLI's stdin (dropped when it has none).
func (pr *process) send(b []byte) {
	if pr.stdin != nil {
		pr.stdin.send(b)
	}
}

// closeStdin closes the CLI's stdin once everything sent is written.
func (pr *process) closeStdin() {
	if pr.stdin != nil {
		pr.stdin.close()
	}
}

// outputPipe is fak's end of an output pipe. It reads until every writer
// is gone (io.EOF) or, once the CLI has exited, until it stays empty for
// drainDelay.
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

// stop kills the group unless the CLI is already gone, waits for it, and
// releases the pipes. It is safe to call more than once.
func (pr *process) stop() {
	pr.kill()
	<-pr.exited
	if pr.stdin != nil {
		pr.stdin.abort()
	}
	pr.stdout.f.Close()
	<-pr.stderrRead
	pr.stderrPipe.f.Close()
}

// waitExit waits for the CLI to exit; after grace its group is killed. It
// reports whether the CLI exited by itself.
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

// pid is the CLI's process id, which is also its group's.
func (pr *process) pid() int { return pr.p.Pid() }

// exitStatus describes how the exited CLI ended: nil for status 0, else a
// RUNTIME_EXIT failure carrying the tail of its stderr (read to its end
// first).
func (pr *process) exitStatus(what string) error {
	<-pr.stderrRead
	st := pr.p.Cmd.ProcessState
	if st == nil {
		return runner.Failf(ReasonRuntimeExit, "%s: the process was not reaped", what)
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
		return runner.Failf(ReasonRuntimeExit, "%s: %s", status, t)
	}
	return runner.Failf(ReasonRuntimeExit, "%s (nothing on stderr)", status)
}
