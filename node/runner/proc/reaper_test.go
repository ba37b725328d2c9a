//go:build linux

package proc

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fak-dev/fak/node/runner/proc/proctest"
)

// nodeDirEnv makes TestHelperNode a stand-in for a node: it records its
// turn groups under the directory it names and runs one turn there;
// unrecordedEnv has it run the turn without recording its group.
const (
	nodeDirEnv    = "FAK_PROC_TEST_NODE_DIR"
	unrecordedEnv = "FAK_PROC_TEST_UNRECORDED"
)

// TestHelperNode is the node process of TestReaperKillsTurnsWhenTheNodeDies;
// run by go test, it does nothing.
func TestHelperNode(t *testing.T) {
	dir := os.Getenv(nodeDirEnv)
	if dir == "" {
		return
	}
	g, err := OpenGroups(filepath.Join(dir, "turns"))
	if err != nil || g.ReaperErr() != nil {
		t.Fatalf("open groups: %v, reaper: %v", err, g.ReaperErr())
	}
	if os.Getenv(unrecordedEnv) != "" {
		g = nil
	}
	p, err := Command(context.Background(), Spec{Argv: []string{"sh", "-c", backgroundScript}, Dir: dir, Env: Env(), Groups: g})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	_ = p.Wait() // until the test kills this process
}

// startHelperNode starts TestHelperNode with env and returns it and the
// pids of its turn.
func startHelperNode(t *testing.T, env ...string) (*exec.Cmd, []int) {
	t.Helper()
	dir := t.TempDir()
	node := exec.Command(os.Args[0], "-test.run=^TestHelperNode$", "-test.count=1")
	node.Env = append(append(os.Environ(), nodeDirEnv+"="+dir), env...)
	node.Stderr = os.Stderr
	// Dies with the test, should the test die first.
	node.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := node.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = node.Process.Kill(); _ = node.Wait() })
	pids := proctest.ReadPids(t, filepath.Join(dir, "pids"))
	t.Cleanup(func() { _ = syscall.Kill(-pids[0], syscall.SIGKILL) }) // whatever outlived a failed test
	return node, pids
}

// A node's process SIGKILLed during a turn leaves none of the turn's
// processes: the leader dies of its parent-death signal, its child in
// the background of the reaper.
func TestReaperKillsTurnsWhenTheNodeDies(t *testing.T) {
	node, pids := startHelperNode(t)
	killed := time.Now()
	if err := node.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = node.Wait()
	wantDeadWithin(t, pids, 2*time.Second)
	t.Logf("the turn's %d processes were gone %s after the node's SIGKILL", len(pids), time.Since(killed).Round(time.Millisecond))
}

// Unrecorded (no reaper to kill its group), a turn's leader still dies
// with its node: the parent-death signal. Its child lives on until the
// node's next start; the test's cleanup kills it.
func TestLeaderDiesWithItsNode(t *testing.T) {
	node, pids := startHelperNode(t, unrecordedEnv+"=1")
	if err := node.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = node.Wait()
	wantDeadWithin(t, pids[:1], 2*time.Second)
}

// wantDeadWithin fails unless every pid is gone within d.
func wantDeadWithin(t *testing.T, pids []int, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for _, pid := range pids {
		for !proctest.Gone(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("process %d of the turn outlived its node by %s", pid, d)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
}

// A process started by a goroutine whose thread then exits lives on: the
// parent-death signal follows the thread that forks, and a goroutine that
// returns while locked to its thread takes the thread with it.
func TestProcessOutlivesTheThreadThatStartedIt(t *testing.T) {
	p, err := Command(context.Background(), Spec{Argv: []string{"sleep", "300"}, Dir: t.TempDir(), Env: Env()})
	if err != nil {
		t.Fatal(err)
	}
	tids := make(chan int, 1)
	tid := 0
	for range 1000 {
		go func() {
			runtime.LockOSThread()
			if unix.Gettid() == unix.Getpid() {
				// The main thread never exits (it is wedged instead): try
				// another.
				runtime.UnlockOSThread()
				tids <- 0
				return
			}
			// Never unlocked: the thread ends with this goroutine.
			if err := p.Start(); err != nil {
				t.Error(err)
			}
			tids <- unix.Gettid()
		}()
		if tid = <-tids; tid != 0 {
			break
		}
	}
	if tid == 0 || p.Cmd.Process == nil {
		t.Fatal("no thread but the main one to start the process from")
	}
	proctest.WaitFor(t, "the locked thread to exit", func() bool {
		_, err := os.Stat("/proc/self/task/" + strconv.Itoa(tid))
		return errors.Is(err, os.ErrNotExist)
	})
	// The thread sent its parent-death signal, if any, before it was
	// gone; a SIGKILL then decided how the process ends before this
	// SIGTERM arrives.
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	err = p.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Fatalf("the process ended with %v, want SIGTERM: the exit of the thread that started it killed it", err)
	}
}

// A reaper killed while its node lives is replaced.
func TestReaperKilledIsStartedAgain(t *testing.T) {
	g, err := OpenGroups(t.TempDir())
	if err != nil || g.ReaperErr() != nil {
		t.Fatalf("open groups: %v, reaper: %v", err, g.ReaperErr())
	}
	t.Cleanup(g.Close)
	pid := func() (int, bool) {
		g.reaper.mu.Lock()
		defer g.reaper.mu.Unlock()
		return g.reaper.pid, g.reaper.w != nil
	}
	first, _ := pid()
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	proctest.WaitFor(t, "another reaper", func() bool {
		p, running := pid()
		return running && p != first
	})
	next, _ := pid()
	if st, err := readProcStat(next); err != nil || st.pgrp != next {
		t.Fatalf("the new reaper %d: %+v %v, want it leading its own group", next, st, err)
	}
}

// The reaper of a node's previous run, sweeping as the node starts again
// with the same records, leaves the new run's groups alone.
func TestReaperKillsOnlyItsRunsGroups(t *testing.T) {
	turns := t.TempDir()
	previous, err := OpenGroups(turns)
	if err != nil || previous.ReaperErr() != nil {
		t.Fatalf("open groups: %v, reaper: %v", err, previous.ReaperErr())
	}
	next, err := OpenGroups(turns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(next.Close)
	p, err := Command(context.Background(), Spec{Argv: []string{"sleep", "300"}, Dir: t.TempDir(), Env: Env(), Groups: next})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	previous.reaper.mu.Lock()
	reaper := previous.reaper.pid
	previous.reaper.mu.Unlock()
	previous.Close()
	proctest.WaitFor(t, "the previous run's reaper to sweep and exit", func() bool { return proctest.Gone(reaper) })
	// A SIGKILL from that sweep would have decided how the process ends
	// before this SIGTERM arrives.
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	err = p.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Fatalf("the new run's process ended with %v, want SIGTERM: the previous run's reaper killed it", err)
	}
}
