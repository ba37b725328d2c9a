package workspace_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/fak-dev/fak/node/workspace"
)

// Snapshot, Materialize elsewhere (over an existing workspace, with a
// directory its owner cannot write) and Snapshot again give the same
// digest and the same files, modes and symlinks.
func TestMaterialize_RoundTrip(t *testing.T) {
	src, _ := openStore(t)
	dst, _ := openStore(t)
	a := t.TempDir()
	build(t, a, baseTree()...)
	build(t, a, file("src/big", string(make([]byte, workspace.ChunkSize+7)), 0o640))
	m := snapshot(t, a, src)
	for _, h := range dst.Missing(m) {
		b, err := src.Get(h)
		if err != nil {
			t.Fatal(err)
		}
		if err := dst.Put(h, b); err != nil {
			t.Fatal(err)
		}
	}
	parent := t.TempDir()
	b := filepath.Join(parent, "ws")
	build(t, b, file("stale", "old", 0o644), dir("locked", 0o755), file("locked/f", "x", 0o644))
	if err := os.Chmod(filepath.Join(b, "locked"), 0o500); err != nil {
		t.Fatal(err)
	}
	if err := workspace.Materialize(b, m, dst, 0); err != nil {
		t.Fatal(err)
	}
	if got := snapshot(t, b, dst).Digest(); got != m.Digest() {
		t.Fatalf("round trip digest %s, want %s", got, m.Digest())
	}
	sameTree(t, listTree(t, a), listTree(t, b))
	if names := dirNames(t, parent); !slices.Equal(names, []string{"ws"}) {
		t.Fatalf("beside the workspace: %v (temp or old dirs left)", names)
	}

	// Materializing the empty manifest empties the workspace.
	if err := workspace.Materialize(b, &workspace.Manifest{}, dst, 0); err != nil {
		t.Fatal(err)
	}
	if got := listTree(t, b); len(got) != 0 {
		t.Fatalf("not emptied: %v", got)
	}
}

// A chunk tampered with in the store fails Materialize with
// ErrDigestMismatch and leaves the old workspace exactly as it was.
func TestMaterialize_TamperedChunkLeavesOldDir(t *testing.T) {
	s, storeDir := openStore(t)
	a := t.TempDir()
	build(t, a, file("one", "first file", 0o644), file("two", "second file", 0o644))
	m := snapshot(t, a, s)
	parent := t.TempDir()
	b := filepath.Join(parent, "ws")
	build(t, b, dir("old", 0o755), file("old/keep", "the old workspace", 0o600))
	before := listTree(t, b)

	p := chunkFile(t, storeDir, hashOf([]byte("second file")))
	if err := os.WriteFile(p, []byte("SECOND FILE"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := workspace.Materialize(b, m, s, 0)
	if !errors.Is(err, workspace.ErrDigestMismatch) {
		t.Fatalf("tampered chunk: %v", err)
	}
	sameTree(t, before, listTree(t, b))
	if names := dirNames(t, parent); !slices.Equal(names, []string{"ws"}) {
		t.Fatalf("beside the workspace: %v", names)
	}
}

// A manifest whose file claims more bytes than its (genuine) chunk holds
// is refused at that file, and nothing is replaced.
func TestMaterialize_ChunkShorterThanSizeImplies(t *testing.T) {
	s, _ := openStore(t)
	data := []byte("short")
	h := hashOf(data)
	if err := s.Put(h, data); err != nil {
		t.Fatal(err)
	}
	m := &workspace.Manifest{Entries: []workspace.Entry{{Path: "f", Type: workspace.TypeFile, Mode: 0o644, Size: 6, Chunks: []string{h}}}}
	b := filepath.Join(t.TempDir(), "ws")
	build(t, b, file("keep", "x", 0o644))
	before := listTree(t, b)
	wantRefusal(t, workspace.Materialize(b, m, s, 0))
	sameTree(t, before, listTree(t, b))
}

func dirNames(t *testing.T, d string) []string {
	t.Helper()
	des, err := os.ReadDir(d)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}
