package node_test

import (
	"testing"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/node/testcluster"
)

func createManualSession(t *testing.T, c *testcluster.Cluster, n *testcluster.Node, title string) string {
	t.Helper()
	resp, err := c.Sessions(n).CreateSession(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.CreateSessionRequest{
		Title: title, Policy: &fakv1.Policy{Recover: fsm.RecoverManual},
	}))
	if err != nil {
		t.Fatalf("create session on %s: %v", n.Name, err)
	}
	if !resp.Msg.Session.RecoverManual {
		t.Fatalf("session %s: recover_manual not set", resp.Msg.Session.SessionId)
	}
	return resp.Msg.Session.SessionId
}

func waitStranded(t *testing.T, c *testcluster.Cluster, via *testcluster.Node, id string, want bool) *fakv1.Session {
	t.Helper()
	var s *fakv1.Session
	c.WaitFor(60*time.Second, "session "+id+" stranded="+map[bool]string{true: "yes", false: "no"}[want], func() bool {
		s = describe(t, c, via, id)
		return s.Stranded == want
	})
	return s
}

// A recover=manual session of a dead node is marked stranded, not moved,
// while a recover=auto one is recovered; an operator's move then takes it
// off the dead node (no safe point), and a stranded session whose node
// comes back is unmarked.
func TestCluster_RecoverManualSessionsAreStranded(t *testing.T) {
	c := moveFleet(t, testcluster.Options{RecoverAfter: 300 * time.Millisecond})
	fs := c.Followers()
	lost, other, via := fs[0], fs[1], c.Leader()
	auto := createSession(t, c, lost, "recovered")
	manual := createManualSession(t, c, lost, "moved by hand")
	waiting := createManualSession(t, c, lost, "waits for its node")

	c.Stop(lost)
	c.WaitFor(60*time.Second, "session "+auto+" recovered", func() bool {
		m := getMove(t, c, auto)
		return m != nil && m.Cause == fsm.MoveCauseRecovery && m.State == fsm.MoveCutoverCommitted
	})
	for _, id := range []string{manual, waiting} {
		s := waitStranded(t, c, via, id, true)
		if s.StrandedNode != lost.Name || s.Placement.GetNode() != lost.Name || s.Move != nil || s.Epoch != 1 {
			t.Fatalf("stranded session %s: node %q, placement %v, move %v, epoch %d", id, s.StrandedNode, s.Placement, s.Move, s.Epoch)
		}
		evs := readAll(t, c, via, id, fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE)
		n := 0
		for _, e := range evs {
			if e.Kind == fsm.KindSessionStranded {
				n++
				if want := `{"node":"` + lost.Name + `","stranded":true,"reason":"compute node dead"}`; string(e.Data) != want {
					t.Fatalf("session.stranded data %s, want %s", e.Data, want)
				}
			}
		}
		if n != 1 {
			t.Fatalf("session %s: %d session.stranded events, want 1", id, n)
		}
	}

	// The operator moves one by hand: the source is dead, so the move
	// checkpoints without a safe point (cause recovery).
	mv := moveSession(t, c, via, manual, other.Name, 0)
	if mv.Cause != fsm.MoveCauseRecovery {
		t.Fatalf("manual move of a stranded session: cause %q, want recovery", mv.Cause)
	}
	m := waitMove(t, c, manual, mv.MoveId, "ended", moveEnded)
	if m.State != fsm.MoveCutoverCommitted {
		t.Fatalf("manual move ended %s: %s", m.State, m.Reason)
	}
	if s := describe(t, c, via, manual); s.Stranded || s.Placement.GetNode() != other.Name || s.Epoch != 2 {
		t.Fatalf("after the manual move: stranded %v, on %s, epoch %d", s.Stranded, s.Placement.GetNode(), s.Epoch)
	}

	// The other comes back with its node, unmoved.
	c.Start(lost)
	s := waitStranded(t, c, via, waiting, false)
	if s.Placement.GetNode() != lost.Name || s.Move != nil || s.Epoch != 1 {
		t.Fatalf("after its node came back: placement %v, move %v, epoch %d", s.Placement, s.Move, s.Epoch)
	}
	checkMoveInvariants(t, c)
}
