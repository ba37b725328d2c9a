package fsm

import (
	"os"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// keptHarness applies a few entries in dir and closes the FSM cleanly.
func keptHarness(t *testing.T, dir string) (index uint64, digest string) {
	t.Helper()
	f, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, f: f, clock: t0}
	h.apply1(create("s1"))
	h.apply1(appendEv("s1", ev(KindNote, "kept")))
	index, digest, err = f.ContentDigest()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return index, digest
}

// A database closed cleanly is kept by the next Open, with its applied
// index: entries up to it, delivered again by Raft's replay, change
// nothing; the entries after it apply.
func TestKeptDatabaseContinuesFromItsIndex(t *testing.T) {
	dir := t.TempDir()
	index, digest := keptHarness(t, dir)
	f, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Kept() != index || f.AppliedIndex() != index {
		t.Fatalf("kept %d, applied %d; want both %d", f.Kept(), f.AppliedIndex(), index)
	}
	if _, d, _ := f.ContentDigest(); d != digest {
		t.Fatal("the kept database's content differs from what was closed")
	}
	// Raft replays from its snapshot: the same entries again.
	h := &harness{t: t, f: f, clock: t0}
	if r := f.Apply(h.entry(create("s1"))); r != nil {
		t.Fatalf("a replayed entry applied again: %v", r)
	}
	if r := f.Apply(h.entry(appendEv("s1", ev(KindNote, "replayed")))); r != nil { // index 2
		t.Fatalf("a replayed entry applied again: %v", r)
	}
	if i, d, _ := f.ContentDigest(); d != digest || i != index {
		t.Fatalf("replaying entries up to the kept index changed the state (index %d)", i)
	}
	h.apply1(appendEv("s1", ev(KindNote, "after the restart"))) // index 3
	if s, _ := f.Session("s1"); s.HeadSeq != 4 || f.AppliedIndex() != 3 {
		t.Fatalf("after the restart: head #%d, applied %d; want #4 and 3", s.HeadSeq, f.AppliedIndex())
	}
}

// A database not closed cleanly (a crash), of another layout, or cut
// short is discarded and the FSM starts empty; a discarded kept database
// too.
func TestUntrustedDatabaseIsRebuilt(t *testing.T) {
	for name, spoil := range map[string]func(t *testing.T, path string){
		"crashed": func(t *testing.T, path string) {
			// Opened again (marked dirty), then the process dies: copy the
			// file as the crash leaves it.
			f, err := Open(filepath.Dir(path), nil)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			f.Close()
			if err := os.WriteFile(path, raw, 0o600); err != nil {
				t.Fatal(err)
			}
		},
		"another layout": func(t *testing.T, path string) {
			db, err := bolt.Open(path, 0o600, nil)
			if err != nil {
				t.Fatal(err)
			}
			_ = db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyFormat, []byte("fak-fsm/0")) })
			db.Close()
		},
		"cut short": func(t *testing.T, path string) {
			if err := os.Truncate(path, 3*4096); err != nil { // the meta pages and one more
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			keptHarness(t, dir)
			spoil(t, filepath.Join(dir, "fsm.db"))
			f, err := Open(dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if f.Kept() != 0 || f.AppliedIndex() != 0 {
				t.Fatalf("kept %d, applied %d: an untrusted database was served", f.Kept(), f.AppliedIndex())
			}
			if _, err := f.Session("s1"); err == nil {
				t.Fatal("the untrusted database's session is served")
			}
		})
	}
	t.Run("discarded", func(t *testing.T) {
		dir := t.TempDir()
		keptHarness(t, dir)
		f, err := Open(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := f.Discard("a test"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Session("s1"); err == nil || f.Kept() != 0 || f.AppliedIndex() != 0 {
			t.Fatalf("after Discard: kept %d, applied %d, session %v", f.Kept(), f.AppliedIndex(), err)
		}
	})
}
