package fsm

import (
	"fmt"
	"io"
	"os"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

// Snapshot captures a consistent bbolt read transaction; Persist streams it
// to the sink while Apply continues. Cheap to take, as raft requires.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	tx, err := f.db.Begin(false)
	if err != nil {
		f.mu.RUnlock()
		return nil, fmt.Errorf("begin snapshot tx: %w", err)
	}
	// The read lock is held until Release so Restore cannot close the
	// database under an open transaction.
	return &snapshot{tx: tx, release: f.mu.RUnlock}, nil
}

type snapshot struct {
	tx      *bolt.Tx
	release func()
}

func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := s.tx.WriteTo(sink); err != nil {
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
	tmp := f.path + ".restore"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	if _, err := io.Copy(out, rc); err != nil {
		out.Close()
		os.Remove(tmp)
		return fmt.Errorf("restore: copy snapshot: %w", err)
	}
	if err := out.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("restore: %w", err)
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
		return fmt.Errorf("restore: %w", err)
	}

	f.mu.Lock()
	defer func() {
		f.mu.Unlock()
		f.broadcast()
	}()
	if err := f.db.Close(); err != nil {
		return fmt.Errorf("restore: close old db: %w", err)
	}
	if err := os.Rename(tmp, f.path); err != nil {
		return fmt.Errorf("restore: swap db: %w", err)
	}
	db, err := openDB(f.path)
	if err != nil {
		return fmt.Errorf("restore: reopen: %w", err)
	}
	f.db = db
	f.applied.Store(applied)
	return nil
}
