package cluster

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/fak-dev/fak/fsm"
)

// A snapshot copies the whole FSM database, and Raft's sink checksums
// every byte and fsyncs the file at the end. Unpaced, three nodes copying
// 110 MB at once took both cores and then flushed 330 MB in one go, and
// writes in that window waited: p99 17× what it was outside one. So the
// copy a node takes while it serves is paced (Config.SnapshotRate) and
// its file is flushed as it goes (writeback, below), leaving the CPU and
// the disk's queue to the Raft log. A snapshot before a clean shutdown
// serves no one and runs unpaced.

// pacedSink is a snapshot sink written at most rate bytes a second, whose
// file's dirty pages are handed to the disk every writebackEvery bytes. A
// compressed snapshot is paced by the state it copies instead (PaceState):
// it writes a fraction of those bytes, and reading and compressing them is
// the work that competes with the Raft log.
type pacedSink struct {
	raft.SnapshotSink
	rate    int64        // bytes/s; 0: unpaced
	unpaced *atomic.Bool // set: go as fast as possible from now on
	start   time.Time
	n       int64
	flush   *writeback
	// state: the bytes of state copied, once the FSM reports them
	// (byState); the pace then follows them, not the bytes written.
	state   int64
	byState bool
}

var _ fsm.StatePacer = (*pacedSink)(nil)

// pacedChunk is how much is written between two looks at the clock.
const pacedChunk = 1 << 20

func newPacedSink(sink raft.SnapshotSink, rate int64, unpaced *atomic.Bool, snapshotDir string) *pacedSink {
	p := &pacedSink{SnapshotSink: sink, rate: rate, unpaced: unpaced, start: time.Now()}
	if snapshotDir != "" {
		// Raft's file store writes <dir>/<id>.tmp/state.bin until Close.
		p.flush = openWriteback(filepath.Join(snapshotDir, sink.ID()+".tmp", "state.bin"))
	}
	return p
}

func (p *pacedSink) Write(b []byte) (int, error) {
	written := 0
	for len(b) > 0 {
		chunk := b[:min(len(b), pacedChunk)]
		n, err := p.SnapshotSink.Write(chunk)
		written += n
		p.n += int64(n)
		if err != nil {
			return written, err
		}
		b = b[n:]
		p.flush.wrote(int64(n))
		if !p.byState {
			p.wait(p.n)
		}
	}
	return written, nil
}

// PaceState accounts n more bytes of state copied and waits until the
// rate allows them.
func (p *pacedSink) PaceState(n int) {
	p.byState = true
	p.state += int64(n)
	p.wait(p.state)
}

// wait sleeps until done bytes are due at the rate.
func (p *pacedSink) wait(done int64) {
	if p.rate <= 0 || p.unpaced.Load() {
		return
	}
	due := p.start.Add(time.Duration(float64(done) / float64(p.rate) * float64(time.Second)))
	if d := time.Until(due); d > 0 {
		time.Sleep(d)
	}
}

func (p *pacedSink) Close() error {
	p.flush.close()
	return p.SnapshotSink.Close()
}

func (p *pacedSink) Cancel() error {
	p.flush.close()
	return p.SnapshotSink.Cancel()
}

// writebackEvery is how many bytes of a snapshot may be dirty before they
// are handed to the disk.
const writebackEvery = 8 << 20

// writeback starts the disk writing a file's dirty pages as it grows, so
// its final fsync has little left and does not hold the file system's
// journal (and the Raft log's fsync behind it) for long. A nil writeback
// does nothing.
type writeback struct {
	f       *os.File
	off     int64 // flushed up to here
	written int64
}

func openWriteback(path string) *writeback {
	f, err := os.Open(path)
	if err != nil {
		return nil // not Raft's file store layout: the final fsync does it all
	}
	return &writeback{f: f}
}

func (w *writeback) wrote(n int64) {
	if w == nil {
		return
	}
	w.written += n
	if w.written-w.off >= writebackEvery {
		startWriteback(w.f, w.off, w.written-w.off)
		w.off = w.written
	}
}

func (w *writeback) close() {
	if w != nil {
		_ = w.f.Close()
	}
}
