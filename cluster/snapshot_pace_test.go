package cluster

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// fileSink writes where Raft's file store does: <dir>/<id>.tmp/state.bin.
type fileSink struct {
	f        *os.File
	id       string
	closed   bool
	canceled bool
}

func newFileSink(t *testing.T, dir, id string) *fileSink {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, id+".tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, id+".tmp", "state.bin"))
	if err != nil {
		t.Fatal(err)
	}
	return &fileSink{f: f, id: id}
}

func (s *fileSink) Write(p []byte) (int, error) { return s.f.Write(p) }
func (s *fileSink) ID() string                  { return s.id }
func (s *fileSink) Close() error                { s.closed = true; return s.f.Close() }
func (s *fileSink) Cancel() error               { s.canceled = true; return s.f.Close() }

var _ raft.SnapshotSink = (*fileSink)(nil)

// Every byte reaches the sink's file, in order, through writes that span
// pacing chunks and writeback ranges; Close and Cancel reach the sink.
func TestPacedSink_WritesEverything(t *testing.T) {
	dir := t.TempDir()
	data := make([]byte, 3*writebackEvery+12345)
	if _, err := rand.Read(data); err != nil {
		t.Fatal(err)
	}
	sink := newFileSink(t, dir, "1-2-3")
	var unpaced atomic.Bool
	p := newPacedSink(sink, 0, &unpaced, dir)
	if p.flush == nil {
		t.Fatal("the sink's file was not found for writeback")
	}
	for rest := data; len(rest) > 0; {
		n := min(len(rest), 3<<20+7)
		if w, err := p.Write(rest[:n]); err != nil || w != n {
			t.Fatalf("write: %d, %v", w, err)
		}
		rest = rest[n:]
	}
	if err := p.Close(); err != nil || !sink.closed {
		t.Fatalf("close: %v (sink closed %v)", err, sink.closed)
	}
	got, err := os.ReadFile(filepath.Join(dir, "1-2-3.tmp", "state.bin"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the file holds %d bytes (%v), want the %d written", len(got), err, len(data))
	}
	other := newFileSink(t, dir, "4-5-6")
	if err := newPacedSink(other, 0, &unpaced, dir).Cancel(); err != nil || !other.canceled {
		t.Fatalf("cancel: %v (sink canceled %v)", err, other.canceled)
	}
	// A sink whose file is not where Raft's store puts it is written
	// without writeback.
	elsewhere := newFileSink(t, t.TempDir(), "7-8-9")
	if q := newPacedSink(elsewhere, 0, &unpaced, dir); q.flush != nil {
		t.Fatal("writeback opened a file that is not the sink's")
	}
}

// Once unpaced is set (a shutdown), a snapshot paced at a byte a second
// is written at once.
func TestPacedSink_UnpacedGoesAtOnce(t *testing.T) {
	dir := t.TempDir()
	var unpaced atomic.Bool
	p := newPacedSink(newFileSink(t, dir, "1"), 1, &unpaced, dir)
	unpaced.Store(true)
	writesAtOnce(t, p, 3*pacedChunk, "an unpaced write still waited on the rate")
}

// writesAtOnce writes n bytes to p and fails with why unless they go
// through well before any rate would let them.
func writesAtOnce(t *testing.T, p *pacedSink, n int, why string) {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := p.Write(make([]byte, n))
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal(why)
	}
}

// A compressed snapshot is paced by the state it copies: writes that carry
// few bytes do not wait, the state they stand for does. At 1 MiB/s, 2 MiB
// of state take at least two seconds whatever was written.
func TestPacedSink_PacesByStateOnceReported(t *testing.T) {
	dir := t.TempDir()
	var unpaced atomic.Bool
	p := newPacedSink(newFileSink(t, dir, "1"), 1<<20, &unpaced, dir)
	start := time.Now()
	for range 8 {
		p.PaceState(256 << 10)
		if _, err := p.Write(make([]byte, 8<<10)); err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(start); took < 1900*time.Millisecond {
		t.Fatalf("2 MiB of state at 1 MiB/s took %v", took)
	}
	// Bytes written no longer count against the rate: 4 MiB more written
	// with no state reported go at once.
	writesAtOnce(t, p, 4<<20, "a write after PaceState waited on the bytes written")
}
