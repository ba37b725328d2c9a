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

// crashCopy opens the FSM in dir, applies what apply does, and leaves the
// database file as a process killed at that point leaves it (what another
// process reads of it then, the page cache's view), unclosed.
func crashCopy(t *testing.T, dir string, apply func(h *harness)) {
	t.Helper()
	f, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if apply != nil {
		apply(&harness{t: t, f: f, index: f.Kept(), clock: t0})
	}
	path := filepath.Join(dir, "fsm.db")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
}

// anotherBoot makes the rest of the test run in another boot of the
// machine, as after a restart.
func anotherBoot(t *testing.T) {
	was := bootID
	bootID = func() string { return "another-boot" }
	t.Cleanup(func() { bootID = was })
}

// A process that dies leaves every write it made in the page cache: in the
// same boot its database is kept, at the index of its last applied entry
// (not only the last clean shutdown's), and what follows applies.
func TestCrashedDatabaseIsKeptInTheSameBoot(t *testing.T) {
	if bootID() == "" {
		t.Skip("this system does not tell its boots apart")
	}
	dir := t.TempDir()
	keptHarness(t, dir) // index 2, closed cleanly
	var index uint64
	var digest string
	crashCopy(t, dir, func(h *harness) {
		h.apply1(appendEv("s1", ev(KindNote, "after the clean restart"))) // index 3
		var err error
		if index, digest, err = h.f.ContentDigest(); err != nil {
			t.Fatal(err)
		}
	})
	f, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if index != 3 || f.Kept() != index || f.AppliedIndex() != index {
		t.Fatalf("kept %d, applied %d; want both %d (3)", f.Kept(), f.AppliedIndex(), index)
	}
	if _, d, _ := f.ContentDigest(); d != digest {
		t.Fatal("the kept database's content differs from what the crashed process had applied")
	}
	h := &harness{t: t, f: f, clock: t0}
	h.index = 3
	h.apply1(appendEv("s1", ev(KindNote, "after the crash"))) // index 4
	if s, _ := f.Session("s1"); s.HeadSeq != 5 || f.AppliedIndex() != 4 {
		t.Fatalf("after the crash: head #%d, applied %d; want #5 and 4", s.HeadSeq, f.AppliedIndex())
	}
}

// A database not closed cleanly in an earlier boot (a machine that
// stopped), of another layout, or cut short is discarded and the FSM
// starts empty; a discarded kept database too.
func TestUntrustedDatabaseIsRebuilt(t *testing.T) {
	for name, spoil := range map[string]func(t *testing.T, path string){
		"crashed, and the machine restarted since": func(t *testing.T, path string) {
			crashCopy(t, filepath.Dir(path), nil)
			anotherBoot(t)
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

// Content digests and key diffs leave out what describes a node's file
// (the boot it was opened in): replicas on machines of different boots
// compare equal.
func TestContentLeavesOutTheBoot(t *testing.T) {
	if bootID() == "" {
		t.Skip("this system does not tell its boots apart")
	}
	a, b := t.TempDir(), t.TempDir()
	keptHarness(t, a)
	fa, err := Open(a, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Close()
	anotherBoot(t)
	keptHarness(t, b)
	fb, err := Open(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Close()
	var boots [2]string
	for i, f := range []*FSM{fa, fb} {
		_ = f.view(func(tx *bolt.Tx) error { boots[i] = string(tx.Bucket(bucketMeta).Get(keyBoot)); return nil })
	}
	if boots[0] == boots[1] {
		t.Fatalf("both files record boot %q", boots[0])
	}
	_, da, _ := fa.ContentDigest()
	_, db, _ := fb.ContentDigest()
	d, err := fa.FirstDiff(fb, 0)
	if da != db || d != nil || err != nil {
		t.Fatalf("digests %s and %s, first difference %+v (%v); only the boots differ", da, db, d, err)
	}
}
