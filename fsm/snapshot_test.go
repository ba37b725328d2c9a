package fsm

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
	"google.golang.org/protobuf/proto"
)

func restoreBytes(f *FSM, b []byte) error {
	return f.Restore(io.NopCloser(bytes.NewReader(b)))
}

// view is everything a client can read from an FSM, rendered as text.
func view(t *testing.T, f *FSM) string {
	t.Helper()
	var b strings.Builder
	ss, more, err := f.Sessions("", 1<<20)
	if err != nil || more {
		t.Fatalf("Sessions: more %v, err %v", more, err)
	}
	for _, s := range ss {
		b.WriteString(s.String() + "\n")
		evs, head, err := f.Events(s.SessionId, 1, 1<<20)
		if err != nil || head != s.HeadSeq || uint64(len(evs)) != head {
			t.Fatalf("Events(%s): %d events, head %d, err %v; session head %d", s.SessionId, len(evs), head, err, s.HeadSeq)
		}
		for _, e := range evs {
			b.WriteString("  " + e.String() + "\n")
		}
	}
	return b.String()
}

func applyAll(t *testing.T, log []*raft.Log, fs ...*FSM) {
	t.Helper()
	for _, f := range fs {
		f.ApplyBatch(log)
	}
}

func TestSnapshotRestoreRoundTrip(t *testing.T) {
	src := newHarness(t)
	log := scriptLog(src)
	applyAll(t, log, src.f)

	dst := newHarness(t)
	// The destination has state of its own, which Restore must replace.
	dst.apply(create("local-only"), appendEv("local-only", ev("note", "x")))

	if err := restoreBytes(dst.f, snapshotBytes(t, src.f)); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if got, want := dst.f.AppliedIndex(), src.f.AppliedIndex(); got != want || got != log[len(log)-1].Index {
		t.Fatalf("AppliedIndex after restore = %d, want %d", got, want)
	}
	if got, want := view(t, dst.f), view(t, src.f); got != want {
		t.Fatalf("restored view differs:\n%s", firstDiff(got, want))
	}
	if got, want := dump(t, dst.f, true), dump(t, src.f, true); got != want {
		t.Fatalf("restored database differs:\n%s", firstDiff(got, want))
	}
	if _, err := dst.f.Session("local-only"); ReasonOf(err) != ReasonNotFound {
		t.Fatalf("pre-restore session survived restore: err %v", err)
	}

	// Both replicas continue from the same log and stay equal, including
	// the dedup table carried by the snapshot.
	more := []*raft.Log{
		src.entry(req("create-3", create("never-again"))),            // remembered
		src.entry(appendEv("s00", ev("note", "after restore"))),      //
		src.entry(create("new-after-restore")),                       //
		src.entry(appendIf("s01", 0, ev("note", "stale"))),           // mismatch
		src.entry(at(src.clock+2*DedupWindow, stop("s00", "LATER"))), // prunes
	}
	applyAll(t, more, src.f, dst.f)
	if got, want := dump(t, dst.f, true), dump(t, src.f, true); got != want {
		t.Fatalf("replicas diverged after restore:\n%s", firstDiff(got, want))
	}
	if dst.f.AppliedIndex() != more[len(more)-1].Index {
		t.Fatalf("AppliedIndex = %d, want %d", dst.f.AppliedIndex(), more[len(more)-1].Index)
	}
	if _, err := dst.f.Session("never-again"); err == nil {
		t.Fatal("request id remembered in the snapshot was applied again")
	}
}

func TestSnapshotIsPointInTime(t *testing.T) {
	// Persist streams the state as of Snapshot, even if entries are applied
	// before it runs (raft persists concurrently with Apply).
	h := newHarness(t)
	h.apply(create("s1"), appendEv("s1", ev("note", "before")))
	wantView, wantIndex := view(t, h.f), h.f.AppliedIndex()

	snap, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	h.apply(appendEv("s1", ev("note", "after")), create("s2"))
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	snap.Release() // idempotent

	r := newHarness(t)
	if err := restoreBytes(r.f, sink.Bytes()); err != nil {
		t.Fatal(err)
	}
	if got := view(t, r.f); got != wantView {
		t.Fatalf("restored view:\n%s\nwant:\n%s", got, wantView)
	}
	if r.f.AppliedIndex() != wantIndex {
		t.Fatalf("AppliedIndex = %d, want %d", r.f.AppliedIndex(), wantIndex)
	}
}

func TestRestoreRejectsGarbage(t *testing.T) {
	good := func() []byte {
		h := newHarness(t)
		h.apply(create("x"), appendEv("x", ev("note", strings.Repeat("y", 10000))))
		return snapshotBytes(t, h.f)
	}()
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"short text", []byte("not a database")},
		{"zero pages", make([]byte, 64<<10)},
		{"pattern", bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 16<<10)},
		{"corrupt meta pages", func() []byte {
			b := slices.Clone(good)
			for i := range 2 * os.Getpagesize() {
				b[i] ^= 0x5a
			}
			return b
		}()},
		{"truncated to half", good[:len(good)/2]},
		{"truncated by one page", good[:len(good)-os.Getpagesize()]},
		{"truncated by one byte", good[:len(good)-1]},
		{"only meta page 0", good[:os.Getpagesize()]},
		{"meta page 0 and a bit", good[:os.Getpagesize()+100]},
		{"header only", good[:100]},
		{"valid bbolt file without fsm buckets", emptyBolt(t)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.apply(create("keep"), appendEv("keep", ev("note", "me")))
			before, beforeView, index := dump(t, h.f, true), view(t, h.f), h.f.AppliedIndex()

			if err := restoreBytes(h.f, tt.data); err == nil {
				t.Fatal("Restore accepted garbage")
			}
			if got := dump(t, h.f, true); got != before {
				t.Fatalf("failed restore changed the database:\n%s", firstDiff(got, before))
			}
			if got := view(t, h.f); got != beforeView || h.f.AppliedIndex() != index {
				t.Fatalf("failed restore changed what clients see")
			}
			// Still usable.
			wantErr(t, h.apply1(appendEv("keep", ev("note", "still here"))), "")
			h.wantJournal("keep", withJournal("keep", "3 note me", "4 note still here")...)
			matches, _ := filepath.Glob(filepath.Join(filepath.Dir(h.f.path), "*"))
			if len(matches) != 1 {
				t.Fatalf("files left beside the database: %v", matches)
			}
		})
	}
}

type failingReader struct{ n int }

func (r *failingReader) Read(p []byte) (int, error) {
	if r.n <= 0 {
		return 0, errors.New("connection reset")
	}
	n := min(len(p), r.n)
	clear(p[:n])
	r.n -= n
	return n, nil
}

func TestRestoreReadError(t *testing.T) {
	h := newHarness(t)
	h.apply1(create("keep"))
	before := dump(t, h.f, true)
	if err := h.f.Restore(io.NopCloser(&failingReader{n: 10000})); err == nil {
		t.Fatal("Restore ignored a read error")
	}
	if dump(t, h.f, true) != before {
		t.Fatal("failed restore changed the database")
	}
}

func TestRestoreClosesReader(t *testing.T) {
	h := newHarness(t)
	src := newHarness(t)
	src.apply1(create("s1"))
	for _, data := range [][]byte{snapshotBytes(t, src.f), []byte("garbage")} {
		rc := &closeRecorder{Reader: bytes.NewReader(data)}
		_ = h.f.Restore(rc)
		if !rc.closed {
			t.Fatal("Restore did not close its reader")
		}
	}
}

type closeRecorder struct {
	io.Reader
	closed bool
}

func (c *closeRecorder) Close() error { c.closed = true; return nil }

func TestRestoreNotifiesWatchers(t *testing.T) {
	src := newHarness(t)
	src.apply1(create("s1"))
	h := newHarness(t)
	ch := h.f.Changed()
	if err := restoreBytes(h.f, snapshotBytes(t, src.f)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ch:
	default:
		t.Fatal("Changed channel still open after Restore")
	}
	if !proto.Equal(h.session("s1"), src.session("s1")) {
		t.Fatal("restored session differs")
	}
}

func TestPersistCancelsSinkOnError(t *testing.T) {
	h := newHarness(t)
	h.apply1(create("s1"))
	snap, err := h.f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Release()
	sink := &brokenSink{}
	if err := snap.Persist(sink); err == nil {
		t.Fatal("Persist ignored a write error")
	}
	if !sink.canceled || sink.closed {
		t.Fatalf("sink canceled=%v closed=%v, want canceled only", sink.canceled, sink.closed)
	}
}

type brokenSink struct{ memSink }

func (*brokenSink) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// emptyBolt returns a valid bbolt database file with no buckets.
func emptyBolt(t *testing.T) []byte {
	path := filepath.Join(t.TempDir(), "other.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
