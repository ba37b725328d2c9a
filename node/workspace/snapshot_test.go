package workspace_test

import (
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/fak-dev/fak/node/workspace"
)

// Snapshot refuses what cannot be moved safely, naming it, and never
// follows it.
func TestSnapshot_Refusals(t *testing.T) {
	cases := map[string]struct {
		make func(t *testing.T, d string)
		path string
	}{
		"fifo": {func(t *testing.T, d string) {
			if err := syscall.Mkfifo(filepath.Join(d, "sub/pipe"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "sub/pipe"},
		"socket": {func(t *testing.T, d string) {
			l, err := net.Listen("unix", filepath.Join(d, "sub/sock"))
			if err != nil {
				t.Skipf("unix socket: %v", err)
			}
			t.Cleanup(func() { l.Close() })
		}, "sub/sock"},
		"symlink to /etc/passwd": {func(t *testing.T, d string) {
			build(t, d, link("sub/passwd", "/etc/passwd"))
		}, "sub/passwd"},
		"symlink ../../x": {func(t *testing.T, d string) {
			build(t, d, link("sub/x", "../../x"))
		}, "sub/x"},
		"symlink .. from the root": {func(t *testing.T, d string) {
			build(t, d, link("up", ".."))
		}, "up"},
		"symlink climbing out through another symlink": {func(t *testing.T, d string) {
			build(t, d, link("sub/up", ".."), link("esc", "sub/up/.."))
		}, "esc"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			s, _ := openStore(t)
			d := t.TempDir()
			build(t, d, dir("sub", 0o755), file("sub/ok", "fine", 0o644))
			c.make(t, d)
			m, err := workspace.Snapshot(d, s, 0)
			r := wantRefusal(t, err)
			if m != nil || r.Path != c.path {
				t.Fatalf("refused %q (%v), want %q", r.Path, r, c.path)
			}
		})
	}
}

// The size limit is checked as the walk goes: a tree over it stops at the
// first file that crosses it, before reading that file.
func TestSnapshot_OverMaxStopsEarly(t *testing.T) {
	s, storeDir := openStore(t)
	d := t.TempDir()
	build(t, d, file("a", "0123456789", 0o644))
	// A sparse 64 GiB file: reading it would take minutes.
	f, err := os.Create(filepath.Join(d, "b-huge"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(64 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	build(t, d, file("c", "never reached", 0o644))
	start := time.Now()
	_, err = workspace.Snapshot(d, s, 1<<20)
	if r := wantRefusal(t, err); r.Path != "b-huge" {
		t.Fatalf("refused %q", r.Path)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("took %v: the huge file was read", time.Since(start))
	}
	if n := countChunks(t, storeDir); n != 1 {
		t.Fatalf("%d chunks stored, want only a's", n)
	}

	// Exactly at the limit is fine; one byte over is not.
	s2, _ := openStore(t)
	d2 := t.TempDir()
	build(t, d2, file("a", "12345", 0o644), file("b", "67890", 0o644))
	if _, err := workspace.Snapshot(d2, s2, 10); err != nil {
		t.Fatalf("at the limit: %v", err)
	}
	_, err = workspace.Snapshot(d2, s2, 9)
	if r := wantRefusal(t, err); r.Path != "b" {
		t.Fatalf("refused %q", r.Path)
	}
}

// The workspace itself must be a directory: a symlink in its place is not
// followed.
func TestSnapshot_RootNotADirectory(t *testing.T) {
	s, _ := openStore(t)
	root := t.TempDir()
	build(t, root, dir("real", 0o755), file("real/secret", "x", 0o600), link("ws", "real"))
	_, err := workspace.Snapshot(filepath.Join(root, "ws"), s, 0)
	wantRefusal(t, err)
}
