package workspace_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fak-dev/fak/node/workspace"
)

// Put refuses data that is not what its hash names, and hashes that are
// not lowercase sha256 hex; storing a chunk twice is fine.
func TestStore_PutRefusesWrongContent(t *testing.T) {
	s, _ := openStore(t)
	h := hashOf([]byte("right"))
	if err := s.Put(h, []byte("wrong")); !errors.Is(err, workspace.ErrDigestMismatch) {
		t.Fatalf("wrong content: %v", err)
	}
	if s.Has(h) {
		t.Fatal("refused chunk stored")
	}
	for _, bad := range []string{"", "abc", strings.ToUpper(h), h + "0", "../../" + h[6:], "sha256:" + h[7:]} {
		wantRefusal(t, s.Put(bad, []byte("right")))
		if s.Has(bad) {
			t.Fatalf("Has(%q)", bad)
		}
	}
	for range 2 {
		if err := s.Put(h, []byte("right")); err != nil {
			t.Fatal(err)
		}
	}
	if b, err := s.Get(h); err != nil || string(b) != "right" {
		t.Fatalf("Get: %q %v", b, err)
	}
	if _, err := s.Get(hashOf([]byte("absent"))); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("absent chunk: %v", err)
	}
}

// A chunk altered on disk is detected on read, and dropped so that it
// reads as missing and can be fetched again.
func TestStore_GetDetectsAlteredChunk(t *testing.T) {
	s, dir := openStore(t)
	data := []byte("the agent's notes")
	h := hashOf(data)
	if err := s.Put(h, data); err != nil {
		t.Fatal(err)
	}
	for name, altered := range map[string]string{
		"a byte changed": "the agent's NOTES",
		"a byte added":   "the agent's notes!",
		"truncated":      "",
		"a chunk longer": strings.Repeat("x", workspace.ChunkSize+1),
	} {
		p := chunkFile(t, dir, h)
		if err := os.WriteFile(p, []byte(altered), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(h); !errors.Is(err, workspace.ErrDigestMismatch) {
			t.Fatalf("%s: %v", name, err)
		}
		if s.Has(h) {
			t.Fatalf("%s: an altered chunk is still listed as held", name)
		}
		if err := s.Put(h, data); err != nil {
			t.Fatal(err)
		}
		if b, err := s.Get(h); err != nil || string(b) != string(data) {
			t.Fatalf("%s: after re-put: %q %v", name, b, err)
		}
	}
}

// Missing lists what a partial copy lacks, sorted, and Materialize names a
// missing chunk rather than writing a partial tree.
func TestStore_MissingAfterPartialCopy(t *testing.T) {
	src, _ := openStore(t)
	dst, _ := openStore(t)
	d := t.TempDir()
	var nodes []node
	for i := range 8 {
		nodes = append(nodes, file(fmt.Sprintf("f%d", i), fmt.Sprintf("content %d", i), 0o644))
	}
	build(t, d, nodes...)
	m := snapshot(t, d, src)
	all := m.Chunks()
	if len(all) != 8 {
		t.Fatalf("%d chunks", len(all))
	}
	if got := dst.Missing(m); !slices.Equal(got, all) {
		t.Fatalf("empty store lacks %v, want all", got)
	}
	copyChunks := func(hs []string) {
		for _, h := range hs {
			b, err := src.Get(h)
			if err != nil {
				t.Fatal(err)
			}
			if err := dst.Put(h, b); err != nil {
				t.Fatal(err)
			}
		}
	}
	copyChunks([]string{all[0], all[3], all[5]})
	want := []string{all[1], all[2], all[4], all[6], all[7]}
	if got := dst.Missing(m); !slices.Equal(got, want) {
		t.Fatalf("Missing = %v, want %v", got, want)
	}
	out := filepath.Join(t.TempDir(), "ws")
	err := workspace.Materialize(out, m, dst, 0)
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), all[1]) {
		t.Fatalf("materialize with missing chunks: %v", err)
	}
	if _, err := os.Lstat(out); !errors.Is(err, fs.ErrNotExist) {
		t.Fatal("a failed materialize created the workspace")
	}
	copyChunks(want)
	if got := dst.Missing(m); len(got) != 0 {
		t.Fatalf("still missing %v", got)
	}
	if err := workspace.Materialize(out, m, dst, 0); err != nil {
		t.Fatal(err)
	}
	sameTree(t, listTree(t, d), listTree(t, out))
}

// Manifests are stored by digest, served raw and verified on every read.
func TestStore_Manifests(t *testing.T) {
	s, dir := openStore(t)
	d := t.TempDir()
	build(t, d, baseTree()...)
	m := snapshot(t, d, s)
	digest, err := s.PutManifest(m)
	if err != nil || digest != m.Digest() {
		t.Fatalf("PutManifest: %s %v", digest, err)
	}
	raw, err := s.ManifestBytes(digest)
	if err != nil || string(raw) != string(m.Marshal()) {
		t.Fatalf("ManifestBytes: %v", err)
	}
	got, err := s.Manifest(digest)
	if err != nil || got.Digest() != digest {
		t.Fatalf("Manifest: %v", err)
	}
	_, err = s.Manifest("sha256:nothex")
	wantRefusal(t, err)
	if _, err := s.Manifest((&workspace.Manifest{Entries: m.Entries[:1]}).Digest()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("absent manifest: %v", err)
	}
	p := chunkFile(t, dir, strings.TrimPrefix(digest, "sha256:"))
	if err := os.WriteFile(p, []byte(`{"entries":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Manifest(digest); !errors.Is(err, workspace.ErrDigestMismatch) {
		t.Fatalf("altered manifest: %v", err)
	}
}

// Concurrent snapshots of one tree into one store, and concurrent puts and
// gets of one chunk, are safe (run under -race) and agree.
func TestStore_Concurrent(t *testing.T) {
	s, _ := openStore(t)
	d := t.TempDir()
	build(t, d, baseTree()...)
	want := snapshot(t, d, s).Digest()
	data := []byte("shared")
	h := hashOf(data)
	var wg sync.WaitGroup
	errs := make(chan error, 32)
	for range 8 {
		wg.Go(func() {
			m, err := workspace.Snapshot(d, s, 0)
			if err != nil {
				errs <- err
				return
			}
			if m.Digest() != want {
				errs <- fmt.Errorf("digest %s, want %s", m.Digest(), want)
			}
		})
		wg.Go(func() {
			if err := s.Put(h, data); err != nil {
				errs <- err
				return
			}
			if b, err := s.Get(h); err != nil || string(b) != "shared" {
				errs <- fmt.Errorf("get: %q %v", b, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// Remove drops what was not stored or re-stored within the age given, and
// a Snapshot re-stores (refreshes) every chunk of its tree.
func TestStore_Remove(t *testing.T) {
	s, dir := openStore(t)
	d := t.TempDir()
	build(t, d, file("f", "kept", 0o644))
	m := snapshot(t, d, s)
	h := m.Chunks()[0]
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(chunkFile(t, dir, h), old, old); err != nil {
		t.Fatal(err)
	}
	snapshot(t, d, s) // refreshes it
	if err := s.Remove(time.Hour); err != nil {
		t.Fatal(err)
	}
	if !s.Has(h) {
		t.Fatal("a chunk of a fresh snapshot was removed")
	}
	for _, p := range []string{chunkFile(t, dir, h), chunkFile(t, dir, strings.TrimPrefix(m.Digest(), "sha256:"))} {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Remove(time.Hour); err != nil {
		t.Fatal(err)
	}
	if s.Has(h) {
		t.Fatal("an old chunk was kept")
	}
	if _, err := s.Manifest(m.Digest()); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("old manifest: %v", err)
	}
}
