// Package proc starts the processes a runtime runs for a session (an exec
// agent, a model's shell tool, a provider CLI): each in its own process
// group, with a clean environment, optionally inside a bubblewrap sandbox,
// and never outliving its turn: cancelling the context kills the whole
// group, and so does the end of the process itself (a child it left in
// the background dies with it). Nor does it outlive its node: Groups
// records each group so that the node's reaper kills it when the
// node's process dies, and the node's next start if the reaper died too.
//
// Command prepares a process whose streams the caller connects. Start
// runs a turn's process with pipes fak owns (Piped): its stdin written
// without blocking the turn, its stdout read to the end even after it
// exits (LineReader splits it into bounded lines), the tail of its stderr
// kept for the failure it reports. TimedTurn bounds a whole turn.
package proc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Sandbox modes of a runtime block.
const (
	SandboxNone  = "none"
	SandboxBwrap = "bwrap"
)

// waitDelay bounds how long Wait waits for the pipes of a killed process
// to close (a grandchild holding them open).
const waitDelay = 2 * time.Second

// CheckSandbox refuses a sandbox mode this node cannot run: an unknown
// one, or bwrap without bubblewrap installed. A runtime checks its block's
// mode when the node starts, rather than failing every turn.
func CheckSandbox(mode string) error {
	switch mode {
	case "", SandboxNone:
	case SandboxBwrap:
		if _, err := exec.LookPath("bwrap"); err != nil {
			return fmt.Errorf("sandbox %q needs bubblewrap installed (Debian: apt-get install bubblewrap)", mode)
		}
	default:
		return fmt.Errorf("unknown sandbox %q (write %q or %q)", mode, SandboxNone, SandboxBwrap)
	}
	return nil
}

// Spec describes one process.
type Spec struct {
	Argv []string
	// Dir is the working directory: the session's workspace, the only
	// writable place inside a sandbox.
	Dir string
	// Env is the whole environment (see Env): nothing of the node's own
	// environment is inherited.
	Env []string
	// Sandbox is "" or SandboxNone (run as the node's user, seeing what
	// it sees), or SandboxBwrap.
	Sandbox string
	// Hide lists paths a sandbox makes invisible: the node's data dir,
	// its tokens file, TLS keys. Directories are replaced by an empty
	// tmpfs, files by an empty file.
	Hide []string
	// Groups, when set, records the process's group while it runs, so
	// that it dies with the node (the node's turn records; nil: the
	// process still gets the parent-death signal, its children do not).
	Groups *Groups
}

// Process is a started process and its group.
type Process struct {
	Cmd    *exec.Cmd
	groups *Groups
}

// Command prepares the process; the caller sets Stdin/Stdout/Stderr (or
// takes pipes) and calls Start. ctx ending kills the whole group.
func Command(ctx context.Context, s Spec) (*Process, error) {
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return nil, errors.New("no command")
	}
	argv := s.Argv
	if s.Sandbox == SandboxBwrap {
		var err error
		if argv, err = bwrapArgv(s); err != nil {
			return nil, err
		}
	} else if s.Sandbox != "" && s.Sandbox != SandboxNone {
		return nil, fmt.Errorf("unknown sandbox %q (want %q or %q)", s.Sandbox, SandboxNone, SandboxBwrap)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = s.Dir
	cmd.Env = s.Env
	if cmd.Env == nil {
		cmd.Env = []string{}
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	dieWithNode(cmd.SysProcAttr)
	p := &Process{Cmd: cmd, groups: s.Groups}
	cmd.Cancel = p.killGroup
	cmd.WaitDelay = waitDelay
	return p, nil
}

// Start starts the process and records its group. A group that cannot
// be recorded could outlive the node: it is killed, and Start fails.
func (p *Process) Start() error {
	if err := startFromLockedThread(p.Cmd); err != nil {
		return err
	}
	if p.groups == nil {
		return nil
	}
	if err := p.groups.add(p.Cmd.Process.Pid); err != nil {
		_ = p.killGroup()
		_ = p.Cmd.Wait()
		return fmt.Errorf("cannot record its process group: %w", err)
	}
	return nil
}

// Wait waits for the process, then kills what is left of its group: no
// process of a turn survives it.
func (p *Process) Wait() error {
	if p.Cmd.Process != nil {
		// Block until the process exits without reaping it, kill its
		// group, then reap: a child holding stdout open would otherwise
		// keep Cmd.Wait waiting for its I/O.
		var info unix.Siginfo
		for {
			err := unix.Waitid(unix.P_PID, p.Cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if err != unix.EINTR {
				break
			}
		}
		_ = p.killGroup()
	}
	err := p.Cmd.Wait()
	_ = p.killGroup()
	if p.groups != nil && p.Cmd.Process != nil {
		p.groups.remove(p.Cmd.Process.Pid)
	}
	return err
}

// Pid is the process id, which is also its group's id.
func (p *Process) Pid() int {
	if p.Cmd.Process == nil {
		return 0
	}
	return p.Cmd.Process.Pid
}

func (p *Process) killGroup() error {
	if p.Cmd.Process == nil {
		return nil
	}
	err := syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// passThrough are the node's environment variables a runtime process
// keeps: what a program needs to find tools and speak the locale. Tokens,
// account keys and everything else stay behind.
var passThrough = []string{"PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ"}

// Env builds a clean environment: the pass-through variables of the
// node's environment, then extra ("KEY=VALUE", later ones win).
func Env(extra ...string) []string {
	var env []string
	for _, k := range passThrough {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	if _, ok := os.LookupEnv("PATH"); !ok {
		env = append(env, "PATH=/usr/local/bin:/usr/bin:/bin")
	}
	return append(env, extra...)
}

// bwrapArgv wraps s.Argv in bubblewrap: the host's filesystem read-only,
// a private /tmp, /dev and /proc, the hidden paths masked, and the
// workspace bound read-write (last, so it stays visible inside a hidden
// data dir). The process gets its own pid namespace and dies with fak.
func bwrapArgv(s Spec) ([]string, error) {
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		return nil, errors.New(`sandbox "bwrap" needs bubblewrap installed (Debian: apt-get install bubblewrap)`)
	}
	if s.Dir == "" || !filepath.IsAbs(s.Dir) {
		return nil, fmt.Errorf("sandbox needs an absolute workspace, not %q", s.Dir)
	}
	argv := []string{bwrap,
		"--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
		"--unshare-pid", "--unshare-ipc", "--die-with-parent", "--new-session"}
	for _, h := range s.Hide {
		if h == "" {
			continue
		}
		fi, err := os.Stat(h)
		switch {
		case err != nil:
			continue // nothing there to hide
		case fi.IsDir():
			argv = append(argv, "--tmpfs", h)
		default:
			argv = append(argv, "--ro-bind", "/dev/null", h)
		}
	}
	argv = append(argv, "--bind", s.Dir, s.Dir, "--chdir", s.Dir, "--")
	return append(argv, s.Argv...), nil
}
