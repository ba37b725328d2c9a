package workspace_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fak-dev/fak/node/workspace"
)

// A Snapshot stores its chunks in one pack; a store opened again finds
// them through the pack's index.
func TestPack_ReopenedStoreFindsPackedChunks(t *testing.T) {
	s, dir := openStore(t)
	d := t.TempDir()
	build(t, d, file("a", "alpha", 0o644), file("b", "beta", 0o644), file("c", "alpha", 0o644))
	m := snapshot(t, d, s)
	if n := countChunks(t, dir); n != 2 {
		t.Fatalf("%d chunks stored, want 2 (a and c are one)", n)
	}
	if p := chunkFile(t, dir, hashOf([]byte("alpha"))); filepath.Ext(p) != ".pack" {
		t.Fatalf("alpha is stored at %s, want in a pack", p)
	}
	again, err := workspace.OpenStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if missing := again.Missing(m); len(missing) != 0 {
		t.Fatalf("the reopened store lacks %v", missing)
	}
	if got, err := again.Get(hashOf([]byte("beta"))); err != nil || string(got) != "beta" {
		t.Fatalf("get beta: %q %v", got, err)
	}
}

// A pack cut short reads as ErrDigestMismatch, once: its chunks are then
// missing, and the next Snapshot stores them again.
func TestPack_CutShortIsDroppedAndStoredAgain(t *testing.T) {
	s, dir := openStore(t)
	d := t.TempDir()
	build(t, d, file("a", "alpha", 0o644), file("b", "beta", 0o644))
	m := snapshot(t, d, s)
	p := chunkFile(t, dir, hashOf([]byte("beta")))
	if err := os.Truncate(p, 3); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(hashOf([]byte("beta"))); !errors.Is(err, workspace.ErrDigestMismatch) {
		t.Fatalf("get from a cut pack: %v", err)
	}
	if missing := s.Missing(m); len(missing) == 0 {
		t.Fatal("the dropped chunk is not missing")
	}
	snapshot(t, d, s)
	if got, err := s.Get(hashOf([]byte("beta"))); err != nil || string(got) != "beta" {
		t.Fatalf("after the next snapshot: %q %v", got, err)
	}
}

// Remove drops a pack not touched within the age, with its index; a
// Snapshot that finds its chunks touches it.
func TestPack_RemoveAgesPacksWhole(t *testing.T) {
	s, dir := openStore(t)
	d := t.TempDir()
	build(t, d, file("a", "alpha", 0o644))
	m := snapshot(t, d, s)
	pack := chunkFile(t, dir, m.Chunks()[0])
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(pack, old, old); err != nil {
		t.Fatal(err)
	}
	snapshot(t, d, s) // touches the pack
	if err := s.Remove(time.Hour); err != nil {
		t.Fatal(err)
	}
	if !s.Has(m.Chunks()[0]) {
		t.Fatal("a touched pack was removed")
	}
	if err := os.Chtimes(pack, old, old); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove(time.Hour); err != nil {
		t.Fatal(err)
	}
	if s.Has(m.Chunks()[0]) {
		t.Fatal("an old pack's chunk is still held")
	}
	if _, err := os.Stat(pack[:len(pack)-len(".pack")] + ".idx"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the old pack's index: %v", err)
	}
}
