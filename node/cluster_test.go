package node_test

import (
	"testing"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/node/testcluster"
)

func TestCluster_FormsWithBootstrapExpect(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	leader := c.WaitForLeader(10 * time.Second)
	resp, err := c.ClusterClient(leader).RaftPeers(ctxT(t, 5*time.Second), connect.NewRequest(&fakv1.RaftPeersRequest{}))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Msg.Peers) != 3 {
		t.Fatalf("raft peers = %d, want 3", len(resp.Msg.Peers))
	}
	leaders := 0
	for _, p := range resp.Msg.Peers {
		if !p.Voter {
			t.Errorf("peer %s is not a voter", p.Id)
		}
		if p.Leader {
			leaders++
		}
	}
	if leaders != 1 {
		t.Fatalf("%d peers marked leader, want 1", leaders)
	}
	st, err := c.ClusterClient(c.Followers()[0]).Status(ctxT(t, 5*time.Second), connect.NewRequest(&fakv1.StatusRequest{All: true}))
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Msg.Nodes) != 3 {
		t.Fatalf("status of %d nodes, want 3", len(st.Msg.Nodes))
	}
	for _, n := range st.Msg.Nodes {
		if n.Error != "" || n.LeaderId != leader.Name {
			t.Errorf("node %s: error %q leader %q, want leader %s", n.Name, n.Error, n.LeaderId, leader.Name)
		}
	}
}

func TestCluster_FollowerWritesAreForwarded(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	f := c.Followers()[0]
	id := createSession(t, c, f, "forwarded")
	for i := 0; i < 10; i++ {
		seq, err := appendText(ctxT(t, 10*time.Second), c, f, id, text(i))
		if err != nil {
			t.Fatalf("append via follower: %v", err)
		}
		// A new session holds session.created and epoch.changed.
		if seq != uint64(i+3) {
			t.Fatalf("append %d got seq %d, want %d", i, seq, i+3)
		}
	}
	events := readAll(t, c, c.Leader(), id, fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE)
	if len(events) != 12 || events[0].Kind != "session.created" {
		t.Fatalf("leader journal has %d events (first %q), want 12 starting with session.created", len(events), events[0].Kind)
	}
}

// A linearizable read on a follower right after a write acknowledged by
// another node must see it (read index through the leader).
func TestCluster_LinearizableFollowerReadSeesWrite(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	leader := c.Leader()
	fs := c.Followers()
	id := createSession(t, c, leader, "lin")
	for i := 0; i < 50; i++ {
		seq, err := appendText(ctxT(t, 10*time.Second), c, leader, id, text(i))
		if err != nil {
			t.Fatal(err)
		}
		f := fs[i%len(fs)]
		resp, err := c.Sessions(f).DescribeSession(ctxT(t, 10*time.Second), connect.NewRequest(&fakv1.DescribeSessionRequest{SessionId: id}))
		if err != nil {
			t.Fatalf("describe on %s: %v", f.Name, err)
		}
		if resp.Msg.Session.HeadSeq < seq {
			t.Fatalf("linearizable read on %s saw head %d after write acknowledged at %d", f.Name, resp.Msg.Session.HeadSeq, seq)
		}
	}
}

func TestCluster_LeaderLossElectsNewLeaderAndKeepsAckedWrites(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	old := c.Leader()
	id := createSession(t, c, old, "failover")
	var acked []ackedWrite
	for i := 0; i < 20; i++ {
		seq, err := appendText(ctxT(t, 10*time.Second), c, c.Followers()[0], id, text(i))
		if err != nil {
			t.Fatal(err)
		}
		acked = append(acked, ackedWrite{seq, text(i)})
	}
	c.Stop(old)
	newLeader := c.WaitForLeader(15 * time.Second)
	if newLeader == old {
		t.Fatal("stopped node still leader")
	}
	// Writes continue through whichever node is left, including the
	// follower that has to forward.
	for i := 20; i < 40; i++ {
		n := c.Followers()[0]
		if i%2 == 0 {
			n = newLeader
		}
		seq, err := appendText(ctxT(t, 15*time.Second), c, n, id, text(i))
		if err != nil {
			t.Fatalf("append after failover via %s: %v", n.Name, err)
		}
		acked = append(acked, ackedWrite{seq, text(i)})
	}
	for _, n := range c.Nodes {
		if n.Running() != nil {
			checkJournal(t, readAll(t, c, n, id, fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE), acked)
		}
	}
	// The old leader comes back and catches up.
	c.Start(old)
	c.WaitFor(15*time.Second, "old leader to catch up", func() bool {
		s, err := old.Running().FSM().Session(id)
		return err == nil && s.HeadSeq == acked[len(acked)-1].seq
	})
	checkJournal(t, readAll(t, c, old, id, fakv1.ReadConsistency_READ_CONSISTENCY_STALE), acked)
}

func TestCluster_FullRestartKeepsAckedWrites(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	var ids []string
	acked := map[string][]ackedWrite{}
	for s := 0; s < 3; s++ {
		id := createSession(t, c, c.Nodes[s], "restart")
		ids = append(ids, id)
		for i := 0; i < 15; i++ {
			seq, err := appendText(ctxT(t, 10*time.Second), c, c.Nodes[(s+i)%3], id, text(i))
			if err != nil {
				t.Fatal(err)
			}
			acked[id] = append(acked[id], ackedWrite{seq, text(i)})
		}
	}
	c.StopAll()
	for _, n := range c.Nodes {
		c.Start(n)
	}
	c.WaitForLeader(30 * time.Second)
	for _, n := range c.Nodes {
		for _, id := range ids {
			checkJournal(t, readAll(t, c, n, id, fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE), acked[id])
		}
	}
	// And the fleet still takes writes.
	if _, err := appendText(ctxT(t, 10*time.Second), c, c.Nodes[0], ids[0], "after restart"); err != nil {
		t.Fatal(err)
	}
}
