package fsm

import (
	"errors"
	"fmt"
	"os"

	bolt "go.etcd.io/bbolt"
)

// A kept FSM. The database is written without fsync (durability is the
// Raft log's), so after a crash it cannot be trusted and is rebuilt from
// the latest snapshot and the log. But a node that shut down cleanly
// synced it and marked it clean: on the next start it is opened as it is,
// with the index it applied, and only the log after that index is
// replayed (raft is told not to restore its snapshot; see cluster). The
// mark is cleared, synced, as soon as the database is opened, so a crash
// at any later point leaves it dirty. A database of another format, a
// dirty one, or one that fails the checks below is discarded (logged),
// never served.

// stateFormat names the layout of the database; a database of another
// layout is rebuilt.
const stateFormat = "fak-fsm/1"

var (
	keyFormat = []byte("format")
	keyClean  = []byte("clean")
)

// openKept opens the database at path for a new FSM. It returns the index
// applied by a kept database (0: a fresh one) and, when one was
// discarded, why.
func openKept(path string) (db *bolt.DB, kept uint64, discarded string, err error) {
	kept, discarded = keptIndex(path)
	if kept == 0 {
		db, err = freshDB(path)
	} else {
		db, err = openDB(path)
	}
	if err != nil {
		return nil, 0, discarded, err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if err := meta.Put(keyFormat, []byte(stateFormat)); err != nil {
			return err
		}
		return meta.Delete(keyClean)
	})
	if err == nil {
		err = db.Sync() // dirty from now on, on disk too
	}
	if err != nil {
		db.Close()
		return nil, 0, discarded, fmt.Errorf("fsm db %s: %w", path, err)
	}
	return db, kept, discarded, nil
}

// keptIndex reports the index a database at path applied if it can be
// kept, else 0 and why not ("" when there was none).
func keptIndex(path string) (uint64, string) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return 0, ""
	}
	if err := checkComplete(path); err != nil {
		return 0, "incomplete: " + err.Error()
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 0})
	if err != nil {
		return 0, "unreadable: " + err.Error()
	}
	defer db.Close()
	var applied uint64
	var why string
	_ = db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		switch {
		case meta == nil:
			why = "no meta bucket"
		case string(meta.Get(keyFormat)) != stateFormat:
			why = fmt.Sprintf("format %q, not %q", meta.Get(keyFormat), stateFormat)
		case string(meta.Get(keyClean)) != "1":
			why = "not shut down cleanly"
		default:
			applied = readU64(meta.Get(keyAppliedIndex))
			if applied == 0 {
				why = "nothing applied"
			}
		}
		return nil
	})
	return applied, why
}

// stampFormat records the database's layout.
func stampFormat(db *bolt.DB) error {
	return db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyFormat, []byte(stateFormat)) })
}

// markClean syncs the database and marks it clean: its next open may keep
// it.
func markClean(db *bolt.DB) error {
	if err := db.Sync(); err != nil {
		return err
	}
	if err := db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyClean, []byte("1")) }); err != nil {
		return err
	}
	return db.Sync()
}

// Kept is the index a database kept from a clean shutdown had applied
// when this FSM opened (0: it started empty, or a snapshot has been
// restored since). Raft must then replay the log after it, not restore an
// older snapshot over it (cluster decides, or calls Discard).
func (f *FSM) Kept() uint64 { return f.kept.Load() }

// Discard replaces a kept database with an empty one: for a node whose
// Raft state cannot continue from it (its log ends before the index the
// database applied, or its snapshot is newer). Raft then restores and
// replays as for a new database.
func (f *FSM) Discard(why string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.db.Close(); err != nil {
		return err
	}
	db, err := freshDB(f.path)
	if err == nil {
		err = stampFormat(db)
	}
	if err != nil {
		return err
	}
	f.db = db
	f.logger.Warn("fsm: discarded the kept database; rebuilding from the snapshot and log", "applied", f.kept.Load(), "why", why)
	f.kept.Store(0)
	f.applied.Store(0)
	return nil
}
