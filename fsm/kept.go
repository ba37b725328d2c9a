package fsm

import (
	"errors"
	"fmt"
	"os"

	bolt "go.etcd.io/bbolt"
)

// A kept FSM. The database is written without fsync (durability is the
// Raft log's). A node that shut down cleanly synced it and marked it
// clean: on the next start it is opened as it is, with the index it
// applied, and only the log after that index is replayed (raft is told not
// to restore its snapshot; see cluster). The mark is cleared, synced, as
// soon as the database is opened, so a crash at any later point leaves it
// dirty.
//
// A dirty database is still kept when the machine has not restarted since
// it was opened (the boot it records is this one, bootID): every write it
// made is then in the page cache, and bbolt commits a transaction by
// writing its meta page last, so the file holds exactly its last committed
// transaction, whose applied index is in it. That is a process's crash. After a
// machine's restart, a database of another format, or one that fails the
// checks below, it is discarded (logged) and rebuilt, never served.

// stateFormat names the layout of the database; a database of another
// layout is rebuilt.
const stateFormat = "fak-fsm/1"

var (
	keyFormat = []byte("format")
	keyClean  = []byte("clean")
	keyBoot   = []byte("boot") // the boot the database was last opened in
)

// openKept opens the database at path for a new FSM. It returns the index
// applied by a kept database (0: a fresh one), whether it was kept after
// a crash, and, when one was discarded, why.
func openKept(path string) (db *bolt.DB, kept uint64, crashed bool, discarded string, err error) {
	kept, crashed, discarded = keptIndex(path)
	if kept == 0 {
		db, err = freshDB(path)
	} else {
		db, err = openDB(path)
	}
	if err != nil {
		return nil, 0, false, discarded, err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if err := meta.Put(keyFormat, []byte(stateFormat)); err != nil {
			return err
		}
		if err := putBoot(meta); err != nil {
			return err
		}
		return meta.Delete(keyClean)
	})
	if err == nil {
		err = db.Sync() // dirty from now on, on disk too
	}
	if err != nil {
		db.Close()
		return nil, 0, false, discarded, fmt.Errorf("fsm db %s: %w", path, err)
	}
	return db, kept, crashed, discarded, nil
}

// putBoot records this boot in the meta bucket (none where it cannot be
// told).
func putBoot(meta *bolt.Bucket) error {
	if b := bootID(); b != "" {
		return meta.Put(keyBoot, []byte(b))
	}
	return meta.Delete(keyBoot)
}

// keptIndex reports the index a database at path applied if it can be
// kept (and whether it is kept after a crash), else 0 and why not (""
// when there was none).
func keptIndex(path string) (applied uint64, crashed bool, why string) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return 0, false, ""
	}
	if err := checkComplete(path); err != nil {
		return 0, false, "incomplete: " + err.Error()
	}
	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: 0})
	if err != nil {
		return 0, false, "unreadable: " + err.Error()
	}
	defer db.Close()
	_ = db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		switch {
		case meta == nil:
			why = "no meta bucket"
		case string(meta.Get(keyFormat)) != stateFormat:
			why = fmt.Sprintf("format %q, not %q", meta.Get(keyFormat), stateFormat)
		case string(meta.Get(keyClean)) != "1" && (len(meta.Get(keyBoot)) == 0 || string(meta.Get(keyBoot)) != bootID()):
			why = "not shut down cleanly, and the machine has restarted since (its unsynced writes may be lost)"
		default:
			crashed = string(meta.Get(keyClean)) != "1"
			applied = readU64(meta.Get(keyAppliedIndex))
			if applied == 0 {
				why = "nothing applied"
			}
		}
		return nil
	})
	return applied, crashed && applied > 0, why
}

// stampFormat records the database's layout, and this boot.
func stampFormat(db *bolt.DB) error {
	return db.Update(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if err := meta.Put(keyFormat, []byte(stateFormat)); err != nil {
			return err
		}
		return putBoot(meta)
	})
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
