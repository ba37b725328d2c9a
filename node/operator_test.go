package node_test

import (
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/node/testcluster"
)

func raftPeerIDs(t *testing.T, c *testcluster.Cluster, n *testcluster.Node) []string {
	t.Helper()
	resp, err := c.ClusterClient(n).RaftPeers(ctxT(t, 10*time.Second), connect.NewRequest(&fakv1.RaftPeersRequest{}))
	if err != nil {
		t.Fatalf("raft peers on %s: %v", n.Name, err)
	}
	var ids []string
	for _, p := range resp.Msg.GetPeers() {
		ids = append(ids, p.GetId())
	}
	slices.Sort(ids)
	return ids
}

// TestOperatorTransferLeader hands leadership to a named follower through
// the other follower, and refuses an unknown target.
func TestOperatorTransferLeader(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	old := c.WaitForLeader(30 * time.Second)
	followers := c.Followers()
	target, via := followers[0], followers[1]

	resp, err := operatorClient(c, via).RaftTransferLeader(ctxT(t, 30*time.Second),
		connect.NewRequest(&fakv1.RaftTransferLeaderRequest{To: target.Name}))
	if err != nil {
		t.Fatalf("transfer to %s: %v", target.Name, err)
	}
	if resp.Msg.GetLeader() != target.Name {
		t.Fatalf("transfer to %s answered leader %q", target.Name, resp.Msg.GetLeader())
	}
	if now := c.WaitForLeader(30 * time.Second); now != target {
		t.Fatalf("leader is %s after transferring from %s to %s", now.Name, old.Name, target.Name)
	}

	_, err = operatorClient(c, old).RaftTransferLeader(ctxT(t, 30*time.Second),
		connect.NewRequest(&fakv1.RaftTransferLeaderRequest{To: "nobody"}))
	if connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("transfer to an unknown node: %v; want NOT_FOUND", err)
	}

	// "" lets Raft pick: leadership leaves the current leader.
	resp, err = operatorClient(c, old).RaftTransferLeader(ctxT(t, 30*time.Second),
		connect.NewRequest(&fakv1.RaftTransferLeaderRequest{}))
	if err != nil {
		t.Fatalf("transfer to any: %v", err)
	}
	if resp.Msg.GetLeader() == "" || resp.Msg.GetLeader() == target.Name {
		t.Fatalf("transfer to any from %s answered leader %q", target.Name, resp.Msg.GetLeader())
	}
	c.WaitForLeader(30 * time.Second)
}

// TestOperatorRemovePeer removes a stopped node from the Raft
// configuration through a follower, and refuses an unknown id, the leader
// and a node alive in gossip.
func TestOperatorRemovePeer(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	leader := c.WaitForLeader(30 * time.Second)
	followers := c.Followers()
	gone, via := followers[0], followers[1]
	ctx := ctxT(t, time.Minute)
	op := operatorClient(c, via)
	remove := func(id string) error {
		_, err := op.RaftRemovePeer(ctx, connect.NewRequest(&fakv1.RaftRemovePeerRequest{Id: id}))
		return err
	}

	if err := remove("nobody"); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("remove unknown: %v; want NOT_FOUND", err)
	}
	if err := remove(leader.Name); connect.CodeOf(err) != connect.CodeFailedPrecondition || reasonOf(err) != "PEER_IS_LEADER" {
		t.Fatalf("remove the leader: %v (reason %q); want FAILED_PRECONDITION/PEER_IS_LEADER", err, reasonOf(err))
	}
	if err := remove(gone.Name); connect.CodeOf(err) != connect.CodeFailedPrecondition || reasonOf(err) != "PEER_ALIVE" {
		t.Fatalf("remove a live node: %v (reason %q); want FAILED_PRECONDITION/PEER_ALIVE", err, reasonOf(err))
	}

	c.Stop(gone)
	// Refused as alive until gossip declares it dead.
	var err error
	c.WaitFor(30*time.Second, "remove-peer of the stopped node to be accepted", func() bool {
		err = remove(gone.Name)
		if reasonOf(err) == "PEER_ALIVE" {
			return false
		}
		if err != nil {
			t.Fatalf("remove stopped %s: %v", gone.Name, err)
		}
		return true
	})
	for _, n := range []*testcluster.Node{leader, via} {
		c.WaitFor(10*time.Second, "the peer list on "+n.Name+" without "+gone.Name, func() bool {
			return !slices.Contains(raftPeerIDs(t, c, n), gone.Name)
		})
	}
	if err := remove(gone.Name); connect.CodeOf(err) != connect.CodeNotFound {
		t.Fatalf("removing %s again: %v; want NOT_FOUND", gone.Name, err)
	}
	// The two remaining voters still commit.
	createSession(t, c, via, "after-remove")
}
