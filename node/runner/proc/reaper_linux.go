//go:build linux

package proc

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The turn reaper is this same binary, started once per process as a
// child in its own process group: /proc/self/exe with argv[0]
// reaperName and reaperEnv set, which this package's init turns into
// runReaper before anything else runs. It reads the record directories
// to watch from its stdin, a pipe whose other end only the node's
// process holds; when the pipe ends — the node's process is gone,
// however it died, since the kernel closes a dead process's files — it
// sweeps them (kills every recorded group) and exits. Tests get it too:
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
	var dirs []string
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		q, ok := strings.CutPrefix(sc.Text(), "watch ")
		if !ok {
			continue
		}
		if d, err := strconv.Unquote(q); err == nil {
			dirs = append(dirs, d)
		}
	}
	boot := bootID()
	for _, d := range dirs {
		sweepGroups(d, boot)
	}
	return 0
}

// reaper is this process's reaper, started by the first watchGroups.
var reaper struct {
	mu   sync.Mutex
	w    *os.File // the pipe to it; nil while none runs
	dirs []string // every directory watched, sent again to a restarted reaper
}

// watchGroups has the process's reaper watch dir, starting it if need be.
func watchGroups(dir string) error {
	reaper.mu.Lock()
	defer reaper.mu.Unlock()
	if slices.Contains(reaper.dirs, dir) && reaper.w != nil {
		return nil
	}
	if !slices.Contains(reaper.dirs, dir) {
		reaper.dirs = append(reaper.dirs, dir)
	}
	if reaper.w == nil {
		return startReaperLocked()
	}
	if _, err := fmt.Fprintf(reaper.w, "watch %s\n", strconv.Quote(dir)); err != nil {
		return fmt.Errorf("turn reaper: %w", err)
	}
	return nil
}

// startReaperLocked starts the reaper and sends it every directory.
func startReaperLocked() error {
	r, w, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("turn reaper: %w", err)
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{reaperName}
	cmd.Env = []string{reaperEnv + "=" + reaperWire}
	// Nothing but the pipe: a node's stdout or stderr held open by its
	// reaper would keep whoever reads them waiting.
	cmd.Stdin = r
	// Its own group: a signal to the node's group leaves it running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	err = cmd.Start()
	r.Close()
	if err != nil {
		w.Close()
		return fmt.Errorf("cannot start the turn reaper: %w", err)
	}
	for _, d := range reaper.dirs {
		// The pipe's buffer holds these long before it fills.
		if _, err := fmt.Fprintf(w, "watch %s\n", strconv.Quote(d)); err != nil {
			w.Close()
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return fmt.Errorf("turn reaper: %w", err)
		}
	}
	reaper.w = w
	go func() {
		_ = cmd.Wait()
		// Killed by someone: the node lives, so start another.
		reaper.mu.Lock()
		reaper.w = nil
		w.Close()
		reaper.mu.Unlock()
		time.Sleep(reaperRestart)
		reaper.mu.Lock()
		if reaper.w == nil {
			_ = startReaperLocked()
		}
		reaper.mu.Unlock()
	}()
	return nil
}
