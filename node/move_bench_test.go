package node_test

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/cluster"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/testcluster"
)

// benchFleet is a three-node fleet with every node record committed.
func benchFleet(b *testing.B, opts testcluster.Options) *testcluster.Cluster {
	b.Helper()
	opts.EchoTurn = 20 * time.Millisecond
	c := testcluster.New(b, opts)
	c.WaitFor(30*time.Second, "three node records", func() bool {
		l := c.Leader()
		if l == nil {
			return false
		}
		recs, err := l.Running().FSM().Nodes()
		return err == nil && len(recs) == len(c.Nodes)
	})
	return c
}

// awaitSession waits on n's replica until cond holds for the session.
func awaitSession(b *testing.B, n *testcluster.Node, id string, timeout time.Duration, cond func(*fsmpb.Session) bool) *fsmpb.Session {
	b.Helper()
	f := n.Running().FSM()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		ch := f.Changed()
		s, err := f.Session(id)
		if err == nil && cond(s) {
			return s
		}
		select {
		case <-ch:
		case <-deadline.C:
			b.Fatalf("session %s: condition not met within %s (%v)", id, timeout, s.GetMove())
		}
	}
}

// BenchmarkMoveIdleSession moves one idle session back and forth between
// the two followers of a loopback fleet (runners and controller as in
// production) and reports p50/p99 of the time from the committed request
// to CUTOVER_COMMITTED (both leader-stamped command times).
func BenchmarkMoveIdleSession(b *testing.B) {
	c := benchFleet(b, testcluster.Options{})
	leader := c.Leader()
	fs := c.Followers()
	cl := c.Sessions(leader)
	r, err := cl.CreateSession(context.Background(), connect.NewRequest(&fakv1.CreateSessionRequest{
		Title: "bench", Placement: &fakv1.Placement{Node: fs[0].Name},
	}))
	if err != nil {
		b.Fatal(err)
	}
	id := r.Msg.Session.SessionId
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		to := fs[(i+1)%2].Name
		resp, err := cl.MoveSession(context.Background(), connect.NewRequest(&fakv1.MoveSessionRequest{SessionId: id, ToNode: to}))
		if err != nil {
			b.Fatal(err)
		}
		moveID := resp.Msg.Move.MoveId
		s := awaitSession(b, leader, id, 30*time.Second, func(s *fsmpb.Session) bool {
			return s.Move.GetMoveId() == moveID && !fsm.MoveOpen(s.Move)
		})
		if s.Move.State != fsm.MoveCutoverCommitted {
			b.Fatalf("move %d ended %s: %s", i, s.Move.State, s.Move.Reason)
		}
		lat = append(lat, time.Duration(s.Move.StateUnixNano-s.Move.RequestedUnixNano))
	}
	b.StopTimer()
	reportPercentiles(b, lat, "move")
	reportPhases(b, leader, id)
}

// reportPhases reports the p50 of each phase of the session's moves, from
// the elapsed times their move.* events carry: waiting for the source's
// checkpoint, admission, the destination's restore, cutover.
func reportPhases(b *testing.B, n *testcluster.Node, id string) {
	evs, _, err := n.Running().FSM().Events(id, 1, 1<<20)
	if err != nil {
		b.Fatal(err)
	}
	phases := map[string][]time.Duration{}
	var prev int64
	for _, ev := range evs {
		var f struct {
			State   string `json:"state"`
			Elapsed int64  `json:"elapsed_nanos"`
		}
		if !strings.HasPrefix(ev.Kind, "move.") || json.Unmarshal(ev.Data, &f) != nil {
			continue
		}
		if f.State == fsm.MoveSafePointRequested {
			prev = 0
		}
		phases[f.State] = append(phases[f.State], time.Duration(f.Elapsed-prev))
		prev = f.Elapsed
	}
	for state, name := range map[string]string{
		fsm.MoveCheckpointed: "checkpoint", fsm.MoveAdmitted: "admit", fsm.MoveRestored: "restore", fsm.MoveCutoverCommitted: "cutover",
	} {
		lat := phases[state]
		if len(lat) == 0 {
			continue
		}
		sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, name+"-p50-ms")
	}
}

func reportPercentiles(b *testing.B, lat []time.Duration, name string) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(float64(len(lat))*p))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), name+"-p50-ms")
	b.ReportMetric(pct(0.99), name+"-p99-ms")
}

// BenchmarkRecoverDeadNode stops a follower hosting 20 idle sessions and
// reports, per fleet: how long gossip took to declare it dead, and the
// time from the end of --recover-after (its death as the leader saw it,
// plus the grace) until the last of its sessions is cut over elsewhere.
func BenchmarkRecoverDeadNode(b *testing.B) {
	const sessions = 20
	const recoverAfter = 500 * time.Millisecond
	var detect, recovery []time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		c := benchFleet(b, testcluster.Options{RecoverAfter: recoverAfter})
		leader := c.Leader()
		lost := c.Followers()[0]
		cl := c.Sessions(leader)
		var ids []string
		for j := 0; j < sessions; j++ {
			r, err := cl.CreateSession(context.Background(), connect.NewRequest(&fakv1.CreateSessionRequest{
				Title: "bench", Placement: &fakv1.Placement{Node: lost.Name},
			}))
			if err != nil {
				b.Fatal(err)
			}
			ids = append(ids, r.Msg.Session.SessionId)
		}
		b.StartTimer()
		stopped := time.Now()
		c.Stop(lost)
		var last int64
		for _, id := range ids {
			s := awaitSession(b, leader, id, 60*time.Second, func(s *fsmpb.Session) bool {
				return s.Move.GetCause() == fsm.MoveCauseRecovery && s.Move.GetState() == fsm.MoveCutoverCommitted
			})
			last = max(last, s.Move.StateUnixNano)
		}
		b.StopTimer()
		k := slices.IndexFunc(leader.Running().Cluster().Members(), func(m cluster.Member) bool { return m.Name == lost.Name })
		dead := leader.Running().Cluster().Members()[k].Since
		detect = append(detect, dead.Sub(stopped))
		recovery = append(recovery, time.Duration(last-dead.Add(recoverAfter).UnixNano()))
		c.StopAll()
	}
	reportPercentiles(b, detect, "detect")
	reportPercentiles(b, recovery, "recover")
	b.ReportMetric(sessions, "sessions")
}
