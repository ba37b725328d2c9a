package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// VerifyReplay on a one-node cluster, where the test can reach the log
// store to make the log and the live state disagree. The three-node checks
// are node/verify_replay_test.go.

func soloCluster(t *testing.T) *Cluster {
	t.Helper()
	dir := t.TempDir()
	f, err := fsm.Open(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(Config{
		Name: "solo", DataDir: dir, RaftAddr: "127.0.0.1:0", GossipAddr: "127.0.0.1:0",
		BootstrapExpect: 1, Voter: true,
	}, f)
	if err != nil {
		f.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Shutdown(); f.Close() })
	deadline := time.Now().Add(30 * time.Second)
	for !c.IsLeader() {
		if time.Now().After(deadline) {
			t.Fatal("no leader after 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return c
}

func noteCmd(i int, text string) *fsmpb.Command {
	return &fsmpb.Command{
		RequestId: fmt.Sprintf("r%04d", i), TimeUnixNano: time.Now().UnixNano(),
		Body: &fsmpb.Command_AppendEvents{AppendEvents: &fsmpb.AppendEvents{
			SessionId: "s1", Events: []*fsmpb.EventInput{{Kind: "note", Text: text}},
		}},
	}
}

func writeNotes(t *testing.T, c *Cluster, from, to int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := from; i < to; i++ {
		cmd := noteCmd(i, fmt.Sprintf("note %d", i))
		if i == 0 {
			cmd.Body = &fsmpb.Command_CreateSession{CreateSession: &fsmpb.CreateSession{SessionId: "s1", Title: "t"}}
		}
		r, err := c.Apply(ctx, cmd)
		if err != nil || fsm.ResultError(r) != nil {
			t.Fatalf("apply %d: %v %v", i, err, fsm.ResultError(r))
		}
	}
}

func verifyT(t *testing.T, c *Cluster) *ReplayReport {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rep, err := c.VerifyReplay(ctx)
	if err != nil {
		t.Fatalf("VerifyReplay: %v", err)
	}
	return rep
}

func TestVerifyReplaySoloNode(t *testing.T) {
	c := soloCluster(t)
	writeNotes(t, c, 0, 40)

	// No snapshot yet: one rebuild, from the whole log.
	rep := verifyT(t, c)
	if !rep.Equal || len(rep.Rebuilds) != 1 || rep.Rebuilds[0].Source != SourceLog ||
		rep.Rebuilds[0].Entries != rep.LiveIndex || !strings.Contains(rep.LogOnlySkipped, "no snapshot") {
		t.Fatalf("before a snapshot: %+v", rep)
	}

	if err := c.Raft().Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	writeNotes(t, c, 40, 60)
	rep = verifyT(t, c)
	if !rep.Equal || len(rep.Rebuilds) != 2 {
		t.Fatalf("after a snapshot: %+v", rep)
	}
	bySnap, byLog := rep.Rebuilds[0], rep.Rebuilds[1]
	if bySnap.Source != SourceSnapshotAndLog || bySnap.SnapshotIndex == 0 || bySnap.FirstIndex != bySnap.SnapshotIndex+1 ||
		bySnap.LastIndex != rep.LiveIndex || bySnap.Entries != rep.LiveIndex-bySnap.SnapshotIndex || bySnap.Entries < 20 {
		t.Fatalf("snapshot+log rebuild: %+v (live index %d)", bySnap, rep.LiveIndex)
	}
	if byLog.Source != SourceLog || byLog.Entries != rep.LiveIndex || byLog.Digest != rep.LiveDigest {
		t.Fatalf("log rebuild: %+v (live %d %s)", byLog, rep.LiveIndex, rep.LiveDigest)
	}
	if left, _ := filepath.Glob(filepath.Join(c.cfg.DataDir, scratchPrefix+"*")); len(left) != 0 {
		t.Fatalf("scratch dirs left behind: %v", left)
	}

	// Forge the entry that appended note 50: the live state no longer
	// follows from the log, and the check says where.
	var l raft.Log
	idx := rep.LiveIndex - 9
	if err := c.logStore.GetLog(idx, &l); err != nil {
		t.Fatal(err)
	}
	cmds := decodeNotes(t, l.Data)
	cmds[0].GetAppendEvents().Events[0].Text = "forged"
	if l.Data, _ = fsm.EncodeBatch(cmds); l.Data == nil {
		t.Fatal("encode")
	}
	// The WAL only appends, so the check reads the forged entry through
	// a store that serves it in place of the real one.
	real := c.logStore
	c.logStore = forgedLog{logStore: real, forged: map[uint64]*raft.Log{idx: &l}}
	rep = verifyT(t, c)
	if rep.Equal {
		t.Fatalf("equal after forging log entry %d: %+v", idx, rep)
	}
	for _, r := range rep.Rebuilds {
		if r.Equal || len(r.Differences) != 1 || r.Differences[0].Bucket != "journal" ||
			r.FirstDiff == nil || r.FirstDiff.Bucket != "journal" || r.FirstDiff.Kind != fsm.DiffValue {
			t.Fatalf("%s rebuild after forging entry %d: %+v, first diff %+v", r.Source, idx, r, r.FirstDiff)
		}
	}

	// Compact the log past the snapshot: the check cannot be carried out.
	snapIndex := rep.Rebuilds[0].SnapshotIndex
	c.logStore = forgedLog{logStore: real, missing: [2]uint64{snapIndex + 1, snapIndex + 3}}
	defer func() { c.logStore = real }()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if rep, err := c.VerifyReplay(ctx); err == nil || !strings.Contains(err.Error(), "log not found") {
		t.Fatalf("VerifyReplay with a hole after the snapshot: %+v, %v; want an error", rep, err)
	}
}

// forgedLog serves forged entries in place of the real ones, and none in
// the range missing.
type forgedLog struct {
	logStore
	forged  map[uint64]*raft.Log
	missing [2]uint64
}

func (f forgedLog) GetLog(i uint64, l *raft.Log) error {
	if i >= f.missing[0] && i <= f.missing[1] {
		return raft.ErrLogNotFound
	}
	if e, ok := f.forged[i]; ok {
		*l = *e
		return nil
	}
	return f.logStore.GetLog(i, l)
}

// decodeNotes decodes a fak batch entry holding AppendEvents commands.
func decodeNotes(t *testing.T, data []byte) []*fsmpb.Command {
	t.Helper()
	var b fsmpb.Batch
	if len(data) == 0 || data[0] != byte(fsm.EntryBatch) {
		t.Fatalf("not a batch entry: %x", data)
	}
	if err := proto.Unmarshal(data[1:], &b); err != nil {
		t.Fatal(err)
	}
	if len(b.Commands) == 0 || b.Commands[0].GetAppendEvents() == nil {
		t.Fatalf("entry holds %v", b.Commands)
	}
	return b.Commands
}
