package cluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// A data directory whose log is in raft-boltdb (every release before the
// WAL) is migrated on open: the same entries, the same term and vote, and
// raft.db gone; a migration cut short (a partial wal.migrating) starts
// again from the untouched raft.db.
func TestOpenLogStoreMigratesBoltLog(t *testing.T) {
	for _, interrupted := range []bool{false, true} {
		t.Run(fmt.Sprint("interrupted=", interrupted), func(t *testing.T) {
			dir := t.TempDir()
			bolt, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, boltLogName), BoltOptions: raftLogBoltOptions()})
			if err != nil {
				t.Fatal(err)
			}
			var logs []*raft.Log
			for i := uint64(5); i <= 300; i++ { // a log compacted up to 4
				logs = append(logs, &raft.Log{Index: i, Term: 2 + i/100, Type: raft.LogCommand, Data: []byte(fmt.Sprint("entry ", i))})
			}
			if err := bolt.StoreLogs(logs); err != nil {
				t.Fatal(err)
			}
			if err := bolt.SetUint64([]byte("CurrentTerm"), 7); err != nil {
				t.Fatal(err)
			}
			if err := bolt.Set([]byte("LastVoteCand"), []byte("n2")); err != nil {
				t.Fatal(err)
			}
			if err := bolt.Close(); err != nil {
				t.Fatal(err)
			}
			if interrupted {
				if err := os.MkdirAll(filepath.Join(dir, walMigrating), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, walMigrating, "00000000000000000001-0000000000000001.wal"), []byte("torn"), 0o600); err != nil {
					t.Fatal(err)
				}
			}

			store, err := openLogStore(dir, hclog.NewNullLogger())
			if err != nil {
				t.Fatal(err)
			}
			check := func(store logStore) {
				t.Helper()
				first, _ := store.FirstIndex()
				last, _ := store.LastIndex()
				if first != 5 || last != 300 {
					t.Fatalf("log holds %d..%d, want 5..300", first, last)
				}
				for _, want := range logs {
					var got raft.Log
					if err := store.GetLog(want.Index, &got); err != nil {
						t.Fatal(err)
					}
					if got.Term != want.Term || string(got.Data) != string(want.Data) {
						t.Fatalf("entry %d: term %d %q, want %d %q", want.Index, got.Term, got.Data, want.Term, want.Data)
					}
				}
				if term, err := store.GetUint64([]byte("CurrentTerm")); err != nil || term != 7 {
					t.Fatalf("current term %d, %v; want 7", term, err)
				}
				if cand, err := store.Get([]byte("LastVoteCand")); err != nil || string(cand) != "n2" {
					t.Fatalf("last vote %q, %v; want n2", cand, err)
				}
			}
			check(store)
			for _, gone := range []string{boltLogName, walMigrating} {
				if _, err := os.Stat(filepath.Join(dir, gone)); !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("%s left after the migration: %v", gone, err)
				}
			}
			// Appends go on from the migrated tail, and survive a reopen.
			if err := store.StoreLog(&raft.Log{Index: 301, Term: 7, Type: raft.LogCommand, Data: []byte("entry 301")}); err != nil {
				t.Fatal(err)
			}
			again := reopen(t, store, dir)
			defer again.Close()
			if last, _ := again.LastIndex(); last != 301 {
				t.Fatalf("last index %d after reopening, want 301", last)
			}
		})
	}
}

// A new data directory starts an empty WAL; an empty raft.db (a node that
// never received an entry) migrates to one too.
func TestOpenLogStoreEmpty(t *testing.T) {
	for _, withBolt := range []bool{false, true} {
		dir := t.TempDir()
		if withBolt {
			b, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, boltLogName)})
			if err != nil {
				t.Fatal(err)
			}
			b.Close()
		}
		store, err := openLogStore(dir, hclog.NewNullLogger())
		if err != nil {
			t.Fatalf("bolt=%v: %v", withBolt, err)
		}
		if last, _ := store.LastIndex(); last != 0 {
			t.Fatalf("bolt=%v: last index %d of a new log", withBolt, last)
		}
		store.Close()
	}
}

// A follower's log loses its uncommitted suffix after an election (Raft's
// "clearing log suffix"), and the node must still open its log after a
// restart. raft-wal before v0.4.1 sealed the segment without its index
// block there, and the next start panicked ("sealed segment has no index
// block"; hashicorp/raft-wal#31), as a chaos run's restart-all found.
func TestLogStoreReopensAfterTailTruncation(t *testing.T) {
	dir := t.TempDir()
	store, err := openLogStore(dir, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	put := func(s logStore, from, to, term uint64) {
		t.Helper()
		var logs []*raft.Log
		for i := from; i <= to; i++ {
			logs = append(logs, &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: []byte(fmt.Sprint(term, "/", i))})
		}
		if err := s.StoreLogs(logs); err != nil {
			t.Fatal(err)
		}
	}
	put(store, 1, 424, 1)
	if err := store.DeleteRange(424, 424); err != nil {
		t.Fatal(err)
	}
	put(store, 424, 430, 2)
	again := reopen(t, store, dir)
	defer again.Close()
	for i := uint64(1); i <= 430; i++ {
		var l raft.Log
		if err := again.GetLog(i, &l); err != nil {
			t.Fatalf("entry %d after reopening: %v", i, err)
		}
		want := uint64(1)
		if i >= 424 {
			want = 2
		}
		if l.Term != want || string(l.Data) != fmt.Sprint(want, "/", i) {
			t.Fatalf("entry %d: term %d %q", i, l.Term, l.Data)
		}
	}
}

// reopen closes store and opens dir's log again.
func reopen(t *testing.T, store logStore, dir string) logStore {
	t.Helper()
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := openLogStore(dir, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	return again
}

// A follower that caught up by a snapshot install kept its older entries
// in raft-boltdb with a gap before the ones after the snapshot; the WAL
// holds only consecutive entries, so the migration keeps those after the
// gap (the snapshot covers the rest).
func TestOpenLogStoreMigratesAcrossAGap(t *testing.T) {
	dir := t.TempDir()
	bolt, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, boltLogName), BoltOptions: raftLogBoltOptions()})
	if err != nil {
		t.Fatal(err)
	}
	var logs []*raft.Log
	for _, r := range [][2]uint64{{1, 50}, {201, 300}} { // a snapshot installed at 200
		for i := r[0]; i <= r[1]; i++ {
			logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte(fmt.Sprint(i))})
		}
	}
	if err := bolt.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	bolt.Close()
	store, err := openLogStore(dir, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	first, _ := store.FirstIndex()
	last, _ := store.LastIndex()
	if first != 201 || last != 300 {
		t.Fatalf("migrated log holds %d..%d, want 201..300", first, last)
	}
	var l raft.Log
	if err := store.GetLog(250, &l); err != nil || string(l.Data) != "250" {
		t.Fatalf("entry 250: %q, %v", l.Data, err)
	}
}
