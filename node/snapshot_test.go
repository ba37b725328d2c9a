package node_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/fak-dev/fak/api/apiclient"
	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/cluster/snapshotfile"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/node/testcluster"
)

func operatorClient(c *testcluster.Cluster, n *testcluster.Node) fakv1connect.OperatorServiceClient {
	return fakv1connect.NewOperatorServiceClient(c.HTTPClient(), "http://"+n.APIAddr,
		connect.WithInterceptors(apiclient.Bearer(testcluster.Token)))
}

// saveSnapshot streams a snapshot file from node n.
func saveSnapshot(t *testing.T, c *testcluster.Cluster, n *testcluster.Node) []byte {
	t.Helper()
	stream, err := operatorClient(c, n).SnapshotSave(ctxT(t, time.Minute), connect.NewRequest(&fakv1.SnapshotSaveRequest{}))
	if err != nil {
		t.Fatalf("SnapshotSave on %s: %v", n.Name, err)
	}
	defer stream.Close()
	var file bytes.Buffer
	for stream.Receive() {
		file.Write(stream.Msg().GetData())
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("SnapshotSave stream on %s: %v", n.Name, err)
	}
	return file.Bytes()
}

// restoreSnapshot sends file to node n in small chunks (so a relay handles
// several messages).
func restoreSnapshot(t *testing.T, c *testcluster.Cluster, n *testcluster.Node, file []byte) (*fakv1.SnapshotRestoreResponse, error) {
	t.Helper()
	stream := operatorClient(c, n).SnapshotRestore(ctxT(t, time.Minute))
	for len(file) > 0 {
		k := min(len(file), 64<<10)
		if err := stream.Send(&fakv1.SnapshotRestoreRequest{Data: file[:k]}); err != nil {
			break // the server's answer says why
		}
		file = file[k:]
	}
	resp, err := stream.CloseAndReceive()
	if err != nil {
		return nil, err
	}
	return resp.Msg, nil
}

// readHeader parses and verifies a snapshot file.
func readHeader(t *testing.T, file []byte) *fakv1.SnapshotMeta {
	t.Helper()
	meta, err := apiclient.VerifySnapshotFile(bytes.NewReader(file))
	if err != nil {
		t.Fatalf("snapshot file: %v", err)
	}
	return meta
}

// fleetDigest is a digest of every session (id, state, head) and journal
// (every event) as node n's replica holds them, read stale so each node is
// asked about itself; node records are left out, since nodes keep
// re-registering. It also returns the session and event counts.
func fleetDigest(t *testing.T, c *testcluster.Cluster, n *testcluster.Node) (digest string, sessions, events uint64) {
	t.Helper()
	stale := fakv1.ReadConsistency_READ_CONSISTENCY_STALE
	resp, err := c.Sessions(n).ListSessions(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.ListSessionsRequest{Consistency: stale, PageSize: 1000}))
	if err != nil {
		t.Fatalf("list sessions on %s: %v", n.Name, err)
	}
	list := resp.Msg.GetSessions()
	sort.Slice(list, func(i, j int) bool { return list[i].GetSessionId() < list[j].GetSessionId() })
	h := sha256.New()
	for _, s := range list {
		fmt.Fprintf(h, "session %s %s %d\n", s.GetSessionId(), s.GetState(), s.GetHeadSeq())
		for _, ev := range readAll(t, c, n, s.GetSessionId(), stale) {
			fmt.Fprintf(h, "  %d %s %q %q\n", ev.GetSeq(), ev.GetKind(), ev.GetText(), ev.GetData())
		}
		sessions++
		events += s.GetHeadSeq()
	}
	return hex.EncodeToString(h.Sum(nil)), sessions, events
}

// waitDigest waits until every running node's replica has digest want.
func waitDigest(t *testing.T, c *testcluster.Cluster, want, what string) {
	t.Helper()
	for _, n := range c.Nodes {
		if n.Running() == nil {
			continue
		}
		var got string
		c.WaitFor(30*time.Second, fmt.Sprintf("%s on %s", what, n.Name), func() bool {
			got, _, _ = fleetDigest(t, c, n)
			return got == want
		})
	}
}

// TestSnapshotSaveRestore saves the fleet's state through a follower, keeps
// writing, refuses a corrupted copy without changing anything, restores
// the saved file through another follower, and finds every node back at
// exactly the saved sessions and journals, still accepting writes.
func TestSnapshotSaveRestore(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	leader := c.WaitForLeader(30 * time.Second)
	followers := c.Followers()
	if len(followers) < 2 {
		t.Fatalf("want two followers, have %d", len(followers))
	}
	ctx := ctxT(t, 2*time.Minute)

	var ids []string
	for i := 0; i < 3; i++ {
		id := createSession(t, c, c.Nodes[i%len(c.Nodes)], fmt.Sprintf("saved-%d", i))
		ids = append(ids, id)
		for j := 0; j < 5; j++ {
			if _, err := appendText(ctx, c, leader, id, text(j)); err != nil {
				t.Fatalf("append: %v", err)
			}
		}
	}
	waitDigestConverged := func(what string) string {
		want, _, _ := fleetDigest(t, c, leader)
		waitDigest(t, c, want, what)
		return want
	}
	saved := waitDigestConverged("the writes before the save")
	_, wantSessions, wantEvents := fleetDigest(t, c, leader)

	file := saveSnapshot(t, c, followers[0])
	meta := readHeader(t, file)
	if meta.GetSessions() != wantSessions || meta.GetEvents() != wantEvents || meta.GetNode() != leader.Name || meta.GetIndex() == 0 {
		t.Fatalf("snapshot header %v; want %d sessions, %d events, taken by %s", meta, wantSessions, wantEvents, leader.Name)
	}

	// Write more after the save: new sessions, and events on saved ones.
	for i := 0; i < 2; i++ {
		createSession(t, c, leader, fmt.Sprintf("later-%d", i))
	}
	for _, id := range ids {
		if _, err := appendText(ctx, c, followers[1], id, "after the save"); err != nil {
			t.Fatalf("append: %v", err)
		}
	}
	later := waitDigestConverged("the writes after the save")
	if later == saved {
		t.Fatal("writes after the save did not change the digest")
	}

	// A flipped byte in the state: refused, nothing changed.
	bad := bytes.Clone(file)
	bad[len(bad)-100] ^= 0x40
	_, err := restoreSnapshot(t, c, followers[1], bad)
	if connect.CodeOf(err) != connect.CodeInvalidArgument || reasonOf(err) != "INVALID_SNAPSHOT" {
		t.Fatalf("restore of a corrupted file: %v (reason %q); want INVALID_ARGUMENT/INVALID_SNAPSHOT", err, reasonOf(err))
	}
	if got, _, _ := fleetDigest(t, c, leader); got != later {
		t.Fatal("a refused restore changed the state")
	}

	resp, err := restoreSnapshot(t, c, followers[1], file)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if resp.GetMeta().GetIndex() != meta.GetIndex() || resp.GetMeta().GetSha256() != meta.GetSha256() || resp.GetRestoredIndex() <= meta.GetIndex() {
		t.Fatalf("restore answered %v; saved %v", resp, meta)
	}
	waitDigest(t, c, saved, "the saved state after the restore")

	// Writes work after the restore, on saved sessions and new ones, and
	// linearizable reads see them on every node.
	for _, n := range c.Nodes {
		seq, err := appendText(ctx, c, n, ids[0], "after the restore via "+n.Name)
		if err != nil {
			t.Fatalf("append after restore via %s: %v", n.Name, err)
		}
		evs := readAll(t, c, n, ids[0], fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE)
		if last := evs[len(evs)-1]; last.GetSeq() != seq || last.GetText() != "after the restore via "+n.Name {
			t.Fatalf("read on %s after restore: last event %v; appended seq %d", n.Name, last, seq)
		}
	}
	createSession(t, c, followers[0], "after-restore")
}

// TestSnapshotRestoreRefusesGarbage: files that are not snapshots, or are
// cut short, are refused with the reason and change nothing.
func TestSnapshotRestoreRefusesGarbage(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	leader := c.WaitForLeader(30 * time.Second)
	createSession(t, c, leader, "kept")
	file := saveSnapshot(t, c, leader)
	before, _, _ := fleetDigest(t, c, leader)
	for name, bad := range map[string][]byte{
		"not a snapshot": []byte("hello, this is not a snapshot file at all"),
		"empty":          nil,
		"truncated":      file[:len(file)/2],
		"trailing bytes": append(bytes.Clone(file), 'x'),
	} {
		_, err := restoreSnapshot(t, c, c.Followers()[0], bad)
		if connect.CodeOf(err) != connect.CodeInvalidArgument || reasonOf(err) != "INVALID_SNAPSHOT" {
			t.Errorf("%s: %v (reason %q); want INVALID_ARGUMENT/INVALID_SNAPSHOT", name, err, reasonOf(err))
		}
	}
	if after, _, _ := fleetDigest(t, c, leader); after != before {
		t.Fatal("a refused restore changed the state")
	}
}

// TestSnapshotRestoreRetiresRuntimes: a runtime built from a journal that a
// restore rewound must not serve the restored session. The echo runtime
// counts the turns of its context, so after save (1 turn), 2 more turns and
// a restore, the next turn is the context's second, not its fourth.
func TestSnapshotRestoreRetiresRuntimes(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{EchoTurn: 20 * time.Millisecond})
	leader := c.WaitForLeader(30 * time.Second)
	compute := c.Followers()[0]
	id := createSession(t, c, compute, "runtime")
	term := attach(t, c, leader, id, "terminal", "term")
	ctx := ctxT(t, time.Minute)
	if err := takeLease(ctx, c, leader, id, term, false); err != nil {
		t.Fatal(err)
	}
	turn := func(text, want string) {
		t.Helper()
		seq := mustAct(t, c, leader, id, term, text)
		evs := waitJournal(t, c, leader, id, "the turn for "+text, turnDone(t, seq))
		got := turnOf(t, evs, seq)
		if last := got[len(got)-1]; last.GetText() != want {
			t.Fatalf("turn for %q: %s; want %q", text, last.GetText(), want)
		}
	}
	turn("one", "turn 1 done")
	file := saveSnapshot(t, c, leader)
	turn("two", "turn 2 done")
	turn("three", "turn 3 done")

	if _, err := restoreSnapshot(t, c, c.Followers()[1], file); err != nil {
		t.Fatalf("restore: %v", err)
	}
	waitJournal(t, c, compute, id, "the restored journal on the compute node", func(evs []*fakv1.Event) bool {
		return count(evs, "turn.completed") == 1
	})
	if err := takeLease(ctx, c, leader, id, term, true); err != nil {
		t.Fatalf("take the lease after the restore: %v", err)
	}
	turn("four", "turn 2 done")
}

// TestSnapshotRestoreOfCompressedStateWaitsForEveryVoter: a backup taken
// once every voter reads compressed snapshots holds a compressed state;
// while a voter runs a build that cannot read one (here: a voter with no
// node record, which counts as rule version 1), restoring it is refused
// with UPGRADE_IN_PROGRESS naming that voter and changes nothing.
func TestSnapshotRestoreOfCompressedStateWaitsForEveryVoter(t *testing.T) {
	c := testcluster.New(t, testcluster.Options{})
	leader := c.WaitForLeader(30 * time.Second)
	c.WaitFor(30*time.Second, "three node records", func() bool {
		recs, err := leader.Running().FSM().Nodes()
		return err == nil && len(recs) == 3
	})
	createSession(t, c, leader, "saved")
	file := saveSnapshot(t, c, leader)
	in := bytes.NewReader(file)
	if _, err := snapshotfile.ReadHeader(in); err != nil {
		t.Fatal(err)
	}
	if compressed, err := fsm.StateCompressed(io.NewSectionReader(in, int64(len(file)-in.Len()), int64(in.Len()))); err != nil || !compressed {
		t.Fatalf("the backup of a fleet whose voters all read compressed snapshots holds a plain state (%v)", err)
	}
	later := createSession(t, c, leader, "after-save")
	r := leader.Running().Cluster().Raft()
	if err := r.AddVoter("old-build", "127.0.0.1:1", 0, 10*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	before, _, _ := fleetDigest(t, c, leader)
	_, err := restoreSnapshot(t, c, leader, file)
	if connect.CodeOf(err) != connect.CodeFailedPrecondition || reasonOf(err) != "UPGRADE_IN_PROGRESS" ||
		!strings.Contains(err.Error(), "old-build") {
		t.Fatalf("restore with an old voter: %v (reason %q); want FAILED_PRECONDITION/UPGRADE_IN_PROGRESS naming old-build", err, reasonOf(err))
	}
	if after, _, _ := fleetDigest(t, c, leader); after != before {
		t.Fatal("a refused restore changed the state")
	}
	if err := r.RemoveServer("old-build", 0, 10*time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	if _, err := restoreSnapshot(t, c, leader, file); err != nil {
		t.Fatalf("restore once every voter reads it: %v", err)
	}
	c.WaitFor(30*time.Second, "the restore on every node", func() bool {
		for _, n := range c.Nodes {
			if _, err := n.Running().FSM().Session(later); err == nil {
				return false
			}
		}
		return true
	})
}
