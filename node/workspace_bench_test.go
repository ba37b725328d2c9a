package node_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/testcluster"
)

// fill100MB writes 1,000 files of 100 KB of random bytes under ws.
func fill100MB(b *testing.B, ws string) {
	b.Helper()
	buf := make([]byte, 100_000)
	for i := 0; i < 1000; i++ {
		_, _ = rand.Read(buf)
		dir := filepath.Join(ws, fmt.Sprintf("d%02d", i/50))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%04d", i)), buf, 0o600); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMoveWorkspace100MB moves sessions whose workspace holds 1,000
// files of 100 KB (random, so no chunk is shared) between the two
// followers of a loopback fleet, one new session per iteration: the first
// move carries every chunk; the move back finds them in the first node's
// store and sends none (the workspace did not change); then one file
// changes and the next move sends only its chunk. Times are request →
// CUTOVER_COMMITTED (leader-stamped); p50 and p99 over the iterations.
// Each workspace is synced to disk before its first move, as one an agent
// wrote over time would be.
//
// Before it starts, it writes and removes warmPageCache bytes: a virtual
// machine backs guest memory on first touch, which makes a file system
// write into never-used memory several times slower than into memory
// used before (measured here: 300–400 MB/s against 2–5 GB/s), and a host
// that has run for a while has touched all of its memory.
func BenchmarkMoveWorkspace100MB(b *testing.B) {
	warmPageCache(b, 4<<30)
	c := benchFleet(b, testcluster.Options{})
	leader := c.Leader()
	fs := c.Followers()
	cl := c.Sessions(leader)
	var first, back, changed, fetch, disk []time.Duration
	var lastID string
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		disk = append(disk, write100MB(b, fs[1].DataDir))
		r, err := cl.CreateSession(context.Background(), connect.NewRequest(&fakv1.CreateSessionRequest{
			Title: "workspace bench", Placement: &fakv1.Placement{Node: fs[0].Name},
		}))
		if err != nil {
			b.Fatal(err)
		}
		id := r.Msg.Session.SessionId
		ws := filepath.Join(fs[0].DataDir, "workspaces", id)
		if err := os.MkdirAll(ws, 0o700); err != nil {
			b.Fatal(err)
		}
		fill100MB(b, ws)
		syscall.Sync()
		b.StartTimer()
		var fetched time.Duration
		move := func(to string) time.Duration {
			resp, err := cl.MoveSession(context.Background(), connect.NewRequest(&fakv1.MoveSessionRequest{SessionId: id, ToNode: to}))
			if err != nil {
				b.Fatal(err)
			}
			moveID := resp.Msg.Move.MoveId
			s := awaitSession(b, leader, id, 2*time.Minute, func(s *fsmpb.Session) bool {
				return s.Move.GetMoveId() == moveID && !fsm.MoveOpen(s.Move)
			})
			if s.Move.State != fsm.MoveCutoverCommitted || s.Move.Workspace.GetBytes() != 100_000_000 {
				b.Fatalf("move ended %s (%s), workspace %v", s.Move.State, s.Move.Reason, s.Move.Workspace)
			}
			fetched = time.Duration(s.Move.Transfer.GetFetchNanos())
			return time.Duration(s.Move.StateUnixNano - s.Move.RequestedUnixNano)
		}
		first = append(first, move(fs[1].Name))
		fetch = append(fetch, fetched)
		back = append(back, move(fs[0].Name))
		// One changed file on fs[0]; the move sends that file's chunk.
		f := filepath.Join(ws, "d00", "f0000")
		if err := os.WriteFile(f, bytes.Repeat([]byte{byte(i)}, 100_000), 0o600); err != nil {
			b.Fatal(err)
		}
		changed = append(changed, move(fs[1].Name))
		lastID = id
	}
	b.StopTimer()
	evs, _, err := leader.Running().FSM().Events(lastID, 1, 1<<20)
	if err != nil {
		b.Fatal(err)
	}
	for _, ev := range evs {
		if strings.HasPrefix(ev.Kind, "move.") {
			b.Logf("%s %s %s", ev.Kind, ev.Text, ev.Data)
		}
	}
	reportPercentiles(b, first, "first-move")
	reportPercentiles(b, back, "move-back")
	reportPercentiles(b, changed, "one-file-changed")
	// The first move's fetch of the 100 MB, beside writing as much to the
	// same disk the way a store writes a pack.
	reportP50(b, fetch, "fetch")
	reportP50(b, disk, "disk-write")
	slices.Sort(fetch)
	slices.Sort(disk)
	b.ReportMetric(100/fetch[len(fetch)/2].Seconds(), "fetch-MB/s")
	b.ReportMetric(100/disk[len(disk)/2].Seconds(), "disk-write-MB/s")
}

// warmPageCache writes n bytes to a file in a temp dir and removes it,
// so that the page cache later reuses memory the machine has touched.
func warmPageCache(b *testing.B, n int64) {
	b.Helper()
	f, err := os.CreateTemp(b.TempDir(), "warm")
	if err != nil {
		b.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 4<<20)
	for off := int64(0); off < n; off += int64(len(buf)) {
		if _, err := f.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
}

// write100MB writes 1,000 random chunks of 100 KB through one buffered
// file in dir, as a store's pack takes a fetch, then fsyncs it, and
// returns how long that took.
func write100MB(b *testing.B, dir string) time.Duration {
	chunk := make([]byte, 100_000)
	if _, err := rand.Read(chunk); err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "disk-bench")
	defer os.Remove(path)
	start := time.Now()
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	for i := 0; i < 1000; i++ {
		chunk[0] = byte(i)
		if _, err := w.Write(chunk); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// BenchmarkWorkspaceCopy100MB measures the copy a host ships to another
// node after each turn (the recovery copy): a workspace of 1,000 files of
// 100 KB with one file changed before each turn. Reported: the time from
// the turn's end to the copy held on the other node (the host's snapshot,
// which reads only the changed file, and the copy node fetching what it
// lacks), as the copy's record says, and the bytes that crossed.
func BenchmarkWorkspaceCopy100MB(b *testing.B) {
	c := benchFleet(b, testcluster.Options{})
	leader, host := c.Leader(), c.Followers()[0]
	s := newBenchSession(b, c, "echo", host, host)
	ws := filepath.Join(host.DataDir, "workspaces", s.id)
	fill100MB(b, ws)
	copied := func(in uint64) *fsmpb.WorkspaceCopy {
		return awaitSession(b, leader, s.id, 2*time.Minute, func(x *fsmpb.Session) bool {
			return x.WorkspaceCopy.GetAfterInput() == in
		}).WorkspaceCopy
	}
	in, err := s.turn("the first copy carries everything", time.Minute)
	if err != nil {
		b.Fatal(err)
	}
	first := copied(in)
	b.Logf("first copy: %s, %d bytes sent, to %s", time.Duration(first.CopyNanos), first.Transfer.GetBytesSent(), first.Node)
	var took []time.Duration
	var sent, present uint64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f := filepath.Join(ws, "d00", "f0000")
		if err := os.WriteFile(f, bytes.Repeat([]byte{byte(i + 1)}, 100_000), 0o600); err != nil {
			b.Fatal(err)
		}
		in, err := s.turn(fmt.Sprintf("turn %d", i), time.Minute)
		if err != nil {
			b.Fatal(err)
		}
		cp := copied(in)
		took = append(took, time.Duration(cp.CopyNanos))
		sent += cp.Transfer.GetBytesSent()
		present += cp.Transfer.GetBytesPresent()
	}
	b.StopTimer()
	reportPercentiles(b, took, "copy")
	b.ReportMetric(float64(sent)/float64(b.N), "sent-B/op")
	b.ReportMetric(float64(present)/float64(b.N), "present-B/op")
}
