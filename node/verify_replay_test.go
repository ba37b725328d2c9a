package node_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/hashicorp/raft"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/node"
	"github.com/fak-dev/fak/node/testcluster"
)

// The replay-equivalence check (cluster.VerifyReplay, OperatorService
// VerifyReplay) on real three-node fleets: every replica equals its
// rebuild from its own snapshot and log.

// verifyAll asks node via to check every Raft peer and returns the checks
// by node name.
func verifyAll(t *testing.T, c *testcluster.Cluster, via *testcluster.Node) map[string]*fakv1.ReplayCheck {
	t.Helper()
	resp, err := operatorClient(c, via).VerifyReplay(ctxT(t, 2*time.Minute), connect.NewRequest(&fakv1.VerifyReplayRequest{All: true}))
	if err != nil {
		t.Fatalf("VerifyReplay(all) through %s: %v", via.Name, err)
	}
	out := map[string]*fakv1.ReplayCheck{}
	for _, ch := range resp.Msg.GetNodes() {
		out[ch.GetNode()] = ch
		t.Logf("%s: index %d equal %v, rebuilds %v, log alone skipped: %q", ch.GetNode(), ch.GetLiveIndex(),
			ch.GetEqual(), ch.GetRebuilds(), ch.GetLogOnlySkipped())
	}
	if len(out) != len(c.Nodes) {
		t.Fatalf("VerifyReplay(all) checked %d nodes, want %d: %v", len(out), len(c.Nodes), resp.Msg)
	}
	return out
}

// requireEqual fails unless the check ran and every rebuild equals the
// live state; rebuilds is how many must have run (1: the log alone was
// skipped, and skipped must be part of the reason).
func requireEqual(t *testing.T, ch *fakv1.ReplayCheck, rebuilds int, skipped string) {
	t.Helper()
	if ch.GetError() != "" || !ch.GetEqual() || len(ch.GetRebuilds()) != rebuilds {
		t.Fatalf("%s: %v", ch.GetNode(), ch)
	}
	first := ch.GetRebuilds()[0]
	// The log after the snapshot up to the live index; none (no last
	// index) when a snapshot was just taken at the live index.
	replayed := first.GetLastIndex() == ch.GetLiveIndex() || first.GetEntries() == 0 && first.GetLastIndex() == 0
	if first.GetSource() != "snapshot+log" || first.GetSnapshotIndex() == 0 || !replayed ||
		first.GetEntries() != ch.GetLiveIndex()-first.GetSnapshotIndex() {
		t.Fatalf("%s: first rebuild %v (live index %d)", ch.GetNode(), first, ch.GetLiveIndex())
	}
	for _, r := range ch.GetRebuilds() {
		if !r.GetEqual() || r.GetDigest() != ch.GetLiveDigest() {
			t.Fatalf("%s: %s rebuild %v, live digest %s", ch.GetNode(), r.GetSource(), r, ch.GetLiveDigest())
		}
	}
	if rebuilds == 2 && (ch.GetRebuilds()[1].GetSource() != "log" || ch.GetRebuilds()[1].GetEntries() != ch.GetLiveIndex()) {
		t.Fatalf("%s: second rebuild %v", ch.GetNode(), ch.GetRebuilds()[1])
	}
	if rebuilds == 1 && !strings.Contains(ch.GetLogOnlySkipped(), skipped) {
		t.Fatalf("%s: log-alone rebuild skipped because %q, want %q", ch.GetNode(), ch.GetLogOnlySkipped(), skipped)
	}
}

func snapshotNow(t *testing.T, n *testcluster.Node) {
	t.Helper()
	if err := n.Running().Cluster().Raft().Snapshot().Error(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		t.Fatalf("snapshot on %s: %v", n.Name, err)
	}
}

// Sessions, a few hundred events and a move, a snapshot on every node, more
// writes; then each node checks itself while writes go on and Raft keeps
// snapshotting (every 200 ms) and, on n3, compacting its log. n1 and n2
// keep their whole log, so the log alone rebuilds them too.
func TestCluster_VerifyReplayOnEveryNode(t *testing.T) {
	c := moveFleet(t, testcluster.Options{
		SnapshotThreshold: 64,
		Configure: func(name string, cfg *node.Config) {
			cfg.SnapshotInterval = 200 * time.Millisecond
			if name == "n3" {
				cfg.TrailingLogs = 16
			}
		},
	})
	// A leader with 16 trailing entries would catch a slow follower up by
	// snapshot, and that follower's log could no longer rebuild it alone.
	if l := c.Leader(); l.Name == "n3" {
		if _, err := l.Running().Cluster().TransferLeadership(ctxT(t, 30*time.Second), "n1"); err != nil {
			t.Fatal(err)
		}
		c.WaitForLeader(30 * time.Second)
	}
	var ids []string
	for _, n := range c.Nodes {
		ids = append(ids, createSession(t, c, n, "verify "+n.Name))
	}
	write := func(from, to int) {
		for i := from; i < to; i++ {
			via := c.Nodes[i%len(c.Nodes)]
			if _, err := appendText(ctxT(t, 15*time.Second), c, via, ids[i%len(ids)], text(i)); err != nil {
				t.Errorf("append %d through %s: %v", i, via.Name, err)
				return
			}
		}
	}
	write(0, 300)
	src, dst := c.Nodes[0], c.Nodes[1]
	mv := moveSession(t, c, c.Leader(), ids[0], dst.Name, 0)
	if m := waitMove(t, c, ids[0], mv.MoveId, "an end", moveEnded); m.State != fsm.MoveCutoverCommitted {
		t.Fatalf("move of %s from %s to %s ended %s (%s)", ids[0], src.Name, dst.Name, m.State, m.Reason)
	}
	for _, n := range c.Nodes {
		snapshotNow(t, n)
	}
	write(300, 400)

	// Checked while a writer keeps the live state moving.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 400; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			write(i, i+1)
		}
	})
	checks := verifyAll(t, c, c.Followers()[0])
	close(stop)
	wg.Wait()
	requireEqual(t, checks["n1"], 2, "")
	requireEqual(t, checks["n2"], 2, "")
	requireEqual(t, checks["n3"], 1, "the log starts at index")

	// Idle: a node named through another answers, and replicas at the same
	// index have the same content.
	resp, err := operatorClient(c, c.Nodes[0]).VerifyReplay(ctxT(t, time.Minute), connect.NewRequest(&fakv1.VerifyReplayRequest{Node: "n3"}))
	if err != nil || len(resp.Msg.GetNodes()) != 1 {
		t.Fatalf("VerifyReplay(n3) through n1: %v %v", resp, err)
	}
	requireEqual(t, resp.Msg.GetNodes()[0], 1, "the log starts at index")
	checks = verifyAll(t, c, c.Leader())
	for _, a := range checks {
		for _, b := range checks {
			if a.GetLiveIndex() == b.GetLiveIndex() && a.GetLiveDigest() != b.GetLiveDigest() {
				t.Fatalf("%s and %s at index %d differ: %s, %s", a.GetNode(), b.GetNode(), a.GetLiveIndex(), a.GetLiveDigest(), b.GetLiveDigest())
			}
		}
	}
	_, err = operatorClient(c, c.Nodes[0]).VerifyReplay(ctxT(t, time.Minute), connect.NewRequest(&fakv1.VerifyReplayRequest{Node: "n9"}))
	if reasonOf(err) != "NOT_FOUND" {
		t.Fatalf("VerifyReplay(n9): %v, want NOT_FOUND", err)
	}
}

// A node that caught up by snapshot install, then every node after an
// operator's snapshot restore: the log alone does not rebuild them (an
// install removes the log before it: the WAL only appends), and the
// installed snapshot plus the log after it does.
func TestCluster_VerifyReplayAfterSnapshotInstallAndRestore(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{SnapshotThreshold: 50, TrailingLogs: 10})
	lagging, id, acked := writeWhileStopped(t, c, 200)
	snapshotNow(t, c.Leader())
	// The lagging node would keep its whole log, so the check must not
	// take a log that starts at index 1 for one that rebuilds the state.
	lagging.Configure = func(cfg *node.Config) { cfg.TrailingLogs = 1 << 20 }
	c.Start(lagging)
	c.WaitFor(30*time.Second, "the lagging node to install the snapshot", func() bool {
		s, err := lagging.Running().FSM().Session(id)
		return err == nil && s.HeadSeq == acked[len(acked)-1].seq
	})
	rep, err := lagging.Running().Cluster().VerifyReplay(context.Background())
	if err != nil || !rep.Equal || len(rep.Rebuilds) != 1 || rep.Rebuilds[0].SnapshotIndex == 0 || rep.LogOnlySkipped == "" {
		t.Fatalf("lagging node after the install: %+v, %v", rep, err)
	}

	file := saveSnapshot(t, c, c.Followers()[0])
	for i := range 30 {
		if _, err := appendText(ctxT(t, 15*time.Second), c, c.Leader(), id, fmt.Sprintf("after save %d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := restoreSnapshot(t, c, c.Leader(), file); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if _, err := appendText(ctxT(t, 15*time.Second), c, c.Leader(), id, "after restore"); err != nil {
		t.Fatal(err)
	}
	for name, ch := range verifyAll(t, c, lagging) {
		if ch.GetError() != "" || !ch.GetEqual() || len(ch.GetRebuilds()) != 1 {
			t.Fatalf("%s after the restore: %v", name, ch)
		}
		if ch.GetLogOnlySkipped() == "" {
			t.Fatalf("%s after the restore: log-alone rebuild skipped because %q", name, ch.GetLogOnlySkipped())
		}
	}
}
