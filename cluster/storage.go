package cluster

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"syscall"

	"github.com/hashicorp/raft"

	"github.com/fak-dev/fak/fsm"
)

// What a node writes, as its storage failures name it.
const (
	StoreFSM  = "fsm.db"
	StoreLog  = "raft log"
	StoreSnap = "snapshot"
)

// StorageError is a failed write of this node's storage: the FSM's
// database, the Raft log (or its stable keys), a snapshot.
type StorageError struct {
	What, Dir string
	Err       error
	// Figures: the file system's free and total bytes when it failed
	// (0, 0 when statfs could not tell).
	Free, Total uint64
}

// Full reports a full disk or an exhausted quota: waiting does not help,
// room on the disk does.
func (e *StorageError) Full() bool {
	return errors.Is(e.Err, syscall.ENOSPC) || errors.Is(e.Err, syscall.EDQUOT)
}

// Error is the one line a node logs for it, e.g. "storage full: cannot
// write fsm.db in /data/n1: no space left on device (12 MiB free of
// 64 MiB)".
func (e *StorageError) Error() string {
	kind := "storage failing"
	if e.Full() {
		kind = "storage full"
	}
	return kind + ": " + e.Detail()
}

// Detail is Error without its kind: "cannot write fsm.db in /data/n1: no
// space left on device (12 MiB free of 64 MiB)".
func (e *StorageError) Detail() string {
	cause := e.Err.Error()
	var errno syscall.Errno
	if errors.As(e.Err, &errno) {
		cause = errno.Error()
	}
	s := fmt.Sprintf("cannot write %s in %s: %s", e.What, e.Dir, cause)
	if e.Total > 0 {
		s += fmt.Sprintf(" (%s free of %s)", mib(e.Free), mib(e.Total))
	}
	return s
}

func (e *StorageError) Unwrap() error { return e.Err }

func mib(b uint64) string {
	if b < 1<<20 && b > 0 {
		return fmt.Sprintf("%d KiB", b>>10)
	}
	return fmt.Sprintf("%d MiB", b>>20)
}

// storage records this node's last store of each kind and reports
// failures: one line in the log, and for a full disk Config.OnStorageFull
// (the agent ends the process there; a node that stays up stays not
// ready).
type storage struct {
	c *Cluster
	// fsmErr is sticky (the FSM applies nothing after it); logErr and
	// snapErr hold the result of the latest write of their kind.
	fsmErr, logErr, snapErr atomic.Pointer[StorageError]
}

// StoreFailed is this node's failing storage: the error of the latest
// write of the Raft log or of a snapshot, if it failed, or of the FSM
// database once any write of it failed; nil while the latest stores
// succeeded.
func (c *Cluster) StoreFailed() *StorageError {
	for _, p := range []*atomic.Pointer[StorageError]{&c.storage.fsmErr, &c.storage.logErr, &c.storage.snapErr} {
		if e := p.Load(); e != nil {
			return e
		}
	}
	return nil
}

// record stores the outcome of a write of what in dir: nil clears it.
func (s *storage) record(p *atomic.Pointer[StorageError], what, dir string, err error) {
	if err == nil {
		if p.Load() != nil {
			p.Store(nil)
			s.c.logger.Info("storage writes again", "what", what, "dir", dir)
		}
		return
	}
	e := &StorageError{What: what, Dir: dir, Err: err}
	e.Free, e.Total = diskSpace(dir)
	if p.Swap(e) != nil {
		return // logged at the first failure of a run of them
	}
	s.c.logger.Error(e.Error())
	if e.Full() && s.c.cfg.OnStorageFull != nil {
		s.c.cfg.OnStorageFull(e)
	}
}

// fault is the test's injected fault for a write of what (Config.StoreFault).
func (s *storage) fault(what string) error {
	if f := s.c.cfg.StoreFault; f != nil {
		return f(what)
	}
	return nil
}

// watchFSM has the FSM report its failed write here.
func (s *storage) watchFSM(f *fsm.FSM) {
	var fault func() error
	if s.c.cfg.StoreFault != nil {
		fault = func() error { return s.fault(StoreFSM) }
	}
	f.SetStoreHooks(fault, func(se *fsm.StoreError) {
		s.record(&s.fsmErr, StoreFSM, filepath.Dir(se.Path), se.Err)
	})
}

// watchedLogStore is the Raft log and stable store with each write's
// outcome recorded: hashicorp/raft only logs a failed append and, on a
// follower, leaves it unacknowledged, so without this a node whose disk is
// full looked healthy.
type watchedLogStore struct {
	logStore
	s   *storage
	dir string
}

func (w *watchedLogStore) done(err error) error {
	w.s.record(&w.s.logErr, StoreLog, w.dir, err)
	return err
}

func (w *watchedLogStore) append(f func() error) error {
	if err := w.s.fault(StoreLog); err != nil {
		return w.done(err)
	}
	return w.done(f())
}

func (w *watchedLogStore) StoreLog(l *raft.Log) error {
	return w.append(func() error { return w.logStore.StoreLog(l) })
}

func (w *watchedLogStore) StoreLogs(ls []*raft.Log) error {
	return w.append(func() error { return w.logStore.StoreLogs(ls) })
}

// IsMonotonic passes on the WAL's answer (raft.MonotonicLogStore): raft-wal
// refuses a gap in its indexes, so after installing or restoring a snapshot
// Raft must clear the log rather than append past the gap.
func (w *watchedLogStore) IsMonotonic() bool {
	m, ok := w.logStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// Set and SetUint64 write Raft's term and vote. hashicorp/raft panics when
// it cannot save its term (at every start, and at each new term), so
// these are reported, and a full disk ends the agent (OnStorageFull),
// before Raft sees the error. Tests inject no fault here: a node that
// stays up would then panic in Raft.
func (w *watchedLogStore) Set(k, v []byte) error {
	return w.done(w.logStore.Set(k, v))
}

func (w *watchedLogStore) SetUint64(k []byte, v uint64) error {
	return w.done(w.logStore.SetUint64(k, v))
}

// watchedSink records the outcome of a snapshot's write.
type watchedSink struct {
	raft.SnapshotSink
	s   *storage
	dir string
}

func (w *watchedSink) Write(p []byte) (int, error) {
	n, err := w.SnapshotSink.Write(p)
	if err != nil {
		w.s.record(&w.s.snapErr, StoreSnap, w.dir, err)
	}
	return n, err
}

func (w *watchedSink) Close() error {
	err := w.SnapshotSink.Close()
	w.s.record(&w.s.snapErr, StoreSnap, w.dir, err)
	return err
}
