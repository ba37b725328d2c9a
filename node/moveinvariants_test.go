package node_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/testcluster"
)

// checkMoveInvariants waits until the fleet is quiet (no move open, no
// turn running, no input queued in any active session, every running
// replica at the leader's applied index), then checks every session's
// journal on every running node:
//
//   - the replicas hold the same journal, event for event (up to the
//     leader's head when it was read), and agree on the session's current
//     epoch and placement;
//   - no address gap: events are 1..head;
//   - epochs strictly increase, each through an epoch.changed (a number
//     issued to a restore that never cut over is not reused), and the
//     session's current epoch and node are the last epoch.changed's — so
//     every address has exactly one current epoch;
//   - at most one move open at a time; a move's events follow its state
//     machine; a checkpoint's digest is the digest of the journal up to its
//     address; a restore is the next epoch; a cutover is preceded by its
//     epoch.changed (reason move);
//   - no turn starts between a move's checkpoint and its end (the
//     checkpoint is a safe point);
//   - every turn.started names the node of the epoch current at its
//     address, and answers a queued input: every input is answered exactly
//     once, in journal order.
func checkMoveInvariants(t *testing.T, c *testcluster.Cluster) {
	t.Helper()
	quiet(t, c)
	leader := c.WaitForLeader(30 * time.Second)
	ids := allSessions(t, c, leader)
	for _, id := range ids {
		ref := readAll(t, c, leader, id, fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE)
		refSession, err := leader.Running().FSM().Session(id)
		if err != nil {
			t.Fatalf("session %s on the leader: %v", id, err)
		}
		for _, n := range c.Nodes {
			r := n.Running()
			if r == nil || n == leader {
				continue
			}
			// Read later, the replica may hold more (a runner's last
			// charge, a lapsed lease): the common prefix must be equal.
			evs := readAll(t, c, n, id, fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE)
			if len(evs) < len(ref) {
				t.Fatalf("session %s: %s holds %d events after a linearizable read, the leader %s %d before it", id, n.Name, len(evs), leader.Name, len(ref))
			}
			for i := range ref {
				if !proto.Equal(evs[i], ref[i]) {
					t.Fatalf("session %s #%d differs on %s and %s:\n%v\n%v", id, i+1, n.Name, leader.Name, evs[i], ref[i])
				}
			}
			s, err := r.FSM().Session(id)
			if err != nil {
				t.Fatalf("session %s on %s: %v", id, n.Name, err)
			}
			if s.Epoch != refSession.Epoch || s.GetPlacement().GetNode() != refSession.GetPlacement().GetNode() {
				t.Fatalf("session %s: %s says epoch %d on %s, %s says epoch %d on %s", id,
					n.Name, s.Epoch, s.GetPlacement().GetNode(), leader.Name, refSession.Epoch, refSession.GetPlacement().GetNode())
			}
		}
		if err := journalInvariants(ref, refSession); err != nil {
			t.Fatalf("session %s: %v\n%s", id, err, transcript(ref))
		}
	}
}

// quiet waits until no active session has an open move, a running turn or
// a queued input, and every running replica has applied what the leader
// has.
func quiet(t *testing.T, c *testcluster.Cluster) {
	t.Helper()
	c.WaitFor(60*time.Second, "a quiet fleet (no open move, no turn, no queued input; replicas caught up)", func() bool {
		l := c.Leader()
		if l == nil {
			return false
		}
		f := l.Running().FSM()
		ss, _, err := f.Sessions("", 100000)
		if err != nil {
			return false
		}
		for _, s := range ss {
			if s.State == fsmpb.SessionState_SESSION_STATE_ACTIVE &&
				(fsm.MoveOpen(s.Move) || s.TurnInputSeq != 0 || len(s.QueuedInputs) > 0) {
				return false
			}
		}
		applied := f.AppliedIndex()
		for _, n := range c.Nodes {
			if r := n.Running(); r != nil && r.FSM().AppliedIndex() < applied {
				return false
			}
		}
		return true
	})
}

func allSessions(t *testing.T, c *testcluster.Cluster, n *testcluster.Node) []string {
	t.Helper()
	var ids []string
	token := ""
	for {
		resp, err := c.Sessions(n).ListSessions(ctxT(t, 15*time.Second), connect.NewRequest(&fakv1.ListSessionsRequest{
			PageSize: 1000, PageToken: token, Consistency: fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE,
		}))
		if err != nil {
			t.Fatalf("list sessions: %v", err)
		}
		for _, s := range resp.Msg.Sessions {
			ids = append(ids, s.SessionId)
		}
		if token = resp.Msg.NextPageToken; token == "" {
			return ids
		}
	}
}

type journalFact struct {
	Epoch         uint64                `json:"epoch"`
	Reason        string                `json:"reason"`
	Placement     struct{ Node string } `json:"placement"`
	MoveID        string                `json:"move_id"`
	State         string                `json:"state"`
	CheckpointSeq uint64                `json:"checkpoint_seq"`
	Digest        string                `json:"digest"`
	NewEpoch      uint64                `json:"new_epoch"`
	InputSeq      uint64                `json:"input_seq"`
	Node          string                `json:"node"`
}

// journalInvariants checks one session's journal (see checkMoveInvariants)
// against its final record s.
func journalInvariants(evs []*fakv1.Event, s *fsmpb.Session) error {
	var (
		epoch     uint64 // current
		issued    uint64 // the highest epoch number issued (a restore that never cut over too)
		node      string
		open      string // the open move's id
		openState string
		safe      bool // the open move has checkpointed
		queued    []uint64
		answered  = map[uint64]bool{}
		inTurn    bool
		raw       = make([]*fsmpb.Event, 0, len(evs))
	)
	next := map[string][]string{ // move event kinds allowed after each state
		"":                         {fsm.KindMoveRequested},
		fsm.MoveSafePointRequested: {fsm.KindMoveCheckpointed, fsm.KindMoveFailed, fsm.KindMoveUnsafe},
		fsm.MoveCheckpointed:       {fsm.KindMoveAdmitted, fsm.KindMoveFailed, fsm.KindMoveUnsafe},
		fsm.MoveAdmitted:           {fsm.KindMoveRestored, fsm.KindMoveFailed, fsm.KindMoveUnsafe},
		fsm.MoveRestored:           {fsm.KindMoveCutover, fsm.KindMoveFailed, fsm.KindMoveUnsafe},
	}
	for i, ev := range evs {
		if ev.Seq != uint64(i+1) {
			return fmt.Errorf("address gap: position %d holds #%d", i+1, ev.Seq)
		}
		raw = append(raw, &fsmpb.Event{Seq: ev.Seq, Kind: ev.Kind, Text: ev.Text, Data: ev.Data})
		var f journalFact
		if len(ev.Data) > 0 && ev.Data[0] == '{' {
			if err := json.Unmarshal(ev.Data, &f); err != nil {
				return fmt.Errorf("#%d %s: data %s: %v", ev.Seq, ev.Kind, ev.Data, err)
			}
		}
		switch ev.Kind {
		case fsm.KindEpochChanged:
			if f.Epoch <= epoch {
				return fmt.Errorf("#%d: epoch %d after epoch %d", ev.Seq, f.Epoch, epoch)
			}
			if f.Reason == "move" && (open == "" || openState != fsm.MoveRestored) {
				return fmt.Errorf("#%d: an epoch change for a move that is not restored (%q %s)", ev.Seq, open, openState)
			}
			epoch, node = f.Epoch, f.Placement.Node
			issued = max(issued, epoch)
		case fsm.KindMoveRequested, fsm.KindMoveCheckpointed, fsm.KindMoveAdmitted, fsm.KindMoveRestored,
			fsm.KindMoveCutover, fsm.KindMoveFailed, fsm.KindMoveUnsafe:
			if ev.Kind == fsm.KindMoveRequested {
				if open != "" {
					return fmt.Errorf("#%d: move %s requested while move %s is open", ev.Seq, f.MoveID, open)
				}
				open = f.MoveID
			} else if f.MoveID != open {
				return fmt.Errorf("#%d: %s of move %s while move %q is open", ev.Seq, ev.Kind, f.MoveID, open)
			}
			if !slices.Contains(next[openState], ev.Kind) {
				return fmt.Errorf("#%d: %s after %q", ev.Seq, ev.Kind, openState)
			}
			switch ev.Kind {
			case fsm.KindMoveCheckpointed:
				if f.CheckpointSeq == 0 || f.CheckpointSeq >= ev.Seq {
					return fmt.Errorf("#%d: checkpoint at #%d", ev.Seq, f.CheckpointSeq)
				}
				if d := fsm.JournalDigest(raw[:f.CheckpointSeq]); d != f.Digest {
					return fmt.Errorf("#%d: checkpoint digest %s; the journal up to #%d has %s", ev.Seq, f.Digest, f.CheckpointSeq, d)
				}
				safe = true
			case fsm.KindMoveRestored:
				if f.NewEpoch != issued+1 {
					return fmt.Errorf("#%d: restored as epoch %d; epochs up to %d were issued", ev.Seq, f.NewEpoch, issued)
				}
				issued = f.NewEpoch
			case fsm.KindMoveCutover:
				prev := evs[i-1]
				var pf journalFact
				_ = json.Unmarshal(prev.Data, &pf)
				if prev.Kind != fsm.KindEpochChanged || pf.Reason != "move" || pf.Epoch != f.NewEpoch || f.NewEpoch != epoch {
					return fmt.Errorf("#%d: cutover to epoch %d not preceded by its epoch.changed", ev.Seq, f.NewEpoch)
				}
			}
			openState = f.State
			if ev.Kind == fsm.KindMoveCutover || ev.Kind == fsm.KindMoveFailed || ev.Kind == fsm.KindMoveUnsafe {
				open, openState, safe = "", "", false
			}
		case fsm.KindInput:
			queued = append(queued, ev.Seq)
		case fsm.KindResetBoundary:
			queued = nil // a reset drops the queue
		case fsm.KindTurnStarted:
			if safe {
				return fmt.Errorf("#%d: a turn started after move %s checkpointed", ev.Seq, open)
			}
			if inTurn {
				return fmt.Errorf("#%d: a turn started inside a turn", ev.Seq)
			}
			if f.Node != node {
				return fmt.Errorf("#%d: turn started by %s while epoch %d runs on %s", ev.Seq, f.Node, epoch, node)
			}
			if answered[f.InputSeq] {
				return fmt.Errorf("#%d: input #%d answered twice", ev.Seq, f.InputSeq)
			}
			if len(queued) == 0 || queued[0] != f.InputSeq {
				return fmt.Errorf("#%d: turn for input #%d, the oldest queued input is %v", ev.Seq, f.InputSeq, queued)
			}
			queued = queued[1:]
			answered[f.InputSeq] = true
			inTurn = true
		case fsm.KindTurnCompleted:
			inTurn = false
		}
	}
	if s.State == fsmpb.SessionState_SESSION_STATE_ACTIVE && len(queued) > 0 {
		return fmt.Errorf("inputs %v never answered", queued)
	}
	if open != "" {
		return fmt.Errorf("move %s still open (%s)", open, openState)
	}
	if s.Epoch != epoch || s.GetPlacement().GetNode() != node {
		return fmt.Errorf("the session says epoch %d on %s; its journal says epoch %d on %s", s.Epoch, s.GetPlacement().GetNode(), epoch, node)
	}
	return nil
}

// The checker itself catches what it claims to.
func TestMoveInvariants_CatchViolations(t *testing.T) {
	ev := func(kind, data string) *fakv1.Event { return &fakv1.Event{Kind: kind, Data: []byte(data)} }
	build := func(mutate func([]*fakv1.Event) []*fakv1.Event) []*fakv1.Event {
		evs := []*fakv1.Event{
			ev("session.created", ""),
			ev("epoch.changed", `{"epoch":1,"placement":{"node":"n1"}}`),
			ev("input", ""),
			ev("turn.started", `{"input_seq":3,"node":"n1"}`),
			ev("turn.completed", `{"input_seq":3}`),
			ev("move.requested", `{"move_id":"m","state":"SAFE_POINT_REQUESTED"}`),
			ev("move.checkpointed", `{"move_id":"m","state":"CHECKPOINTED","checkpoint_seq":6,"digest":"DIGEST"}`),
			ev("move.admitted", `{"move_id":"m","state":"DESTINATION_ADMITTED"}`),
			ev("move.restored", `{"move_id":"m","state":"RESTORED","new_epoch":2}`),
			ev("epoch.changed", `{"epoch":2,"placement":{"node":"n2"},"reason":"move"}`),
			ev("move.cutover", `{"move_id":"m","state":"CUTOVER_COMMITTED","new_epoch":2}`),
			ev("input", ""),
			ev("turn.started", `{"input_seq":12,"node":"n2"}`),
			ev("turn.completed", `{"input_seq":12}`),
		}
		if mutate != nil {
			evs = mutate(evs)
		}
		var raw []*fsmpb.Event
		for i, e := range evs {
			e.Seq = uint64(i + 1)
			raw = append(raw, &fsmpb.Event{Seq: e.Seq, Kind: e.Kind, Text: e.Text, Data: e.Data})
		}
		d := fsm.JournalDigest(raw[:6])
		for _, e := range evs {
			e.Data = []byte(strings.Replace(string(e.Data), "DIGEST", d, 1))
		}
		return evs
	}
	final := &fsmpb.Session{State: fsmpb.SessionState_SESSION_STATE_ACTIVE, Epoch: 2, Placement: &fsmpb.Placement{Node: "n2"}}
	if err := journalInvariants(build(nil), final); err != nil {
		t.Fatalf("a valid journal: %v", err)
	}
	for name, tc := range map[string]struct {
		mutate func([]*fakv1.Event) []*fakv1.Event
		want   string
	}{
		"turn on the old node": {func(evs []*fakv1.Event) []*fakv1.Event {
			evs[12].Data = []byte(`{"input_seq":12,"node":"n1"}`)
			return evs
		}, "turn started by n1"},
		"digest": {func(evs []*fakv1.Event) []*fakv1.Event {
			evs[6].Data = []byte(`{"move_id":"m","state":"CHECKPOINTED","checkpoint_seq":6,"digest":"00"}`)
			return evs
		}, "checkpoint digest"},
		"answered twice": {func(evs []*fakv1.Event) []*fakv1.Event {
			return append(evs, ev("turn.started", `{"input_seq":3,"node":"n2"}`))
		}, "answered twice"},
		"turn after the checkpoint": {func(evs []*fakv1.Event) []*fakv1.Event {
			return slices.Insert(evs, 7, ev("input", ""), ev("turn.started", `{"input_seq":8,"node":"n1"}`), ev("turn.completed", ""))
		}, "after move m checkpointed"},
		"two moves open": {func(evs []*fakv1.Event) []*fakv1.Event {
			return slices.Insert(evs, 6, ev("move.requested", `{"move_id":"m2","state":"SAFE_POINT_REQUESTED"}`))
		}, "requested while move"},
		"epoch not increasing": {func(evs []*fakv1.Event) []*fakv1.Event {
			evs[9].Data = []byte(`{"epoch":1,"placement":{"node":"n2"},"reason":"move"}`)
			return evs
		}, "epoch 1 after epoch 1"},
		"unanswered input": {func(evs []*fakv1.Event) []*fakv1.Event {
			return append(evs, ev("input", ""))
		}, "never answered"},
	} {
		err := journalInvariants(build(tc.mutate), final)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error containing %q", name, err, tc.want)
		}
	}
	gap := build(nil)
	gap = append(gap[:4], gap[5:]...)
	if err := journalInvariants(gap, final); err == nil || !strings.Contains(err.Error(), "gap") {
		t.Errorf("gap: %v", err)
	}
}
