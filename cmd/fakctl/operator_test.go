package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/node/testcluster"
)

// TestOperatorRaftCommandsOnAFleet: transfer-leader hands leadership to the
// named follower; remove-peer takes a stopped node out of the Raft
// configuration; cluster leave makes a node leave and shut down.
func TestOperatorRaftCommandsOnAFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("starts an in-process fleet; skipped with -short")
	}
	isolateEnv(t)
	t.Setenv("FAK_TOKEN", testcluster.Token)
	fleet := testcluster.New(t, testcluster.Options{Nodes: 4})
	old := fleet.WaitForLeader(30 * time.Second)
	fs := fleet.Followers()
	target, gone, leaver := fs[0], fs[1], fs[2]
	// The leader's view (the node that left stays "running" to the test
	// fleet once it shut itself down, so no WaitForLeader after it).
	peers := func() []string {
		resp, err := fleet.ClusterClient(target).RaftPeers(fleet.Context(10*time.Second), connect.NewRequest(&fakv1.RaftPeersRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, p := range resp.Msg.GetPeers() {
			ids = append(ids, p.GetId())
		}
		return ids
	}

	code, out, errOut := runCLI(t, old.APIAddr, "operator", "raft", "transfer-leader", "--to", target.Name)
	if code != exitOK || out != "Leader is now "+target.Name+"\n" {
		t.Fatalf("transfer-leader: code %d stdout %q stderr %q", code, out, errOut)
	}
	if l := fleet.WaitForLeader(30 * time.Second); l != target {
		t.Fatalf("leader is %s after transfer-leader --to %s", l.Name, target.Name)
	}

	fleet.Stop(gone)
	fleet.WaitFor(30*time.Second, "remove-peer of the stopped node", func() bool {
		code, out, errOut = runCLI(t, leaver.APIAddr, "operator", "raft", "remove-peer", "--id", gone.Name)
		if strings.HasPrefix(errOut, "Error: PEER_ALIVE: ") {
			return false // gossip has not declared it dead yet
		}
		if code != exitOK || out != "Removed "+gone.Name+" from the Raft configuration\n" {
			t.Fatalf("remove-peer: code %d stdout %q stderr %q", code, out, errOut)
		}
		return true
	})
	if ids := peers(); slices.Contains(ids, gone.Name) {
		t.Fatalf("peers after remove-peer: %v", ids)
	}

	code, out, errOut = runCLI(t, leaver.APIAddr, "cluster", "leave")
	if code != exitOK || out != "Node at http://"+leaver.APIAddr+" is leaving the cluster\n" {
		t.Fatalf("cluster leave: code %d stdout %q stderr %q", code, out, errOut)
	}
	select {
	case <-leaver.Running().Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the node that left did not shut down")
	}
	if ids := peers(); slices.Contains(ids, leaver.Name) || len(ids) != 2 {
		t.Fatalf("peers after cluster leave: %v; want the two that stayed", ids)
	}
}
