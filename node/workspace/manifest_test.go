package workspace_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fak-dev/fak/node/workspace"
)

// baseTree has a bit of everything, including names whose byte order is not
// the walk order ("a-b" sorts between "a" and "a/b").
func baseTree() []node {
	return []node{
		dir("a", 0o755),
		file("a/b", "in a", 0o644),
		file("a-b", "beside a", 0o600),
		dir("empty", 0o700),
		file("empty-file", "", 0o644),
		file("run.sh", "#!/bin/sh\necho hi\n", 0o755),
		dir("src", 0o750),
		file("src/main.go", "package main\n", 0o644),
		link("link", "src/main.go"),
		link("src/up", ".."),
	}
}

// The same tree in two directories, with different mtimes, has the same
// digest; changing one byte, one mode, one symlink target or adding an
// empty directory each changes it.
func TestDigest_DeterministicAndSensitive(t *testing.T) {
	s, _ := openStore(t)
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	build(t, a, baseTree()...)
	build(t, b, baseTree()...)
	old := time.Now().Add(-48 * time.Hour)
	for _, n := range baseTree() {
		if n.kind != "symlink" {
			if err := os.Chtimes(filepath.Join(b, n.path), old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	ma, mb := snapshot(t, a, s), snapshot(t, b, s)
	if ma.Digest() != mb.Digest() || !bytes.Equal(ma.Marshal(), mb.Marshal()) {
		t.Fatalf("same tree, different digests:\n%s\n%s", ma.Marshal(), mb.Marshal())
	}
	if !strings.HasPrefix(ma.Digest(), "sha256:") || len(ma.Digest()) != len("sha256:")+64 {
		t.Fatalf("digest %q", ma.Digest())
	}
	if !slices.IsSortedFunc(ma.Entries, func(x, y workspace.Entry) int { return strings.Compare(x.Path, y.Path) }) {
		t.Fatalf("entries not sorted: %s", ma.Marshal())
	}
	if got := ma.Entries[0].Path + "," + ma.Entries[1].Path + "," + ma.Entries[2].Path; got != "a,a-b,a/b" {
		t.Fatalf("order %s, want byte order a,a-b,a/b", got)
	}
	if err := workspace.Validate(ma, 0); err != nil {
		t.Fatalf("a snapshot does not validate: %v", err)
	}

	mutations := map[string]func(dir string) error{
		"one byte": func(d string) error { return os.WriteFile(filepath.Join(d, "a/b"), []byte("in A"), 0o644) },
		"a mode":   func(d string) error { return os.Chmod(filepath.Join(d, "run.sh"), 0o700) },
		"a target": func(d string) error {
			p := filepath.Join(d, "link")
			if err := os.Remove(p); err != nil {
				return err
			}
			return os.Symlink("src/./main.go", p)
		},
		"an empty dir": func(d string) error { return os.Mkdir(filepath.Join(d, "src/new"), 0o755) },
	}
	seen := map[string]string{ma.Digest(): "base"}
	for name, mutate := range mutations {
		d := filepath.Join(root, strings.ReplaceAll(name, " ", "-"))
		build(t, d, baseTree()...)
		if err := mutate(d); err != nil {
			t.Fatal(err)
		}
		digest := snapshot(t, d, s).Digest()
		if prev, ok := seen[digest]; ok {
			t.Errorf("changing %s gives the digest of %s", name, prev)
		}
		seen[digest] = name
	}
}

// mtimes, atimes and directory permission bits the owner lacks are not
// part of the digest; a directory is recorded with owner rwx.
func TestSnapshot_DirModeRecordedWithOwnerRWX(t *testing.T) {
	s, _ := openStore(t)
	d := t.TempDir()
	build(t, d, dir("ro", 0o555))
	m := snapshot(t, d, s)
	if m.Entries[0].Mode != 0o755 {
		t.Fatalf("mode %#o, want 0755", m.Entries[0].Mode)
	}
}

// A file of 2.5 chunks is three chunks (ChunkSize, ChunkSize, half); equal
// chunks have one name, in one file or across files, and Chunks lists each
// once; an empty file has none.
func TestSnapshot_Chunking(t *testing.T) {
	s, _ := openStore(t)
	d := t.TempDir()
	one := bytes.Repeat([]byte("0123456789abcdef"), workspace.ChunkSize/16)
	half := bytes.Repeat([]byte("x"), workspace.ChunkSize/2)
	big := slices.Concat(one, one, half)
	build(t, d,
		file("big", string(big), 0o644),
		file("copy", string(big), 0o644),
		file("empty", "", 0o644),
		file("exact", string(one), 0o644),
	)
	m := snapshot(t, d, s)
	byPath := map[string]workspace.Entry{}
	for _, e := range m.Entries {
		byPath[e.Path] = e
	}
	e := byPath["big"]
	if e.Size != int64(len(big)) || len(e.Chunks) != 3 {
		t.Fatalf("big: size %d, %d chunks", e.Size, len(e.Chunks))
	}
	if e.Chunks[0] != e.Chunks[1] || e.Chunks[0] != hashOf(one) || e.Chunks[2] != hashOf(half) {
		t.Fatalf("big chunks %v", e.Chunks)
	}
	if !slices.Equal(byPath["copy"].Chunks, e.Chunks) {
		t.Fatal("identical files do not share chunks")
	}
	if x := byPath["empty"]; x.Size != 0 || len(x.Chunks) != 0 {
		t.Fatalf("empty file: %+v", x)
	}
	if x := byPath["exact"]; len(x.Chunks) != 1 {
		t.Fatalf("a file of exactly ChunkSize has %d chunks", len(x.Chunks))
	}
	want := []string{hashOf(one), hashOf(half)}
	slices.Sort(want)
	if got := m.Chunks(); !slices.Equal(got, want) {
		t.Fatalf("Chunks() = %v, want %v", got, want)
	}
	if m.Bytes() != int64(2*len(big)+len(one)) {
		t.Fatalf("Bytes() = %d", m.Bytes())
	}
	for i, wantLen := range []int{workspace.ChunkSize, workspace.ChunkSize, workspace.ChunkSize / 2} {
		b, err := s.Get(e.Chunks[i])
		if err != nil || len(b) != wantLen {
			t.Fatalf("chunk %d: %d bytes, %v", i, len(b), err)
		}
	}
}

// The empty manifest (a missing workspace) has a fixed encoding and digest.
func TestSnapshot_MissingDirIsEmptyManifest(t *testing.T) {
	s, _ := openStore(t)
	m := snapshot(t, filepath.Join(t.TempDir(), "nope"), s)
	if len(m.Entries) != 0 || string(m.Marshal()) != `{"entries":[]}` {
		t.Fatalf("manifest %s", m.Marshal())
	}
	if m.Digest() != (&workspace.Manifest{}).Digest() {
		t.Fatal("empty digests differ")
	}
	if _, err := s.Manifest(m.Digest()); err != nil {
		t.Fatalf("empty manifest not stored: %v", err)
	}
}

// Decoding is strict (no unknown fields, no trailing data, a valid
// structure), and re-encoding a decoded manifest gives the same bytes.
func TestUnmarshalManifest(t *testing.T) {
	s, _ := openStore(t)
	d := t.TempDir()
	build(t, d, baseTree()...)
	m := snapshot(t, d, s)
	got, err := workspace.UnmarshalManifest(m.Marshal())
	if err != nil || !bytes.Equal(got.Marshal(), m.Marshal()) {
		t.Fatalf("round trip: %v", err)
	}
	for _, bad := range []string{
		`{"entries":[],"owner":"root"}`,
		`{"entries":[{"path":"a","type":"dir","mode":493,"uid":0}]}`,
		`{"entries":[]} {}`,
		`{"entries":[`,
	} {
		if _, err := workspace.UnmarshalManifest([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
	_, err = workspace.UnmarshalManifest([]byte(`{"entries":[{"path":"../x","type":"file","mode":420}]}`))
	wantRefusal(t, err)
}

// VerifyManifest accepts the bytes a digest names and nothing else: not
// other bytes, not a non-canonical spelling of the same manifest.
func TestVerifyManifest(t *testing.T) {
	m := &workspace.Manifest{Entries: []workspace.Entry{{Path: "a", Type: workspace.TypeDir, Mode: 0o755}}}
	if _, err := workspace.VerifyManifest(m.Digest(), m.Marshal()); err != nil {
		t.Fatal(err)
	}
	other := &workspace.Manifest{}
	if _, err := workspace.VerifyManifest(m.Digest(), other.Marshal()); !errors.Is(err, workspace.ErrDigestMismatch) {
		t.Fatalf("other bytes: %v", err)
	}
	spaced := []byte(`{"entries": [{"path":"a","type":"dir","mode":493}]}`)
	if _, err := workspace.VerifyManifest("sha256:"+hashOf(spaced), spaced); !errors.Is(err, workspace.ErrDigestMismatch) {
		t.Fatalf("non-canonical bytes: %v", err)
	}
	_, err := workspace.VerifyManifest("md5:abc", m.Marshal())
	wantRefusal(t, err)
}
