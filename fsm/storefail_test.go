package fsm

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A write of the database that fails stops the FSM where it was — no
// panic (it was one: raft's FSM.Apply cannot return an error), the owner
// told once, every later entry answered STORAGE_FAILED, no snapshot — and
// a reopened database continues from the last index it wrote.
func TestStoreFailureStopsApplying(t *testing.T) {
	h := newHarness(t)
	var full bool
	var told []*StoreError
	h.f.SetStoreHooks(func() error {
		if full {
			return &fs.PathError{Op: "write", Path: h.f.path, Err: syscall.ENOSPC}
		}
		return nil
	}, func(se *StoreError) { told = append(told, se) })

	if r := h.apply1(create("ses_a")); r.Error != nil {
		t.Fatalf("create: %v", r.Error)
	}
	before := h.f.AppliedIndex()
	full = true
	wantErr(t, h.apply1(appendEv("ses_a", ev("note", "lost"))), ReasonStorageFailed)
	if len(told) != 1 || !errors.Is(told[0], syscall.ENOSPC) || told[0].Path != h.f.path {
		t.Fatalf("owner told %v", told)
	}
	full = false // even with room again, this process applies nothing more
	wantErr(t, h.apply1(appendEv("ses_a", ev("note", "after"))), ReasonStorageFailed)
	if len(told) != 1 || h.f.StoreFailed() == nil || h.f.AppliedIndex() != before {
		t.Fatalf("told %d times, StoreFailed %v, applied %d (was %d)", len(told), h.f.StoreFailed(), h.f.AppliedIndex(), before)
	}
	if _, err := h.f.Snapshot(); err == nil || !strings.Contains(err.Error(), "no snapshot") {
		t.Fatalf("snapshot of a failed store: %v", err)
	}

	dir := filepath.Dir(h.f.path)
	if err := h.f.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.f = f
	if f.AppliedIndex() != before {
		t.Fatalf("reopened at %d, want %d", f.AppliedIndex(), before)
	}
	h.index = before
	if r := h.apply1(appendEv("ses_a", ev("note", "again"))); r.Error != nil {
		t.Fatalf("append after reopening: %v", r.Error)
	}
	if j := h.journal("ses_a"); j[len(j)-1] != "3 note again" {
		t.Fatalf("journal after reopening: %q", j)
	}
}

// The same on a real full disk: a small tmpfs (root only; CI runs as
// root). bbolt answers ENOSPC from its write, and the FSM stops there.
func TestStoreFullOnTmpfs(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	dir := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("mount tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	f, err := Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, f: f, clock: t0}
	defer f.Close()
	var told *StoreError
	f.SetStoreHooks(nil, func(se *StoreError) { told = se })
	if r := h.apply1(create("ses_a")); r.Error != nil {
		t.Fatalf("create: %v", r.Error)
	}
	big := strings.Repeat("x", 64<<10)
	for i := 0; i < 200 && told == nil; i++ {
		r := h.apply1(appendEv("ses_a", ev("note", big)))
		if told == nil && r.Error != nil {
			t.Fatalf("append %d: %v", i, r.Error)
		}
		if told != nil {
			wantErr(t, r, ReasonStorageFailed)
		}
	}
	if told == nil || !errors.Is(told, syscall.ENOSPC) {
		t.Fatalf("a 2 MiB disk took 200 appends of 64 KiB: told %v", told)
	}
	t.Logf("%v (applied %d)", told, f.AppliedIndex())
}
