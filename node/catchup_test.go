package node_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/node/testcluster"
)

// writeWhileStopped stops a follower, appends n events, restarts it and
// waits until it holds all of them; it returns the follower and the writes.
func writeWhileStopped(t *testing.T, c *testcluster.Cluster, n int) (*testcluster.Node, string, []ackedWrite) {
	t.Helper()
	id := createSession(t, c, c.Leader(), "catch-up")
	lagging := c.Followers()[0]
	c.Stop(lagging)
	var acked []ackedWrite
	for i := 0; i < n; i++ {
		seq, err := appendText(ctxT(t, 10*time.Second), c, c.Leader(), id, text(i))
		if err != nil {
			t.Fatal(err)
		}
		acked = append(acked, ackedWrite{seq, text(i)})
	}
	return lagging, id, acked
}

func TestCluster_LaggingNodeCatchesUpByLogReplay(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	lagging, id, acked := writeWhileStopped(t, c, 300)
	c.Start(lagging)
	c.WaitFor(20*time.Second, "lagging node to replay the log", func() bool {
		s, err := lagging.Running().FSM().Session(id)
		return err == nil && s.HeadSeq == acked[len(acked)-1].seq
	})
	checkJournal(t, readAll(t, c, lagging, id, fakv1.ReadConsistency_READ_CONSISTENCY_STALE), acked)
	if got := lagging.Running().Cluster().Raft().Stats()["last_snapshot_index"]; got != "0" {
		t.Fatalf("caught up by snapshot (last_snapshot_index %s), expected log replay", got)
	}
}

func TestCluster_LaggingNodeCatchesUpBySnapshotInstall(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{SnapshotThreshold: 50, TrailingLogs: 10})
	lagging, id, acked := writeWhileStopped(t, c, 300)
	// Compact the leader's log past what the lagging node has, so only a
	// snapshot can bring it up to date.
	leader := c.Leader()
	if err := leader.Running().Cluster().Raft().Snapshot().Error(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	// Every voter's build reads compressed snapshots, so this one is.
	if !snapshotCompressed(t, leader) {
		t.Fatal("the leader's snapshot is not zstd-compressed")
	}
	c.Start(lagging)
	c.WaitFor(20*time.Second, "lagging node to install the snapshot", func() bool {
		s, err := lagging.Running().FSM().Session(id)
		return err == nil && s.HeadSeq == acked[len(acked)-1].seq
	})
	checkJournal(t, readAll(t, c, lagging, id, fakv1.ReadConsistency_READ_CONSISTENCY_STALE), acked)
	idx, _ := strconv.ParseUint(lagging.Running().Cluster().Raft().Stats()["last_snapshot_index"], 10, 64)
	if idx == 0 {
		t.Fatal("lagging node has no snapshot: it did not catch up by snapshot install")
	}
	// It keeps following after the install.
	seq, err := appendText(ctxT(t, 10*time.Second), c, lagging, id, "after install")
	if err != nil {
		t.Fatal(err)
	}
	acked = append(acked, ackedWrite{seq, "after install"})
	checkJournal(t, readAll(t, c, lagging, id, fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE), acked)
}

// snapshotCompressed reports whether n's newest Raft snapshot is a zstd
// stream (fsm/snapshot_codec.go).
func snapshotCompressed(t *testing.T, n *testcluster.Node) bool {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(n.DataDir, "raft", "snapshots", "*", "state.bin"))
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no snapshot in %s (%v)", n.DataDir, err)
	}
	newest := slices.MaxFunc(dirs, func(a, b string) int {
		ia, _ := os.Stat(a)
		ib, _ := os.Stat(b)
		return ia.ModTime().Compare(ib.ModTime())
	})
	f, err := os.Open(newest)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	compressed, err := fsm.StateCompressed(f)
	if err != nil {
		t.Fatal(err)
	}
	return compressed
}
