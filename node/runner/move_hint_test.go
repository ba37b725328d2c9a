package runner_test

import (
	"sync/atomic"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// requestView is the session as a leader applies a request to move it
// (one event more: move.requested), built from the replica's copy.
func requestView(s *fsmpb.Session, moveID string) *fsmpb.Session {
	v := proto.Clone(s).(*fsmpb.Session)
	v.HeadSeq++
	v.Move = &fsmpb.Move{MoveId: moveID, State: fsm.MoveSafePointRequested, Cause: fsm.MoveCauseOperator,
		Target: &fsmpb.Placement{}, SourceNode: s.GetPlacement().GetNode(), SourceEpoch: s.Epoch}
	return v
}

func requestMove(moveID, id string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_RequestMove{RequestMove: &fsmpb.RequestMove{
		SessionId: id, MoveId: moveID, Target: &fsmpb.Placement{}, Cause: fsm.MoveCauseOperator}}}
}

// A move-step hint lets the source checkpoint before its replica has the
// request: at the last event it holds, which the FSM accepts, and which is
// the head the checkpoint would have had without the request's own event.
func TestRunner_MoveStepHintCheckpointsBeforeTheReplicaHasTheRequest(t *testing.T) {
	l := newLocal(t)
	id := l.session("s1", "n1", "echo")
	r := l.startRunner(0, nil)
	before := l.waitSession(id, "the session", func(*fsmpb.Session) bool { return true })

	var behind atomic.Bool
	l.beforeMoveStep = func() {
		s, _ := l.f.Session(id)
		behind.Store(!fsm.MoveOpen(s.Move))
		l.must(requestMove("m1", id)) // what the leader had committed
	}
	r.HintMoveStep(requestView(before, "m1"))
	s := l.waitSession(id, "the checkpoint", func(s *fsmpb.Session) bool { return s.Move.GetState() == fsm.MoveCheckpointed })
	if !behind.Load() {
		t.Fatal("the checkpoint came after the replica applied the request: the hint was not acted on")
	}
	if s.Move.CheckpointSeq != before.HeadSeq {
		t.Fatalf("checkpoint at #%d, want #%d (the last event before the request)", s.Move.CheckpointSeq, before.HeadSeq)
	}
	if d, err := l.f.JournalDigest(id, before.HeadSeq); err != nil || d != s.Move.Digest {
		t.Fatalf("checkpoint digest %s, the journal's up to #%d is %s (%v)", s.Move.Digest, before.HeadSeq, d, err)
	}
}

// A view that arrives while the replica lacks more than the step's event
// waits for the replica to apply the rest, then is acted on; a view the
// replica does not lead to (another epoch) is dropped.
func TestRunner_EarlyMoveStepHintWaitsForTheReplica(t *testing.T) {
	l := newLocal(t)
	id := l.session("s1", "n1", "echo")
	r := l.startRunner(0, nil)
	before := l.waitSession(id, "the session", func(*fsmpb.Session) bool { return true })

	stale := requestView(before, "m0")
	stale.Epoch++
	stale.HeadSeq++
	r.HintMoveStep(stale) // never one event behind it: dropped

	// The leader's journal: a note, then the request.
	view := requestView(before, "m1")
	view.HeadSeq++
	var at atomic.Uint64
	l.beforeMoveStep = func() {
		s, _ := l.f.Session(id)
		at.Store(s.HeadSeq)
		if !fsm.MoveOpen(s.Move) {
			l.must(requestMove("m1", id))
		}
	}
	r.HintMoveStep(view)
	l.must(&fsmpb.Command{Body: &fsmpb.Command_AppendEvents{AppendEvents: &fsmpb.AppendEvents{
		SessionId: id, Events: []*fsmpb.EventInput{{Kind: "note", Text: "between"}}}}})
	s := l.waitSession(id, "the checkpoint", func(s *fsmpb.Session) bool { return s.Move.GetState() == fsm.MoveCheckpointed })
	if at.Load() != before.HeadSeq+1 || s.Move.CheckpointSeq != before.HeadSeq+1 {
		t.Fatalf("checkpoint at #%d with the replica at #%d, want both #%d: the kept view acted on once the note applied",
			s.Move.CheckpointSeq, at.Load(), before.HeadSeq+1)
	}
}
