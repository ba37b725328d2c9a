package proc

import (
	"context"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/fak-dev/fak/node/runner"
)

// Piped is one turn's running process. Its stdout and stderr are pipes
// fak owns (exec.Cmd copies none), so the process exiting never cuts its
// output short: everything it wrote before exiting is read. Its stdin is
// a pipe written in order by its own goroutine (StartOptions.Stdin), else
// /dev/null. Read reads its stdout; the tail of its stderr goes into
// ExitStatus's failure.
type Piped struct {
	p          *Process
	kill       context.CancelFunc // kills the whole group
	stdin      *stdinWriter       // nil: /dev/null
	stdout     *outputPipe
	stderr     *tail
	stderrPipe *outputPipe
	stderrRead chan struct{} // closed once stderr is read to its end

	exited chan struct{} // closed once the process is reaped and its group killed
	killed bool          // kill was called before the process exited
	mu     sync.Mutex
}

// StartOptions say how Start connects a process and reports that it
// could not start.
type StartOptions struct {
	// Stdin makes stdin a pipe (Send, CloseStdin); else it is /dev/null.
	Stdin bool
	// Reason is the runner.TurnError reason of a Spec refused or a
	// command that cannot be started: each runtime names its own.
	Reason string
	// Hint, when set, follows in parentheses why the command cannot be
	// started: what the node's operator can do about it.
	Hint string
}

// Start starts the command of s with pipes fak owns; ctx ending kills its
// group. A refused Spec or a command that cannot be started is a
// runner.TurnError with o.Reason.
func Start(ctx context.Context, s Spec, o StartOptions) (*Piped, error) {
	pctx, kill := context.WithCancel(ctx)
	p, err := Command(pctx, s)
	if err != nil {
		kill()
		return nil, runner.Failf(o.Reason, "%v", err)
	}
	n := 2
	if o.Stdin {
		n = 3
	}
	var ends []*os.File // read end, write end: stdout, stderr, then stdin
	for range n {
		r, w, err := os.Pipe()
		if err != nil {
			kill()
			closeFiles(ends)
			return nil, err
		}
		ends = append(ends, r, w)
	}
	outR, outW, errR, errW := ends[0], ends[1], ends[2], ends[3]
	p.Cmd.Stdout, p.Cmd.Stderr = outW, errW
	ours, theirs := []*os.File{outR, errR}, []*os.File{outW, errW}
	var inW *os.File
	if o.Stdin {
		inR := ends[4]
		inW = ends[5]
		p.Cmd.Stdin = inR
		ours, theirs = append(ours, inW), append(theirs, inR)
	}
	err = p.Start()
	// The child has its own copies; ours would keep the pipes open.
	closeFiles(theirs)
	if err != nil {
		kill()
		closeFiles(ours)
		msg := fmt.Sprintf("cannot start %q: %v", s.Argv[0], err)
		if o.Hint != "" {
			msg += " (" + o.Hint + ")"
		}
		return nil, runner.Failf(o.Reason, "%s", msg)
	}
	pr := &Piped{
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

func closeFiles(fs []*os.File) {
	for _, f := range fs {
		f.Close()
	}
}

// Read reads the process's stdout.
func (pr *Piped) Read(b []byte) (int, error) { return pr.stdout.Read(b) }

// Send queues b for the process's stdin (dropped when it has none).
func (pr *Piped) Send(b []byte) {
	if pr.stdin != nil {
		pr.stdin.send(b)
	}
}

// CloseStdin closes the process's stdin once everything sent is written.
func (pr *Piped) CloseStdin() {
	if pr.stdin != nil {
		pr.stdin.close()
	}
}

// Kill kills the group unless the process has already exited. It does
// not wait: Exited tells when the process is gone.
func (pr *Piped) Kill() { pr.kill() }

// Exited is closed once the process is reaped and its group killed.
func (pr *Piped) Exited() <-chan struct{} { return pr.exited }

// Stop kills the group unless the process is already gone, waits for
// it, and releases the pipes. It is safe to call more than once.
func (pr *Piped) Stop() {
	pr.kill()
	<-pr.exited
	if pr.stdin != nil {
		pr.stdin.abort()
	}
	pr.stdout.f.Close()
	<-pr.stderrRead
	pr.stderrPipe.f.Close()
}

// WaitExit waits for the process to exit; after grace its group is
// killed. It reports whether the process exited by itself.
func (pr *Piped) WaitExit(grace time.Duration) bool {
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

// Pid is the process's id, which is also its group's.
func (pr *Piped) Pid() int { return pr.p.Pid() }

// ExitStatus describes how the exited process ended: nil for status 0,
// else a runner.TurnError with reason (each runtime names its own)
// carrying the tail of its stderr, read to its end first. what, when set,
// follows the status: when the process exited ("after done").
func (pr *Piped) ExitStatus(reason, what string) error {
	<-pr.stderrRead
	st := pr.p.Cmd.ProcessState
	if st == nil {
		return runner.Failf(reason, "%s: the process was not reaped", what)
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
		return runner.Failf(reason, "%s: %s", status, t)
	}
	return runner.Failf(reason, "%s (nothing on stderr)", status)
}
