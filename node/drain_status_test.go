package node_test

import (
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/node/testcluster"
)

// A drain that no node can take says why, through any node: DrainStatus
// lists the session with every candidate's failed checks, from the
// leader's move controller. When a node admits again, the session moves
// and the list empties.
func TestCluster_DrainStatusNamesWhatNoNodeAdmits(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	c.WaitForLeader(30 * time.Second)
	n1, n2, n3 := c.Nodes[0], c.Nodes[1], c.Nodes[2]
	c.WaitFor(30*time.Second, "three node records", func() bool {
		l, err := c.NodeClient(n1).ListNodes(ctxT(t, 5*time.Second), connect.NewRequest(&fakv1.ListNodesRequest{}))
		return err == nil && len(l.Msg.GetNodes()) == 3
	})
	resp, err := c.Sessions(n1).CreateSession(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.CreateSessionRequest{
		Title: "stuck", Placement: &fakv1.Placement{Node: n3.Name},
	}))
	if err != nil {
		t.Fatal(err)
	}
	id := resp.Msg.Session.SessionId
	drain := func(n *testcluster.Node, on bool) {
		t.Helper()
		if _, err := c.NodeClient(n1).DrainNode(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.DrainNodeRequest{Node: n.Name, Draining: on})); err != nil {
			t.Fatal(err)
		}
	}
	drain(n1, true)
	drain(n2, true)
	drain(n3, true)

	via := c.Followers()[0]
	var blocked []*fakv1.BlockedSession
	c.WaitFor(30*time.Second, "the stuck session in DrainStatus", func() bool {
		st, err := c.NodeClient(via).DrainStatus(ctxT(t, 5*time.Second), connect.NewRequest(&fakv1.DrainStatusRequest{Node: n3.Name}))
		if err != nil {
			return false
		}
		blocked = st.Msg.GetBlocked()
		return len(blocked) == 1
	})
	why := blocked[0].GetRefusals()
	if blocked[0].GetSessionId() != id || !strings.Contains(why, n1.Name+" refused: "+fsm.CheckNotDraining) || !strings.Contains(why, n2.Name+" refused: "+fsm.CheckNotDraining) {
		t.Fatalf("DrainStatus of %s: %v, want %s with both candidates' not_draining refusals", n3.Name, blocked, id)
	}

	drain(n2, false)
	c.WaitFor(60*time.Second, "the session drained to "+n2.Name+" and DrainStatus empty", func() bool {
		m := getMove(t, c, id)
		if m == nil || m.State != fsm.MoveCutoverCommitted {
			return false
		}
		st, err := c.NodeClient(via).DrainStatus(ctxT(t, 5*time.Second), connect.NewRequest(&fakv1.DrainStatusRequest{Node: n3.Name}))
		return err == nil && len(st.Msg.GetBlocked()) == 0
	})
}
