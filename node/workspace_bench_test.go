package node_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/testcluster"
)

// BenchmarkMoveWorkspace100MB moves a session whose workspace holds 1,000
// files of 100 KB between the two followers of a loopback fleet: the first
// move carries every chunk; the move back finds them in the first node's
// store and sends none (the workspace did not change); then one file
// changes and the next move sends only its chunk. Times are request →
// CUTOVER_COMMITTED (leader-stamped).
func BenchmarkMoveWorkspace100MB(b *testing.B) {
	c := benchFleet(b, testcluster.Options{})
	leader := c.Leader()
	fs := c.Followers()
	cl := c.Sessions(leader)
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
		return time.Duration(s.Move.StateUnixNano - s.Move.RequestedUnixNano)
	}
	b.ResetTimer()
	var first, back, changed time.Duration
	for i := 0; i < b.N; i++ {
		first += move(fs[1].Name)
		back += move(fs[0].Name)
		// One changed file on fs[0]; the move sends that file's chunk.
		f := filepath.Join(ws, "d00", "f0000")
		if err := os.WriteFile(f, bytes.Repeat([]byte{byte(i)}, 100_000), 0o600); err != nil {
			b.Fatal(err)
		}
		changed += move(fs[1].Name)
		if i+1 < b.N {
			move(fs[0].Name)
		}
	}
	b.StopTimer()
	evs, _, err := leader.Running().FSM().Events(id, 1, 1<<20)
	if err != nil {
		b.Fatal(err)
	}
	for _, ev := range evs {
		if strings.HasPrefix(ev.Kind, "move.") {
			b.Logf("%s %s %s", ev.Kind, ev.Text, ev.Data)
		}
	}
	n := float64(b.N)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / n }
	b.ReportMetric(ms(first), "first-move-ms")
	b.ReportMetric(100/(float64(first.Seconds())/n), "first-move-MB/s")
	b.ReportMetric(ms(back), "move-back-ms")
	b.ReportMetric(ms(changed), "one-file-changed-ms")
}
