package workspace_test

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/fak-dev/fak/node/workspace"
)

// node is one thing to create in a test tree.
type node struct {
	path   string
	kind   string // "dir", "file", "symlink"
	mode   fs.FileMode
	data   string // file content
	target string // symlink target
}

func dir(p string, mode fs.FileMode) node { return node{path: p, kind: "dir", mode: mode} }
func file(p, data string, mode fs.FileMode) node {
	return node{path: p, kind: "file", mode: mode, data: data}
}
func link(p, target string) node { return node{path: p, kind: "symlink", target: target} }

// build creates nodes under root (created if needed), parents first as
// listed, with exact modes (the umask undone).
func build(t testing.TB, root string, nodes ...node) {
	t.Helper()
	if err := os.MkdirAll(root, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		p := filepath.Join(root, filepath.FromSlash(n.path))
		var err error
		switch n.kind {
		case "dir":
			if err = os.Mkdir(p, 0o700); err == nil {
				err = os.Chmod(p, n.mode)
			}
		case "file":
			if err = os.WriteFile(p, []byte(n.data), 0o600); err == nil {
				err = os.Chmod(p, n.mode)
			}
		case "symlink":
			err = os.Symlink(n.target, p)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// listTree describes every entry under root by its relative path: type,
// permission bits and content hash or target. Modes of dirs are not
// compared to 0o700-less values since Snapshot records them with owner rwx.
func listTree(t testing.TB, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == root {
				return filepath.SkipDir
			}
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "symlink -> " + target
		case fi.IsDir():
			out[rel] = "dir " + fi.Mode().Perm().String()
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			out[rel] = "file " + fi.Mode().Perm().String() + " " + hashOf(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t testing.TB, a, b map[string]string) {
	t.Helper()
	for k, v := range a {
		if b[k] != v {
			t.Errorf("%s: %q vs %q", k, v, b[k])
		}
	}
	for k, v := range b {
		if _, ok := a[k]; !ok {
			t.Errorf("%s: only in the second tree (%q)", k, v)
		}
	}
}

func hashOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func openStore(t testing.TB) (*workspace.Store, string) {
	t.Helper()
	d := filepath.Join(t.TempDir(), "store")
	s, err := workspace.OpenStore(d)
	if err != nil {
		t.Fatal(err)
	}
	return s, d
}

func snapshot(t testing.TB, dir string, s *workspace.Store) *workspace.Manifest {
	t.Helper()
	m, err := workspace.Snapshot(dir, s, 0)
	if err != nil {
		t.Fatalf("snapshot %s: %v", dir, err)
	}
	return m
}

// chunkFile finds the file a store keeps the chunk hash in: a file named
// by the hash (a loose chunk, a manifest), or the pack whose index lists
// it (packs/<id>.pack beside packs/<id>.idx).
func chunkFile(t testing.TB, storeDir, hash string) string {
	t.Helper()
	found := ""
	_ = filepath.WalkDir(storeDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Name() == hash {
			found = p
		}
		if id, ok := strings.CutSuffix(p, ".idx"); ok && found == "" && slices.Contains(indexHashes(t, p), hash) {
			found = id + ".pack"
		}
		return nil
	})
	if found == "" {
		t.Fatalf("chunk %s not in %s", hash, storeDir)
	}
	return found
}

// indexHashes is the chunks a pack index lists.
func indexHashes(t testing.TB, idx string) []string {
	t.Helper()
	b, err := os.ReadFile(idx)
	if err != nil {
		t.Fatal(err)
	}
	var hs []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.Fields(line); len(f) == 3 {
			hs = append(hs, f[0])
		}
	}
	return hs
}

// countChunks is how many chunks the store holds: loose ones under
// chunks/ and those the pack indexes list.
func countChunks(t testing.TB, storeDir string) int {
	t.Helper()
	n := 0
	_ = filepath.WalkDir(storeDir, func(p string, d fs.DirEntry, err error) error {
		rel, _ := filepath.Rel(storeDir, p)
		switch {
		case err != nil || !d.Type().IsRegular():
		case len(d.Name()) == 64 && strings.HasPrefix(rel, "chunks"+string(filepath.Separator)):
			n++
		case strings.HasSuffix(p, ".idx") && !strings.HasPrefix(d.Name(), "."):
			n += len(indexHashes(t, p))
		}
		return nil
	})
	return n
}

func wantRefusal(t testing.TB, err error) *workspace.Refusal {
	t.Helper()
	var r *workspace.Refusal
	if !errors.As(err, &r) {
		t.Fatalf("want a *workspace.Refusal, got %v", err)
	}
	if !strings.HasPrefix(r.Error(), "workspace refused: ") {
		t.Fatalf("refusal text %q", r.Error())
	}
	return r
}
