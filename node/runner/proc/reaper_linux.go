//go:build linux

package proc

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The turn reaper is this same binary, started by each node (OpenGroups)
// as a child in its own process group: /proc/self/exe with argv[0]
// reaperName and reaperEnv set, which this package's init turns into
// runReaper before anything else runs. It reads the record directory and
// the node's run from its stdin, a pipe whose other end only the node's
// process holds; when the pipe ends — the node's process is gone,
// however it died, since the kernel closes a dead process's files, or
// the node closed it — it kills every group that run recorded, and exits. Tests get it too:
// a test binary that starts nodes links this package, so its init.
const (
	reaperName = "fak-turn-reaper" // also its comm: 15 bytes, the most there is
	reaperEnv  = "FAK_TURN_REAPER"
	reaperWire = "1"
	// reaperRestart is how long after an unexpected exit the reaper is
	// started again.
	reaperRestart = time.Second
)

func init() {
	if len(os.Args) == 1 && os.Args[0] == reaperName && os.Getenv(reaperEnv) == reaperWire {
		os.Exit(runReaper(os.Stdin))
	}
}

// runReaper serves as the reaper until in ends.
func runReaper(in io.Reader) int {
	// A terminal's Ctrl-C, a service manager's SIGTERM to the whole
	// cgroup: the reaper outlives them until the node itself is gone.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT)
	// init runs on the main thread, whose name ps and pkill show.
	name := []byte(reaperName + "\x00")
	_ = unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&name[0])), 0, 0, 0)
	// One line: watch "<dir>" <run>.
	var dir, run string
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "watch ")
		if !ok {
			continue
		}
		q, err := strconv.QuotedPrefix(rest)
		if err != nil {
			continue
		}
		dir, _ = strconv.Unquote(q)
		run = strings.TrimSpace(rest[len(q):])
	}
	if dir != "" && run != "" {
		sweepGroups(dir, bootID(), run)
	}
	return 0
}

// groupReaper runs the reaper of one node's records, and starts another
// when one is killed while the node lives.
type groupReaper struct {
	dir  string
	run  string
	stop chan struct{} // closed by close
	mu   sync.Mutex
	w    *os.File // the pipe to the running reaper; nil: none
	pid  int      // the running reaper's
}

// startReaper starts the reaper of run's records in dir.
func startReaper(dir, run string) (*groupReaper, error) {
	r := &groupReaper{dir: dir, run: run, stop: make(chan struct{})}
	cmd, err := r.spawn()
	if err != nil {
		return nil, err
	}
	go r.watch(cmd)
	return r, nil
}

// spawn starts a reaper process watching r.dir, unless r is closed.
func (r *groupReaper) spawn() (*exec.Cmd, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.stop:
		return nil, errors.New("turn reaper closed")
	default:
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("turn reaper: %w", err)
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{reaperName}
	// GORACE: a race-enabled build (tests) would linger a second at exit.
	cmd.Env = []string{reaperEnv + "=" + reaperWire, "GORACE=atexit_sleep_ms=0"}
	// Nothing but the pipe: a node's stdout or stderr held open by its
	// reaper would keep whoever reads them waiting.
	cmd.Stdin = pr
	// Its own group: a signal to the node's group leaves it running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	pr.Close()
	if err != nil {
		pw.Close()
		return nil, fmt.Errorf("cannot start the turn reaper: %w", err)
	}
	// The pipe's buffer holds the line long before it fills.
	if _, err := fmt.Fprintf(pw, "watch %s %s\n", strconv.Quote(r.dir), r.run); err != nil {
		pw.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("turn reaper: %w", err)
	}
	r.w, r.pid = pw, cmd.Process.Pid
	return cmd, nil
}

// watch waits for each reaper to exit and starts another, until close.
func (r *groupReaper) watch(cmd *exec.Cmd) {
	for {
		_ = cmd.Wait()
		r.mu.Lock()
		if r.w != nil {
			r.w.Close()
			r.w = nil
		}
		r.mu.Unlock()
		// Killed by someone while the node lives: start another.
		for cmd = nil; cmd == nil; {
			t := time.NewTimer(reaperRestart)
			select {
			case <-r.stop:
				t.Stop()
				return
			case <-t.C:
			}
			cmd, _ = r.spawn()
		}
	}
}

// close ends the reaper: it kills the groups still recorded, and exits.
// Nothing waits for that: a node closes it once its turns have ended.
func (r *groupReaper) close() {
	r.mu.Lock()
	select {
	case <-r.stop:
	default:
		close(r.stop)
	}
	if r.w != nil {
		r.w.Close()
		r.w = nil
	}
	r.mu.Unlock()
}
