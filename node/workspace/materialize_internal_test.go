package workspace

import (
	"os"
	"path/filepath"
	"testing"
)

// The fallback for systems without an atomic exchange puts the new tree
// in place and hands back the old one for removal.
func TestReplaceByRenames(t *testing.T) {
	parent := t.TempDir()
	dir, tmp := filepath.Join(parent, "ws"), filepath.Join(parent, ".ws.new-1")
	for _, d := range []string{dir, tmp} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "old"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tmp, "new"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	old, err := replaceByRenames(dir, tmp)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); err != nil {
		t.Fatalf("new tree not in place: %v", err)
	}
	if _, err := os.Stat(filepath.Join(old, "old")); err != nil {
		t.Fatalf("old tree not handed back: %v", err)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("temp dir still there: %v", err)
	}

	// When the new tree cannot be moved in, the old one is moved back.
	if _, err := replaceByRenames(dir, filepath.Join(parent, "absent")); err == nil {
		t.Fatal("replacing with a missing tree succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, "new")); err != nil {
		t.Fatalf("dir not restored: %v", err)
	}
}
