package node_test

import (
	"testing"
	"time"

	"github.com/fak-dev/fak/cluster"
	"github.com/fak-dev/fak/node/testcluster"
)

func raftServers(t *testing.T, n *testcluster.Node) map[string]bool {
	t.Helper()
	peers, err := n.Running().Cluster().Peers()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, p := range peers {
		out[p.ID] = p.Voter
	}
	return out
}

func TestCluster_NonVoterJoinsAsReplica(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	id := createSession(t, c, c.Leader(), "nonvoter")
	nv := c.AddNode(false)
	c.WaitFor(20*time.Second, "non-voter in the raft configuration", func() bool {
		voter, ok := raftServers(t, c.Leader())[nv.Name]
		return ok && !voter
	})
	// It holds a full replica and serves (forwarded) writes.
	seq, err := appendText(ctxT(t, 10*time.Second), c, nv, id, "via non-voter")
	if err != nil {
		t.Fatal(err)
	}
	c.WaitFor(10*time.Second, "non-voter replica to apply the write", func() bool {
		s, err := nv.Running().FSM().Session(id)
		return err == nil && s.HeadSeq == seq
	})
}

func TestCluster_GracefulLeaveRemovesNode(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	f := c.Followers()[0]
	if err := f.Running().Leave(); err != nil {
		t.Fatalf("leave: %v", err)
	}
	c.WaitFor(15*time.Second, "leaver removed from raft", func() bool {
		_, ok := raftServers(t, c.Leader())[f.Name]
		return !ok
	})
	// The remaining two still commit.
	createSession(t, c, c.Leader(), "after leave")
}

func TestCluster_DeadServerRemovedAfterGraceAndReaddedOnReturn(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{DeadServerGrace: 2 * time.Second})
	f := c.Followers()[0]
	c.Stop(f)
	c.WaitFor(30*time.Second, "dead server removed from raft", func() bool {
		l := c.Leader()
		if l == nil {
			return false
		}
		_, ok := raftServers(t, l)[f.Name]
		return !ok
	})
	for _, m := range c.Leader().Running().Cluster().Members() {
		if m.Name == f.Name && m.Status != cluster.StatusDead {
			t.Fatalf("gossip status of %s = %s, want dead", f.Name, m.Status)
		}
	}
	id := createSession(t, c, c.Leader(), "two-node")
	// When it comes back it is added again as a voter and catches up.
	c.Start(f)
	c.WaitFor(30*time.Second, "returning server re-added", func() bool {
		l := c.Leader()
		return l != nil && raftServers(t, l)[f.Name]
	})
	c.WaitFor(15*time.Second, "returning server catches up", func() bool {
		_, err := f.Running().FSM().Session(id)
		return err == nil
	})
}

func TestCluster_JoiningServerIsAddedAsVoter(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	id := createSession(t, c, c.Leader(), "join")
	n4 := c.AddNode(true)
	c.WaitFor(20*time.Second, "joining server added as a voter", func() bool {
		return raftServers(t, c.Leader())[n4.Name]
	})
	c.WaitFor(10*time.Second, "joining server to replicate existing sessions", func() bool {
		_, err := n4.Running().FSM().Session(id)
		return err == nil
	})
	if got := len(raftServers(t, c.Leader())); got != 4 {
		t.Fatalf("raft configuration has %d servers, want 4", got)
	}
}
