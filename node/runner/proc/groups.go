package proc

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Groups records the process groups of a node's running turns, one file
// per group in a directory of the node's data dir, so that none outlives
// the node: the node's turn reaper (reaper_linux.go) kills every group
// recorded there when the node's process dies, and OpenGroups kills the
// ones a previous run left (the reaper died with it, or never ran).
// A Spec naming Groups is recorded from its start until its group is
// killed at its end.
type Groups struct {
	dir   string
	boot  string
	run   string // this run of the node: its reaper kills only its groups
	swept []int
	// reaper kills the recorded groups when the node's process dies;
	// reaperErr says why there is none.
	reaper    *groupReaper
	reaperErr error
}

// groupRecord is what a group's file holds: enough to tell the group
// from a later one that reuses its id.
type groupRecord struct {
	boot  string // the kernel's boot id: start times count from boot
	run   string // the run of the node that started the group
	start uint64 // the leader's start time, in clock ticks after boot
	sid   int    // the leader's session, which every member shares
}

const recordFormat = "fak-turn-group/1 boot=%s run=%s start=%d sid=%d\n"

// OpenGroups opens the records in dir (created if need be), kills every
// group a previous run of the node recorded there that is still alive,
// and starts the reaper that kills the groups recorded there when the
// node's process dies. No reaper is not an error (ReaperErr says why); a
// dir that cannot be used is. Close stops the reaper.
func OpenGroups(dir string) (*Groups, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("turn records: %w", err)
	}
	run := make([]byte, 8)
	_, _ = rand.Read(run)
	g := &Groups{dir: dir, boot: bootID(), run: hex.EncodeToString(run)}
	g.swept = sweepGroups(dir, g.boot, "")
	g.reaper, g.reaperErr = startReaper(dir, g.run)
	return g, nil
}

// Close stops the reaper, which first kills any group still recorded
// (without waiting for it): a node closes its Groups once its turns have
// ended. Safe on nil.
func (g *Groups) Close() {
	if g != nil && g.reaper != nil {
		g.reaper.close()
	}
}

// Dir is where the records are.
func (g *Groups) Dir() string { return g.dir }

// Swept lists the groups of a previous run that OpenGroups killed.
func (g *Groups) Swept() []int { return g.swept }

// ReaperErr says why no reaper kills these groups when the node's
// process dies (nil: one does). Without it a group's leader still dies
// with the node (its parent-death signal), its other processes at the
// node's next start.
func (g *Groups) ReaperErr() error { return g.reaperErr }

// add records the group of leader pid, just started.
func (g *Groups) add(pid int) error {
	st, err := readProcStat(pid)
	if err != nil {
		return err
	}
	b := fmt.Appendf(nil, recordFormat, g.boot, g.run, st.start, st.sid)
	// Written beside, then renamed: a reaper never reads half a record.
	tmp := filepath.Join(g.dir, "."+strconv.Itoa(pid)+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(g.dir, strconv.Itoa(pid))); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// remove forgets the group of leader pid, once it is dead.
func (g *Groups) remove(pid int) {
	_ = os.Remove(filepath.Join(g.dir, strconv.Itoa(pid)))
}

// sweepGroups kills every group of run ("": of any run) recorded in dir
// that is still the one recorded, removes their records, and returns the
// groups it killed. A reaper sweeps only its own run's: a node started
// again while the reaper of its previous run sweeps keeps its new turns.
func sweepGroups(dir, boot, run string) []int {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var members map[int][]procStat // by group, read once when needed
	var killed []int
	for _, e := range ents {
		path := filepath.Join(dir, e.Name())
		pgid, err := strconv.Atoi(e.Name())
		if err != nil || pgid <= 1 {
			os.Remove(path) // a record half written, or not ours
			continue
		}
		rec, err := readGroupRecord(path)
		if err == nil && run != "" && rec.run != run {
			continue
		}
		if err == nil && rec.boot == boot {
			if members == nil {
				members = processesByGroup()
			}
			if recordedGroup(pgid, rec, members[pgid]) &&
				!errors.Is(syscall.Kill(-pgid, syscall.SIGKILL), syscall.ESRCH) {
				killed = append(killed, pgid)
			}
		}
		// Else the machine restarted since: nothing of that run is left.
		os.Remove(path)
	}
	return killed
}

// recordedGroup says whether the live processes of group pgid are the
// group recorded: a process id, and so a group id, is not reused while
// any member of its group lives, but once the whole group is gone a new
// process may get the id and lead a group of its own. A leader alive
// must have the recorded start time; without one (its parent-death
// signal killed it), every member must be of the recorded session and
// started after the leader did.
func recordedGroup(pgid int, rec groupRecord, members []procStat) bool {
	if len(members) == 0 {
		return false
	}
	for _, m := range members {
		if m.pid == pgid && m.start != rec.start {
			return false
		}
		if m.sid != rec.sid || m.start < rec.start {
			return false
		}
	}
	return true
}

func readGroupRecord(path string) (groupRecord, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return groupRecord{}, err
	}
	var r groupRecord
	if _, err := fmt.Sscanf(string(b), recordFormat, &r.boot, &r.run, &r.start, &r.sid); err != nil {
		return groupRecord{}, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// procStat is what /proc/<pid>/stat says of a process that matters here.
type procStat struct {
	pid, pgrp, sid int
	start          uint64 // clock ticks after boot
}

func readProcStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseProcStat(pid, string(b))
}

// parseProcStat reads "pid (comm) state ppid pgrp session … starttime …"
// (proc(5)); comm may hold spaces and parentheses, so the fields are
// counted from the last ')'.
func parseProcStat(pid int, s string) (procStat, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("process %d: malformed stat", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state): pgrp is field 5, session 6, starttime 22.
	if len(f) < 20 {
		return procStat{}, fmt.Errorf("process %d: short stat", pid)
	}
	st := procStat{pid: pid}
	var errs [3]error
	st.pgrp, errs[0] = strconv.Atoi(f[2])
	st.sid, errs[1] = strconv.Atoi(f[3])
	st.start, errs[2] = strconv.ParseUint(f[19], 10, 64)
	if err := errors.Join(errs[:]...); err != nil {
		return procStat{}, fmt.Errorf("process %d: %w", pid, err)
	}
	return st, nil
}

// processesByGroup reads every process of the machine (of the pid
// namespace), by group.
func processesByGroup() map[int][]procStat {
	ents, _ := os.ReadDir("/proc")
	out := map[int][]procStat{}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readProcStat(pid); err == nil {
			out[st.pgrp] = append(out[st.pgrp], st)
		}
	}
	return out
}

// bootID is the kernel's id of this boot ("-" where there is none).
func bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "-"
	}
	return strings.TrimSpace(string(b))
}
