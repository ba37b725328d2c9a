package fsm

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Builders for the move and node commands, and the fixtures their tests
// share.

func requestMove(id, moveID string, target *fsmpb.Placement, cause string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_RequestMove{RequestMove: &fsmpb.RequestMove{
		SessionId: id, MoveId: moveID, Target: target, Cause: cause,
	}}}
}

// moveTo is an operator's move of id to node, keeping the rest of the
// placement.
func moveTo(id, moveID, node string) *fsmpb.Command {
	return requestMove(id, moveID, &fsmpb.Placement{Node: node}, MoveCauseOperator)
}

func moveCheckpoint(id, moveID string, sourceEpoch, seq uint64, digest string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_MoveCheckpoint{MoveCheckpoint: &fsmpb.MoveCheckpoint{
		SessionId: id, MoveId: moveID, SourceEpoch: sourceEpoch, CheckpointSeq: seq, Digest: digest,
	}}}
}

func moveAdmit(id, moveID string, p *fsmpb.Placement, checks, degradation []string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_MoveAdmit{MoveAdmit: &fsmpb.MoveAdmit{
		SessionId: id, MoveId: moveID, Placement: p, Checks: checks, Degradation: degradation,
	}}}
}

func moveRestore(id, moveID string, newEpoch uint64, digest string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_MoveRestore{MoveRestore: &fsmpb.MoveRestore{
		SessionId: id, MoveId: moveID, NewEpoch: newEpoch, Digest: digest,
	}}}
}

func moveCutover(id, moveID string) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_MoveCutover{MoveCutover: &fsmpb.MoveCutover{
		SessionId: id, MoveId: moveID,
	}}}
}

func moveFail(id, moveID, reason string, unsafe bool) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_MoveFail{MoveFail: &fsmpb.MoveFail{
		SessionId: id, MoveId: moveID, Reason: reason, Unsafe: unsafe,
	}}}
}

func markStranded(id, node string, stranded bool) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_MarkStranded{MarkStranded: &fsmpb.MarkStranded{
		SessionId: id, Node: node, Stranded: stranded,
	}}}
}

func registerNode(n *fsmpb.NodeRecord) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_RegisterNode{RegisterNode: &fsmpb.RegisterNode{Node: n}}}
}

func setDraining(node string, draining bool) *fsmpb.Command {
	return &fsmpb.Command{Body: &fsmpb.Command_SetDraining{SetDraining: &fsmpb.SetDraining{
		Node: node, Draining: draining,
	}}}
}

// sourcePlacement is where mover places its session; destPlacement is the
// same placement on n2.
func sourcePlacement() *fsmpb.Placement {
	return &fsmpb.Placement{RuntimeAdapter: "echo", Provider: "anthropic", Model: "opus", Node: "n1"}
}

func destPlacement() *fsmpb.Placement {
	p := sourcePlacement()
	p.Node = "n2"
	return p
}

// admitChecks are the checks a controller reports for an admission.
var admitChecks = []string{"alive", "not draining", "capacity", "adapter", "account ref"}

// mover creates session id on n1 (echo, anthropic, opus) with a1, a
// terminal holding the input lease, and a2, a phone; runs one turn to
// completion and queues one more input. The journal is then:
//
//	1 session.created     4 attachment.joined   7 turn.started
//	2 epoch.changed       5 lease.taken         8 turn.completed
//	3 attachment.joined   6 input first         9 input second (queued)
func mover(t *testing.T, h *harness, id string) {
	t.Helper()
	c := create(id)
	c.GetCreateSession().Placement = sourcePlacement()
	rs := h.apply(c,
		attachCmd(id, "a1", "terminal", "tty-a1", MaxTTL),
		attachCmd(id, "a2", "browser", "phone", MaxTTL),
		takeLease(id, "a1", false, MaxTTL),
		submitInput(id, "a1", 1, "first"),
		runnerAppend(id, 1, ev(KindTurnStarted, "")),
		runnerAppend(id, 1, ev(KindTurnCompleted, "")),
		submitInput(id, "a1", 1, "second"),
	)
	for i, r := range rs {
		if r.Error != nil {
			t.Fatalf("mover(%s): command %d: %v", id, i, r.Error)
		}
	}
	if s := h.session(id); s.HeadSeq != 9 || !slices.Equal(s.QueuedInputs, []uint64{9}) || s.TurnInputSeq != 0 {
		t.Fatalf("mover(%s): head %d queued %v turn %d", id, s.HeadSeq, s.QueuedInputs, s.TurnInputSeq)
	}
}

// digest is JournalDigest over events 1..seq of id, as a runner computes
// it from its replica.
func (h *harness) digest(id string, seq uint64) string {
	h.t.Helper()
	if seq == 0 {
		return JournalDigest(nil)
	}
	evs, _, err := h.f.Events(id, 1, int(seq))
	if err != nil || uint64(len(evs)) != seq {
		h.t.Fatalf("digest(%s, %d): %d events, %v", id, seq, len(evs), err)
	}
	return JournalDigest(evs)
}

// moveStates are the states a move passes through, in order, followed by
// the failure states.
var moveStates = []string{MoveSafePointRequested, MoveCheckpointed, MoveAdmitted, MoveRestored, MoveCutoverCommitted, MoveFailed, MoveUnsafe}

// driveMove takes move moveID of id (requested if the session has no such
// move yet, to n2) to state, one legal command at a time: the happy path
// up to a success state (admitting admitted(s)), or a failure (MoveFail
// from the checkpointed state, MOVE_UNSAFE from the safe-point request).
func (h *harness) driveMove(id, moveID, state string) *fsmpb.Session {
	h.t.Helper()
	if s := h.session(id); s.Move.GetMoveId() != moveID {
		wantErr(h.t, h.apply1(moveTo(id, moveID, "n2")), "")
	}
	for {
		s := h.session(id)
		m := s.Move
		if m.State == state {
			return s
		}
		var c *fsmpb.Command
		switch {
		case m.State == MoveSafePointRequested && state == MoveUnsafe:
			c = moveFail(id, moveID, "no safe point in 30s", true)
		case m.State == MoveCheckpointed && state == MoveFailed:
			c = moveFail(id, moveID, "destination died", false)
		case m.State == MoveSafePointRequested:
			c = moveCheckpoint(id, moveID, s.Epoch, s.HeadSeq, h.digest(id, s.HeadSeq))
		case m.State == MoveCheckpointed:
			c = moveAdmit(id, moveID, admitted(s), admitChecks, nil)
		case m.State == MoveAdmitted:
			c = moveRestore(id, moveID, NextEpoch(s), h.digest(id, m.CheckpointSeq))
		case m.State == MoveRestored:
			c = moveCutover(id, moveID)
		default:
			h.t.Fatalf("driveMove(%s, %s): cannot get from %s to %s", id, moveID, m.State, state)
		}
		wantErr(h.t, h.apply1(c), "")
	}
}

// admitted is the placement a controller admits for s's move: the
// current one with the target's members, on the target node or n2.
func admitted(s *fsmpb.Session) *fsmpb.Placement {
	p := proto.Clone(s.Placement).(*fsmpb.Placement)
	t := s.Move.GetTarget()
	p.Node = cmp.Or(t.GetNode(), "n2")
	p.Model = cmp.Or(t.GetModel(), p.Model)
	p.Provider = cmp.Or(t.GetProvider(), p.Provider)
	p.AccountRef = cmp.Or(t.GetAccountRef(), p.AccountRef)
	p.RuntimeAdapter = cmp.Or(t.GetRuntimeAdapter(), p.RuntimeAdapter)
	return p
}

// noOp applies c, which must be a successful no-op, and checks that it
// changed nothing at all.
func (h *harness) noOp(c *fsmpb.Command) *fsmpb.Result {
	h.t.Helper()
	before := h.state()
	r := h.apply1(c)
	wantNoOp(h.t, r)
	h.wantUnchanged(before, "no-op")
	return r
}

// epochs lists the epoch numbers of a session's epoch.changed events, in
// journal order.
func (h *harness) epochs(id string) []uint64 {
	h.t.Helper()
	evs, _, err := h.f.Events(id, 1, 1<<30)
	if err != nil {
		h.t.Fatalf("Events(%q): %v", id, err)
	}
	var out []uint64
	for _, e := range evs {
		if e.Kind == KindEpochChanged {
			d := h.eventData(id, e.Seq)
			n, _ := d["epoch"].(json.Number).Int64()
			out = append(out, uint64(n))
		}
	}
	return out
}

// hexDigest is a well-formed digest that matches no journal.
var hexDigest = strings.Repeat("ab", 32)
