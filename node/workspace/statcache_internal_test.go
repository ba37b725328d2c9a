package workspace

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// age makes the stats cached for dir look taken long ago, as if the
// racy window had passed: only the racy rule is bypassed, every stat is
// still compared.
func age(t *testing.T, s *Store, dir string) {
	t.Helper()
	d := s.stats.get(cacheKey(dir))
	if d == nil {
		t.Fatalf("nothing cached for %s", dir)
	}
	d.takenAt += int64(time.Hour)
}

func snapshotCounting(t *testing.T, dir string, s *Store) (*Manifest, int) {
	t.Helper()
	m, w, err := snapshot(dir, s, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m, w.read
}

// freshDigest is dir's digest as a store that never saw it computes it.
func freshDigest(t *testing.T, dir string) string {
	t.Helper()
	s, err := OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	m, err := Snapshot(dir, s, 0)
	if err != nil {
		t.Fatal(err)
	}
	return m.Digest()
}

func writeTree(t *testing.T, dir string, files map[string][]byte) {
	t.Helper()
	for p, data := range files {
		abs := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(abs, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// threeFileTree writes threeFiles in a new directory and returns a new
// store, the directory, the path of a.txt and its stat.
func threeFileTree(t *testing.T) (s *Store, dir, p string, before os.FileInfo) {
	t.Helper()
	s, _ = OpenStore(t.TempDir())
	dir = t.TempDir()
	writeTree(t, dir, threeFiles())
	p = filepath.Join(dir, "a.txt")
	before, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return s, dir, p, before
}

func threeFiles() map[string][]byte {
	return map[string][]byte{
		"a.txt":     []byte("alpha"),
		"d/b.bin":   bytes.Repeat([]byte{7}, ChunkSize+10),
		"d/e/c.txt": []byte("gamma"),
	}
}

func TestSnapshot_UnchangedFilesAreNotReadAgain(t *testing.T) {
	s, _ := OpenStore(t.TempDir())
	dir := t.TempDir()
	writeTree(t, dir, threeFiles())
	m1, read := snapshotCounting(t, dir, s)
	if read != 3 {
		t.Fatalf("first snapshot read %d files, want 3", read)
	}
	age(t, s, dir)
	m2, read := snapshotCounting(t, dir, s)
	if read != 0 || m2.Digest() != m1.Digest() {
		t.Fatalf("second snapshot read %d files, digest %s (first %s)", read, m2.Digest(), m1.Digest())
	}
}

// A file rewritten with the same size and its mtime put back is read
// again: its ctime moved, and ctime cannot be set back.
func TestSnapshot_ReadsAFileWhoseMtimeWasPutBack(t *testing.T) {
	s, dir, p, before := threeFileTree(t)
	m1, _ := snapshotCounting(t, dir, s)
	age(t, s, dir)
	// Wait (bounded) until the kernel's clock has moved past the file's
	// ctime, so the rewrite below cannot share its timestamp.
	recorded, _ := statOf(before)
	deadline := time.Now().Add(5 * time.Second)
	for {
		probe := filepath.Join(t.TempDir(), "probe")
		if err := os.WriteFile(probe, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Lstat(probe)
		if st, _ := statOf(fi); st.ctime > recorded.ctime {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the file system clock did not move in 5 s")
		}
		time.Sleep(time.Millisecond)
	}
	if err := os.WriteFile(p, []byte("ALPHA"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, before.ModTime(), before.ModTime()); err != nil {
		t.Fatal(err)
	}
	m2, read := snapshotCounting(t, dir, s)
	if read != 1 {
		t.Fatalf("read %d files, want the changed one", read)
	}
	if m2.Digest() == m1.Digest() || m2.Digest() != freshDigest(t, dir) {
		t.Fatalf("digest %s after the change; before %s, fresh %s", m2.Digest(), m1.Digest(), freshDigest(t, dir))
	}
}

// A file changed right after a snapshot, possibly within the same clock
// tick (same size, same timestamps), is read again: its stat was racy.
func TestSnapshot_ReadsRacilyCleanFiles(t *testing.T) {
	s, dir, p, before := threeFileTree(t)
	if _, err := Snapshot(dir, s, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte("ALPHA"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(p, before.ModTime(), before.ModTime()); err != nil {
		t.Fatal(err)
	}
	m, read := snapshotCounting(t, dir, s)
	if read == 0 || m.Digest() != freshDigest(t, dir) {
		t.Fatalf("read %d files, digest %s, want %s", read, m.Digest(), freshDigest(t, dir))
	}
}

func TestSnapshot_ReadsAFileWhoseChunkLeftTheStore(t *testing.T) {
	s, _ := OpenStore(t.TempDir())
	dir := t.TempDir()
	writeTree(t, dir, threeFiles())
	m1, _ := snapshotCounting(t, dir, s)
	age(t, s, dir)
	h := sha256Hex([]byte("gamma"))
	if _, ok := s.packedLoc(h); !ok {
		t.Fatalf("chunk %s is not in a pack", h)
	}
	s.forgetChunk(h) // as a read that found it altered does
	m2, read := snapshotCounting(t, dir, s)
	if read != 1 || m2.Digest() != m1.Digest() || !s.Has(h) {
		t.Fatalf("read %d files, digest %s (was %s), chunk back: %v", read, m2.Digest(), m1.Digest(), s.Has(h))
	}
}

// materialized snapshots threeFiles in src and materializes it at dst,
// the stat cache of dst aged past the racy window.
func materialized(t *testing.T) (s *Store, src, dst string, m *Manifest) {
	t.Helper()
	s, _ = OpenStore(t.TempDir())
	src = t.TempDir()
	writeTree(t, src, threeFiles())
	m, err := Snapshot(src, s, 0)
	if err != nil {
		t.Fatal(err)
	}
	dst = filepath.Join(t.TempDir(), "ws")
	if err := Materialize(dst, m, s, 0); err != nil {
		t.Fatal(err)
	}
	age(t, s, dst)
	return s, src, dst, m
}

func TestSnapshot_TrustsWhatMaterializeWrote(t *testing.T) {
	s, _, dst, m := materialized(t)
	got, read := snapshotCounting(t, dst, s)
	if read != 0 || got.Digest() != m.Digest() {
		t.Fatalf("read %d files, digest %s, want %s", read, got.Digest(), m.Digest())
	}
}

func inode(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := statOf(fi)
	return st.ino
}

// Materializing over a tree the stat cache knows links the files that
// stay as they are instead of writing them again; the changed one is
// written.
func TestMaterialize_LinksUnchangedFiles(t *testing.T) {
	s, src, dst, _ := materialized(t)
	keep, changed := inode(t, filepath.Join(dst, "d/b.bin")), inode(t, filepath.Join(dst, "a.txt"))
	writeTree(t, src, map[string][]byte{"a.txt": []byte("ALPHA!")})
	m2, err := Snapshot(src, s, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := Materialize(dst, m2, s, 0); err != nil {
		t.Fatal(err)
	}
	if got := inode(t, filepath.Join(dst, "d/b.bin")); got != keep {
		t.Errorf("d/b.bin was written again (inode %d, was %d)", got, keep)
	}
	if got := inode(t, filepath.Join(dst, "a.txt")); got == changed {
		t.Error("a.txt kept its old inode although it changed")
	}
	if got := freshDigest(t, dst); got != m2.Digest() {
		t.Fatalf("materialized tree %s, want %s", got, m2.Digest())
	}
}
