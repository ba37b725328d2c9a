package provider

import (
	"os"
	"path/filepath"
	"testing"
)

// A transcript carried from another node sits under the old path's
// project key; relocateClaudeThread moves it (and its subagents'
// directory) under the key of where the CLI now runs.
func TestRelocateClaudeThread(t *testing.T) {
	state, cwd := t.TempDir(), t.TempDir()
	key, ok := claudeProjectKey(cwd)
	if !ok || key == "" || filepath.Base(key) != key {
		t.Fatalf("key %q of %s", key, cwd)
	}
	old := filepath.Join(state, "projects", "-data-n1-workspaces-s1")
	if err := os.MkdirAll(filepath.Join(old, "t1", "subagents"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(old, "t1.jsonl"), []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	relocateClaudeThread(state, cwd, "t1")
	want := filepath.Join(state, "projects", key)
	if _, err := os.Stat(filepath.Join(want, "t1.jsonl")); err != nil {
		t.Fatalf("transcript not under %s: %v", want, err)
	}
	if _, err := os.Stat(filepath.Join(want, "t1", "subagents")); err != nil {
		t.Fatalf("subagents not moved: %v", err)
	}
	// Already in place, or unknown, or a hostile id: nothing happens.
	relocateClaudeThread(state, cwd, "t1")
	relocateClaudeThread(state, cwd, "nope")
	relocateClaudeThread(state, cwd, "../t1")
	if _, err := os.Stat(filepath.Join(want, "t1.jsonl")); err != nil {
		t.Fatal(err)
	}
	if k, _ := claudeProjectKey("/a/b.c_d"); k != "-a-b-c-d" {
		t.Fatalf("key of /a/b.c_d: %q", k)
	}
}
