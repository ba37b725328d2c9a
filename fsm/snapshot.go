package fsm

import (
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

// Snapshot captures a consistent bbolt read transaction; Persist streams it
// to the sink while Apply continues. Cheap to take, as raft requires.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	// Halted, the state is behind the index Raft would label it with.
	if h := f.halted.Load(); h != nil {
		return nil, fmt.Errorf("no snapshot: %w", h)
	}
	// So is a replica whose last write failed.
	if se := f.store.err.Load(); se != nil {
		return nil, fmt.Errorf("no snapshot: %w", se)
	}
	f.mu.RLock()
	tx, err := f.db.Begin(false)
	if err != nil {
		f.mu.RUnlock()
		return nil, fmt.Errorf("begin snapshot tx: %w", err)
	}
	f.snapBytes.Store(f.logBytes.Load())
	f.snapIndex.Store(f.applied.Load())
	f.snapState.Store(tx.Size())
	// The read lock is held until Release so Restore cannot close the
	// database under an open transaction.
	return &snapshot{tx: tx, release: f.mu.RUnlock, compress: f.compressSnapshot(tx)}, nil
}

type snapshot struct {
	tx       *bolt.Tx
	release  func()
	compress bool
}

func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if err := writeState(sink, s.tx, s.compress); err != nil {
		sink.Cancel()
		return fmt.Errorf("persist snapshot: %w", err)
	}
	return sink.Close()
}

func (s *snapshot) Release() {
	if s.tx != nil {
		_ = s.tx.Rollback()
		s.tx = nil
		s.release()
	}
}

// Restore replaces the whole database with the snapshot's, atomically: the
// new file is written and verified beside the old one, then swapped in.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	// A snapshot past the halt holds what rules this build lacks made.
	if h := f.halted.Load(); h != nil {
		return fmt.Errorf("no restore: %w", h)
	}
	if se := f.store.err.Load(); se != nil {
		return fmt.Errorf("no restore: %w", se)
	}
	tmp := f.path + ".restore"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if err := readState(out, rc); err != nil {
		out.Close()
		os.Remove(tmp)
		return fmt.Errorf("restore: copy snapshot: %w", err)
	}
	if err := out.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("restore: %w", err)
	}
	if err := checkComplete(tmp); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("restore: snapshot is not a valid fsm database: %w", err)
	}
	// Verify it opens as a database with our buckets before touching the
	// live one.
	check, err := openDB(tmp)
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("restore: snapshot is not a valid fsm database: %w", err)
	}
	var applied uint64
	_ = check.View(func(tx *bolt.Tx) error {
		applied = readU64(tx.Bucket(bucketMeta).Get(keyAppliedIndex))
		return nil
	})
	if err := check.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("restore: %w", err)
	}

	f.mu.Lock()
	defer func() {
		f.mu.Unlock()
		f.broadcast(true)
	}()
	if err := f.db.Close(); err != nil {
		return fmt.Errorf("restore: close old db: %w", err)
	}
	if err := os.Rename(tmp, f.path); err != nil {
		return fmt.Errorf("restore: swap db: %w", err)
	}
	db, err := openDB(f.path)
	if err == nil {
		err = stampFormat(db) // a snapshot of an older layout is rebuilt on its next start otherwise
	}
	if err != nil {
		return fmt.Errorf("restore: reopen: %w", err)
	}
	f.db = db
	f.applied.Store(applied)
	f.kept.Store(0)
	f.restores.Add(1)
	f.changes.reset()
	return nil
}

// Restores counts the snapshots restored into this FSM since it opened (at
// start, a lagging follower's InstallSnapshot, an operator's restore). The
// state may have gone backwards at each: journals rewound, sessions gone.
func (f *FSM) Restores() uint64 { return f.restores.Load() }

// checkComplete verifies, without touching any page beyond the two meta
// pages, that path holds a bbolt database whose file covers every page its
// meta page claims. bbolt memory-maps the file and reads pages through the
// map, so opening a truncated snapshot read-write (which walks every page to
// rebuild the freelist) faults with SIGBUS and kills the process instead of
// returning an error.
func checkComplete(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.Size() == 0 {
		return fmt.Errorf("snapshot is empty")
	}
	// bbolt reads meta page 1 at offset pageSize through the map; make sure
	// the file reaches past it. The page size is recorded in meta page 0
	// after the page header (16 bytes), magic and version (4 bytes each),
	// in native byte order.
	var hdr [28]byte
	if _, err := f.ReadAt(hdr[:], 0); err != nil {
		return fmt.Errorf("snapshot too short (%d bytes)", fi.Size())
	}
	if ps := int64(binary.NativeEndian.Uint32(hdr[24:])); ps > 0 && fi.Size() < 2*ps {
		return fmt.Errorf("snapshot truncated: %d bytes, page size %d", fi.Size(), ps)
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer db.Close()
	tx, err := db.Begin(false)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if want := tx.Size(); fi.Size() < want {
		return fmt.Errorf("snapshot truncated: %d bytes, database needs %d", fi.Size(), want)
	}
	if tx.Bucket(bucketMeta) == nil {
		return fmt.Errorf("no %s bucket", bucketMeta)
	}
	return nil
}

// What the snapshot policy (cluster/snapshot_policy.go) weighs.

// LogBytesSinceSnapshot is the size of the log entries applied since the
// last snapshot was taken (or since the FSM opened).
func (f *FSM) LogBytesSinceSnapshot() uint64 { return f.logBytes.Load() - f.snapBytes.Load() }

// SnapshotIndex is the applied index of the last snapshot taken since the
// FSM opened (0: none yet).
func (f *FSM) SnapshotIndex() uint64 { return f.snapIndex.Load() }

// SnapshotState is the size of the state the last snapshot copied (or,
// before one, of the state as the FSM opened).
func (f *FSM) SnapshotState() int64 { return f.snapState.Load() }

// StateBytes is the size of the database: what a snapshot copies.
func (f *FSM) StateBytes() (int64, error) {
	var n int64
	err := f.view(func(tx *bolt.Tx) error { n = tx.Size(); return nil })
	return n, err
}

// JournalBytes is the logical size of the journals this replica holds:
// the bytes of every journal record's key and value (what a purge counts),
// without the database's pages, free space or indexes. It reads the whole
// journal: for reports and benchmarks, not for a hot path.
func (f *FSM) JournalBytes() (int64, error) {
	var n int64
	err := f.view(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketJournal).ForEach(func(k, v []byte) error {
			n += int64(len(k) + len(v))
			return nil
		})
	})
	return n, err
}
