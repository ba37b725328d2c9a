package proc

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"

	"github.com/fak-dev/fak/node/runner/proc/proctest"
)

// backgroundScript leaves a child in the background and records the
// shell's pid and the child's in the file pids.
const backgroundScript = `sleep 300 & echo $$ $! > pids.tmp && mv pids.tmp pids; wait`

// startGroup starts backgroundScript as its own group leader, as a
// previous run of the node did, and returns it and its pids.
func startGroup(t *testing.T, dir string) (*exec.Cmd, []int) {
	t.Helper()
	cmd := exec.Command("sh", "-c", backgroundScript)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	return cmd, proctest.ReadPids(t, filepath.Join(dir, "pids"))
}

func records(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// A group a previous run of the node recorded and left running is killed
// when the node starts again, the leader and its child.
func TestOpenGroupsKillsAGroupAPreviousRunLeft(t *testing.T) {
	work, turns := t.TempDir(), t.TempDir()
	g, err := OpenGroups(turns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	p, err := Command(context.Background(), Spec{Argv: []string{"sh", "-c", backgroundScript}, Dir: work, Env: Env(), Groups: g})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Wait() }) // kills the group
	pids := proctest.ReadPids(t, filepath.Join(work, "pids"))
	if got := records(t, turns); !slices.Equal(got, []string{pidName(p.Pid())}) {
		t.Fatalf("records %v, want the group of %d", got, p.Pid())
	}

	again, err := OpenGroups(turns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(again.Close)
	if !slices.Equal(again.Swept(), []int{p.Pid()}) {
		t.Fatalf("swept %v, want [%d]", again.Swept(), p.Pid())
	}
	proctest.WantAllDead(t, pids) // the leader a zombie until reaped
	if got := records(t, turns); len(got) != 0 {
		t.Fatalf("records left: %v", got)
	}
}

// A group whose leader died with the node (its parent-death signal) and
// whose child lives on is still killed at the next start.
func TestOpenGroupsKillsTheRestOfAGroupWhoseLeaderDied(t *testing.T) {
	work, turns := t.TempDir(), t.TempDir()
	g, err := OpenGroups(turns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	cmd, pids := startGroup(t, work)
	if err := g.add(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if proctest.Gone(pids[1]) {
		t.Fatal("the child died with its leader; the test needs it alive")
	}
	again, err := OpenGroups(turns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(again.Close) // not before: its reaper would kill the group too
	proctest.WantAllDead(t, pids[1:])
}

// A record whose group id now belongs to another process (its start time
// differs) is dropped without killing that process.
func TestOpenGroupsSparesAGroupThatReusedTheID(t *testing.T) {
	work, turns := t.TempDir(), t.TempDir()
	cmd, _ := startGroup(t, work)
	st, err := readProcStat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	// The record of an earlier process with the same id.
	rec := []byte("fak-turn-group/1 boot=" + bootID() + " run=earlier start=" + itoa(st.start-1) + " sid=" + itoa(uint64(st.sid)) + "\n")
	if err := os.WriteFile(filepath.Join(turns, pidName(cmd.Process.Pid)), rec, 0o600); err != nil {
		t.Fatal(err)
	}
	g, err := OpenGroups(turns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	if len(g.Swept()) != 0 {
		t.Fatalf("swept %v, want nothing", g.Swept())
	}
	if got := records(t, turns); len(got) != 0 {
		t.Fatalf("records left: %v", got)
	}
	// A SIGKILL from the sweep would have decided how it ends before
	// this SIGTERM arrives.
	_ = cmd.Process.Signal(syscall.SIGTERM)
	err = cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Fatalf("the process that reused the id ended with %v, want SIGTERM", err)
	}
}

func TestRecordedGroup(t *testing.T) {
	rec := groupRecord{start: 100, sid: 7}
	for _, tc := range []struct {
		name    string
		members []procStat
		want    bool
	}{
		{"none", nil, false},
		{"leader and child", []procStat{{pid: 50, start: 100, sid: 7}, {pid: 51, start: 101, sid: 7}}, true},
		{"child without its leader", []procStat{{pid: 51, start: 103, sid: 7}}, true},
		{"leader reused", []procStat{{pid: 50, start: 900, sid: 7}}, false},
		{"member older than the leader", []procStat{{pid: 51, start: 99, sid: 7}}, false},
		{"member of another session", []procStat{{pid: 51, start: 101, sid: 8}}, false},
	} {
		if got := recordedGroup(50, rec, tc.members); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestParseProcStat(t *testing.T) {
	stat := "4242 (a) (b c) S 1 4240 4200 0 -1 4194560 110 0 0 0 0 0 0 0 20 0 1 0 987654 1000 100 18446744073709551615\n"
	st, err := parseProcStat(4242, stat)
	if err != nil {
		t.Fatal(err)
	}
	if st.pgrp != 4240 || st.sid != 4200 || st.start != 987654 {
		t.Fatalf("parsed %+v", st)
	}
}

func pidName(pid int) string { return strconv.Itoa(pid) }

func itoa(n uint64) string { return strconv.FormatUint(n, 10) }
