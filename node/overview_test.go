package node_test

import (
	"testing"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/node/testcluster"
)

func overview(t *testing.T, c *testcluster.Cluster, via *testcluster.Node, req *fakv1.OverviewRequest) *fakv1.OverviewResponse {
	t.Helper()
	resp, err := c.ClusterClient(via).Overview(ctxT(t, 15*time.Second), connect.NewRequest(req))
	if err != nil {
		t.Fatalf("overview via %s: %v", via.Name, err)
	}
	return resp.Msg
}

func overviewNode(o *fakv1.OverviewResponse, name string) *fakv1.OverviewNode {
	for _, n := range o.Nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

func createOn(t *testing.T, c *testcluster.Cluster, via *testcluster.Node, title, node string) string {
	t.Helper()
	resp, err := c.Sessions(via).CreateSession(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.CreateSessionRequest{
		Title: title, Placement: &fakv1.Placement{Node: node},
		Policy: &fakv1.Policy{Limits: &fakv1.Budget{Turns: 10}},
	}))
	if err != nil {
		t.Fatalf("create session on %s: %v", node, err)
	}
	return resp.Msg.Session.SessionId
}

// The overview, asked of a follower, shows the three nodes with their Raft
// roles and the sessions each hosts, pages through the sessions, reads stale
// or linearizably, includes stopped sessions on request, and reports a
// stopped node as unreachable.
func TestCluster_Overview(t *testing.T) {
	c := moveFleet(t, testcluster.Options{})
	leader := c.Leader()
	via := c.Followers()[0]

	var ids []string
	for i, n := range []string{"n1", "n2", "n3", "n1", "n2"} {
		ids = append(ids, createOn(t, c, c.Nodes[i%3], "work "+n, n))
	}
	att := attach(t, c, via, ids[0], "terminal", "alice")
	if err := takeLease(ctxT(t, 15*time.Second), c, via, ids[0], att, false); err != nil {
		t.Fatalf("take lease: %v", err)
	}
	stopped := ids[4]
	if _, err := c.Sessions(via).StopSession(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.StopSessionRequest{
		SessionId: stopped, Reason: "done",
	})); err != nil {
		t.Fatalf("stop: %v", err)
	}

	o := overview(t, c, via, &fakv1.OverviewRequest{})
	if len(o.Nodes) != 3 || o.Leader != leader.Name {
		t.Fatalf("nodes %d leader %q; want 3 nodes led by %s", len(o.Nodes), o.Leader, leader.Name)
	}
	leaders, hosted := 0, uint32(0)
	for _, n := range o.Nodes {
		wantRole := "follower"
		if n.Name == leader.Name {
			wantRole = "leader"
		}
		if n.RaftRole != wantRole || n.Leader != (n.Name == leader.Name) || n.GossipStatus != "alive" || n.Error != "" {
			t.Errorf("node %s: role %q leader %v gossip %q error %q; want %s", n.Name, n.RaftRole, n.Leader, n.GossipStatus, n.Error, wantRole)
		}
		if n.AppliedIndex == 0 || n.Term == 0 || n.ApiAddr != c.Node(n.Name).APIAddr {
			t.Errorf("node %s: applied %d term %d api %q", n.Name, n.AppliedIndex, n.Term, n.ApiAddr)
		}
		if n.Leader {
			leaders++
		}
		hosted += n.SessionsHosted
	}
	if leaders != 1 {
		t.Errorf("%d nodes flagged leader", leaders)
	}
	if o.SessionsActive != 4 || o.SessionsStopped != 1 || hosted != o.SessionsActive {
		t.Errorf("active %d stopped %d, hosted sum %d; want 4, 1, 4", o.SessionsActive, o.SessionsStopped, hosted)
	}
	if n := overviewNode(o, "n1"); n.SessionsHosted != 2 {
		t.Errorf("n1 hosts %d sessions, want 2", n.SessionsHosted)
	}
	if len(o.Sessions) != 4 || o.NextPageToken != "" {
		t.Fatalf("first page: %d sessions, next %q; want the 4 active, no next page", len(o.Sessions), o.NextPageToken)
	}
	for _, s := range o.Sessions {
		if s.SessionId == stopped {
			t.Errorf("stopped session %s listed without include_stopped", stopped)
		}
		if s.BudgetRemaining.GetTurns() != 10 || s.Epoch != 1 || s.HeadSeq < 2 || s.Node == "" {
			t.Errorf("session %s: budget %v epoch %d head %d node %q", s.SessionId, s.BudgetRemaining, s.Epoch, s.HeadSeq, s.Node)
		}
		if s.SessionId == ids[0] && (s.LeaseHolder != att || s.LeaseHolderLabel != "terminal alice" || s.AttachmentCount != 1) {
			t.Errorf("session %s: lease %q (%q), %d attachments", s.SessionId, s.LeaseHolder, s.LeaseHolderLabel, s.AttachmentCount)
		}
	}

	// Pages of two, stopped included, walk every session exactly once.
	seen := map[string]int{}
	token := ""
	for page := 0; ; page++ {
		if page > 5 {
			t.Fatal("paging does not end")
		}
		p := overview(t, c, via, &fakv1.OverviewRequest{PageSize: 2, PageToken: token, IncludeStopped: true})
		if len(p.Sessions) > 2 {
			t.Fatalf("page of %d sessions, asked 2", len(p.Sessions))
		}
		for _, s := range p.Sessions {
			seen[s.SessionId]++
		}
		if token = p.NextPageToken; token == "" {
			break
		}
	}
	if len(seen) != len(ids) {
		t.Errorf("paging saw %d sessions, want %d", len(seen), len(ids))
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("paging saw %s %d times", id, seen[id])
		}
	}
	if _, err := c.ClusterClient(via).Overview(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.OverviewRequest{
		PageToken: "not base64!",
	})); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("bad page token: %v, want INVALID_ARGUMENT", err)
	}

	// A stale read answers from the follower's replica.
	st := overview(t, c, via, &fakv1.OverviewRequest{Consistency: fakv1.ReadConsistency_READ_CONSISTENCY_STALE, IncludeStopped: true})
	if len(st.Nodes) != 3 || st.AppliedIndex == 0 || len(st.Sessions) > len(ids) {
		t.Errorf("stale: %d nodes, applied %d, %d sessions", len(st.Nodes), st.AppliedIndex, len(st.Sessions))
	}

	// A node joining as a non-voter is a nonvoter in Raft.
	var lost *testcluster.Node
	for _, n := range c.Followers() {
		if n != via {
			lost = n
		}
	}
	nv := c.AddNode(false)
	c.WaitFor(60*time.Second, nv.Name+" a nonvoter in the overview", func() bool {
		resp, err := c.ClusterClient(via).Overview(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.OverviewRequest{}))
		if err != nil {
			return false
		}
		n := overviewNode(resp.Msg, nv.Name)
		return len(resp.Msg.Nodes) == 4 && n != nil && n.RaftRole == "nonvoter" && n.GossipStatus == "alive" && n.Error == ""
	})

	// A stopped node: gossip stops calling it alive, and its own status
	// cannot be read.
	c.Stop(lost)
	c.WaitFor(60*time.Second, lost.Name+" not alive in the overview", func() bool {
		resp, err := c.ClusterClient(via).Overview(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.OverviewRequest{}))
		if err != nil {
			return false
		}
		n := overviewNode(resp.Msg, lost.Name)
		return n != nil && n.GossipStatus != "alive" && n.Error != "" && n.AppliedLag == 0 && n.AppliedIndex == 0
	})
}
