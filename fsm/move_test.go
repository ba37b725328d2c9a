package fsm

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// The move state machine (DESIGN.md §8), driven through Apply: every
// legal arrow with its event and Session.Move fields, every illegal one
// refused with a typed error and no change at all, and the epoch fence.

// wantSession fails unless r is a successful, non-no-op session result equal
// to want, and the stored session equals want too.
func (h *harness) wantSession(r *fsmpb.Result, want *fsmpb.Session) {
	h.t.Helper()
	wantErr(h.t, r, "")
	if r.NoOp || !proto.Equal(r.GetSession(), want) {
		h.t.Fatalf("result %v\nwant session %v", r, want)
	}
	if s := h.session(want.SessionId); !proto.Equal(s, want) {
		h.t.Fatalf("stored session %v\nwant %v", s, want)
	}
}

// wantEvent fails unless event seq of id has the kind, text, data and time
// given.
func (h *harness) wantEvent(id string, seq uint64, kind, text, data string, tm int64) {
	h.t.Helper()
	e := h.event(id, seq)
	if e.Kind != kind || e.Text != text || string(e.Data) != data || e.TimeUnixNano != tm {
		h.t.Fatalf("event %s #%d = (%s, %q, %s, %d)\nwant (%s, %q, %s, %d)", id, seq, e.Kind, e.Text, e.Data, e.TimeUnixNano, kind, text, data, tm)
	}
}

const destPlacementJSON = `{"runtime_adapter":"echo","provider":"anthropic","model":"opus","node":"n2"}`

func TestMoveLegalTransitions(t *testing.T) {
	h := newHarness(t)
	mover(t, h, "s1")
	want := h.session("s1")
	lines := h.journal("s1")
	base := h.clock
	t1, t2, t3, t4, t5 := base+sec, base+2*sec, base+3*sec, base+4*sec, base+5*sec

	// RUNNING → SAFE_POINT_REQUESTED.
	c := moveTo("s1", "m1", "n2")
	c.GetRequestMove().SafePointTimeoutNanos = 30 * sec
	r := h.apply1(at(t1, c))
	want.HeadSeq, want.UpdatedUnixNano = 10, t1
	want.Move = &fsmpb.Move{
		MoveId: "m1", State: MoveSafePointRequested, Cause: MoveCauseOperator, Target: &fsmpb.Placement{Node: "n2"},
		SourceNode: "n1", SourceEpoch: 1, RequestedUnixNano: t1, StateUnixNano: t1, SafePointTimeoutNanos: 30 * sec,
	}
	h.wantSession(r, want)
	h.wantEvent("s1", 10, KindMoveRequested, "move requested: n1 → n2",
		`{"move_id":"m1","state":"SAFE_POINT_REQUESTED","cause":"operator","from":"n1","to":"n2","source_epoch":1}`, t1)
	if !MoveOpen(want.Move) {
		t.Fatal("a requested move is not open")
	}

	// → CHECKPOINTED at the head, with the digest of the journal up to it.
	d := h.digest("s1", 10)
	r = h.apply1(at(t2, moveCheckpoint("s1", "m1", 1, 10, d)))
	want.HeadSeq, want.UpdatedUnixNano = 11, t2
	want.Move.State, want.Move.StateUnixNano, want.Move.CheckpointSeq, want.Move.Digest = MoveCheckpointed, t2, 10, d
	h.wantSession(r, want)
	h.wantEvent("s1", 11, KindMoveCheckpointed, "checkpointed at #10",
		fmt.Sprintf(`{"move_id":"m1","state":"CHECKPOINTED","source_epoch":1,"checkpoint_seq":10,"digest":"%s","elapsed_nanos":%d}`, d, t2-t1), t2)

	// Input keeps arriving during the move, for the source epoch.
	wantErr(t, h.apply1(at(t2, submitInput("s1", "a1", 1, "during checkpoint"))), "")
	want.HeadSeq, want.QueuedInputs = 12, []uint64{9, 12}

	// → DESTINATION_ADMITTED.
	r = h.apply1(at(t3, moveAdmit("s1", "m1", destPlacement(), admitChecks, nil)))
	want.HeadSeq, want.UpdatedUnixNano = 13, t3
	want.Move.State, want.Move.StateUnixNano, want.Move.Admitted, want.Move.Checks = MoveAdmitted, t3, destPlacement(), admitChecks
	h.wantSession(r, want)
	h.wantEvent("s1", 13, KindMoveAdmitted, "destination n2 admitted",
		fmt.Sprintf(`{"move_id":"m1","state":"DESTINATION_ADMITTED","to":"n2","placement":%s,"checks":["alive","not draining","capacity","adapter","account ref"],"elapsed_nanos":%d}`,
			destPlacementJSON, t3-t1), t3)
	wantErr(t, h.apply1(at(t3, submitInput("s1", "a1", 1, "during admission"))), "")
	want.HeadSeq, want.QueuedInputs = 14, []uint64{9, 12, 14}

	// → RESTORED. The destination's digest of its replica up to the
	// checkpoint is the source's, although the journal grew since.
	if d2 := h.digest("s1", 10); d2 != d {
		t.Fatalf("digest up to the checkpoint changed from %s to %s", d, d2)
	}
	r = h.apply1(at(t4, moveRestore("s1", "m1", 2, d)))
	want.HeadSeq, want.UpdatedUnixNano = 15, t4
	want.Move.State, want.Move.StateUnixNano, want.Move.NewEpoch = MoveRestored, t4, 2
	want.Move.CacheLineage = &fsmpb.CacheLineage{Cache: CacheWarm, Why: "same provider, model, account and thread: the provider's cache can still be warm"}
	want.MaxEpoch = 2
	h.wantSession(r, want)
	h.wantEvent("s1", 15, KindMoveRestored, "restored on n2 as epoch 2; cache can be warm",
		fmt.Sprintf(`{"move_id":"m1","state":"RESTORED","to":"n2","digest":"%s","new_epoch":2,"elapsed_nanos":%d,"cache":{"cache":"warm","why":"same provider, model, account and thread: the provider's cache can still be warm"}}`, d, t4-t1), t4)

	// Until the cutover the source epoch is the current one.
	h.refused(submitInput("s1", "a1", 2, "too early"), ReasonStaleEpoch)
	h.refused(runnerAppend("s1", 2, ev(KindTurnStarted, "")), ReasonStaleEpoch)
	wantErr(t, h.apply1(at(t4, submitInput("s1", "a1", 1, "during restore"))), "")
	want.HeadSeq, want.QueuedInputs = 16, []uint64{9, 12, 14, 16}

	// → CUTOVER_COMMITTED: the epoch and the placement switch, and
	// epoch.changed (reason move) comes before move.cutover.
	r = h.apply1(at(t5, moveCutover("s1", "m1")))
	want.Epoch, want.Placement, want.Provider, want.MovesCompleted = 2, destPlacement(), "anthropic", 1
	want.HeadSeq, want.UpdatedUnixNano = 18, t5
	want.Move.State, want.Move.StateUnixNano = MoveCutoverCommitted, t5
	h.wantSession(r, want)
	h.wantEvent("s1", 17, KindEpochChanged, "epoch 2: echo opus on n2 (move)",
		`{"epoch":2,"placement":`+destPlacementJSON+`,"reason":"move"}`, t5)
	h.wantEvent("s1", 18, KindMoveCutover, "cutover: n1 → n2",
		fmt.Sprintf(`{"move_id":"m1","state":"CUTOVER_COMMITTED","cause":"operator","from":"n1","to":"n2","new_epoch":2,"elapsed_nanos":%d}`, t5-t1), t5)
	if MoveOpen(want.Move) {
		t.Fatal("a committed move is still open")
	}
	h.wantJournal("s1", append(lines,
		"10 move.requested move requested: n1 → n2",
		"11 move.checkpointed checkpointed at #10",
		"12 input during checkpoint",
		"13 move.admitted destination n2 admitted",
		"14 input during admission",
		"15 move.restored restored on n2 as epoch 2; cache can be warm",
		"16 input during restore",
		"17 epoch.changed epoch 2: echo opus on n2 (move)",
		"18 move.cutover cutover: n1 → n2",
	)...)
	if got := h.epochs("s1"); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("epochs %v, want [1 2]", got)
	}
}

func TestMoveRequestTargets(t *testing.T) {
	h := newHarness(t)
	mover(t, h, "any")
	mover(t, h, "model")
	mover(t, h, "drain")

	// No node: the controller picks one.
	r := h.apply1(requestMove("any", "m1", nil, MoveCauseOperator))
	wantErr(t, r, "")
	if m := r.GetSession().Move; !proto.Equal(m.Target, &fsmpb.Placement{}) || m.SourceNode != "n1" || m.State != MoveSafePointRequested {
		t.Fatalf("move %v", m)
	}
	h.wantEvent("any", 10, KindMoveRequested, "move requested: n1 → any admitted node",
		`{"move_id":"m1","state":"SAFE_POINT_REQUESTED","cause":"operator","from":"n1","source_epoch":1}`, h.clock)

	// The same node with another model is a move (a new epoch), with the
	// degradation accepted up front.
	c := requestMove("model", "m1", &fsmpb.Placement{Node: "n1", Model: "haiku"}, MoveCauseOperator)
	c.GetRequestMove().AcceptDegradation = true
	r = h.apply1(c)
	wantErr(t, r, "")
	if m := r.GetSession().Move; !m.AcceptDegradation || m.Target.Model != "haiku" {
		t.Fatalf("move %v", m)
	}

	// A drain is a move with its own cause.
	r = h.apply1(requestMove("drain", "m1", nil, MoveCauseDrain))
	wantErr(t, r, "")
	if m := r.GetSession().Move; m.Cause != MoveCauseDrain {
		t.Fatalf("move %v", m)
	}
	if d := h.eventData("drain", 10); d["cause"] != "drain" {
		t.Fatalf("move.requested data %v", d)
	}
}

func TestMoveValidation(t *testing.T) {
	h := newHarness(t)
	mover(t, h, "s1")
	mover(t, h, "stopped")
	wantErr(t, h.apply1(stop("stopped", "DONE")), "")
	long := strings.Repeat("x", MaxPlacementFieldBytes+1)
	withTimeout := func(ns int64) *fsmpb.Command {
		c := moveTo("s1", "m1", "n2")
		c.GetRequestMove().SafePointTimeoutNanos = ns
		return c
	}
	h.refuseAll(t, []refusal{
		{"empty move id", moveTo("s1", "", "n2"), ReasonInvalidArgument},
		{"move id too long", moveTo("s1", strings.Repeat("m", MaxSessionIDBytes+1), "n2"), ReasonInvalidArgument},
		{"no cause", requestMove("s1", "m1", &fsmpb.Placement{Node: "n2"}, ""), ReasonInvalidArgument},
		{"unknown cause", requestMove("s1", "m1", &fsmpb.Placement{Node: "n2"}, "whim"), ReasonInvalidArgument},
		{"target node too long", moveTo("s1", "m1", long), ReasonInvalidArgument},
		{"target model too long", requestMove("s1", "m1", &fsmpb.Placement{Model: long}, MoveCauseOperator), ReasonInvalidArgument},
		{"negative safe-point timeout", withTimeout(-1), ReasonInvalidArgument},
		{"safe-point timeout too long", withTimeout(MaxTTL + 1), ReasonInvalidArgument},
		{"unknown session", moveTo("nope", "m1", "n2"), ReasonNotFound},
		{"no session id", moveTo("", "m1", "n2"), ReasonInvalidArgument},
		{"stopped session", moveTo("stopped", "m1", "n2"), ReasonSessionStopped},
		{"already there", moveTo("s1", "m1", "n1"), ReasonInvalidArgument},
		{"already there, same model", requestMove("s1", "m1", &fsmpb.Placement{Node: "n1", Model: "opus", RuntimeAdapter: "echo"}, MoveCauseDrain), ReasonInvalidArgument},
		{"fail with a reason too long", moveFail("s1", "m1", strings.Repeat("r", MaxReasonBytes+1), false), ReasonInvalidArgument},
		{"transition of an unknown session", moveCutover("nope", "m1"), ReasonNotFound},
		{"fail of an unknown session", moveFail("nope", "m1", "x", false), ReasonNotFound},
	})
	wantErr(t, h.apply1(withTimeout(MaxTTL)), "")

	// Checkpoint arguments, in the safe-point state.
	s := h.session("s1")
	d := h.digest("s1", s.HeadSeq)
	wantErrMsg(t, h.refused(moveCheckpoint("s1", "m1", 2, s.HeadSeq, d), ReasonStaleEpoch), ReasonStaleEpoch, "epoch 2", "current epoch is 1")
	h.refuseAll(t, []refusal{
		{"checkpoint of epoch 0", moveCheckpoint("s1", "m1", 0, s.HeadSeq, d), ReasonStaleEpoch},
		{"checkpoint at 0", moveCheckpoint("s1", "m1", 1, 0, d), ReasonInvalidArgument},
		{"checkpoint past the head", moveCheckpoint("s1", "m1", 1, s.HeadSeq+1, d), ReasonInvalidArgument},
		{"checkpoint without a digest", moveCheckpoint("s1", "m1", 1, s.HeadSeq, ""), ReasonInvalidArgument},
		{"checkpoint with a short digest", moveCheckpoint("s1", "m1", 1, s.HeadSeq, d[:63]), ReasonInvalidArgument},
		{"checkpoint with a long digest", moveCheckpoint("s1", "m1", 1, s.HeadSeq, d+"0"), ReasonInvalidArgument},
		{"stale epoch beats a bad address", moveCheckpoint("s1", "m1", 2, 0, ""), ReasonStaleEpoch},
	})
	// An earlier address than the head is a valid checkpoint.
	wantErr(t, h.apply1(moveCheckpoint("s1", "m1", 1, 9, h.digest("s1", 9))), "")

	// Admission arguments.
	noNode, noAdapter, longModel := destPlacement(), destPlacement(), destPlacement()
	noNode.Node, noAdapter.RuntimeAdapter, longModel.Model = "", "", long
	h.refuseAll(t, []refusal{
		{"no placement", moveAdmit("s1", "m1", nil, admitChecks, nil), ReasonInvalidArgument},
		{"placement without node", moveAdmit("s1", "m1", noNode, admitChecks, nil), ReasonInvalidArgument},
		{"placement without adapter", moveAdmit("s1", "m1", noAdapter, admitChecks, nil), ReasonInvalidArgument},
		{"placement model too long", moveAdmit("s1", "m1", longModel, admitChecks, nil), ReasonInvalidArgument},
		{"degradation not accepted", moveAdmit("s1", "m1", destPlacement(), admitChecks, []string{"cold cache"}), ReasonInvalidArgument},
	})
	wantErrMsg(t, h.refused(moveAdmit("s1", "m1", destPlacement(), nil, []string{"smaller context"}), ReasonInvalidArgument),
		ReasonInvalidArgument, "smaller context", "not accepted")
	wantErr(t, h.apply1(moveAdmit("s1", "m1", destPlacement(), admitChecks, nil)), "")

	// Restore arguments.
	m := h.session("s1").Move
	h.refuseAll(t, []refusal{
		{"restore as the current epoch", moveRestore("s1", "m1", 1, m.Digest), ReasonStaleEpoch},
		{"restore as epoch 0", moveRestore("s1", "m1", 0, m.Digest), ReasonStaleEpoch},
		{"restore skipping an epoch", moveRestore("s1", "m1", 3, m.Digest), ReasonStaleEpoch},
		{"restore with another digest", moveRestore("s1", "m1", 2, hexDigest), ReasonDigestMismatch},
		{"restore without a digest", moveRestore("s1", "m1", 2, ""), ReasonDigestMismatch},
		{"stale epoch beats digest mismatch", moveRestore("s1", "m1", 3, hexDigest), ReasonStaleEpoch},
	})
	wantErr(t, h.apply1(moveRestore("s1", "m1", 2, m.Digest)), "")
}

func TestMoveIllegalTransitions(t *testing.T) {
	// From every state (none: the session never had a move), every
	// command but the one legal there is refused with MOVE_STATE, and so is
	// each command naming another move; nothing changes.
	for _, state := range append([]string{"none"}, moveStates...) {
		t.Run(state, func(t *testing.T) {
			h := newHarness(t)
			mover(t, h, "s1")
			if state != "none" {
				h.driveMove("s1", "m1", state)
			}
			s := h.session("s1")
			digest := s.Move.GetDigest()
			if digest == "" {
				digest = h.digest("s1", s.HeadSeq)
			}
			var cases []refusal
			for _, tt := range []struct {
				name, from string
				cmd        func(moveID string) *fsmpb.Command
			}{
				{"checkpoint", MoveSafePointRequested, func(id string) *fsmpb.Command {
					return moveCheckpoint("s1", id, s.Epoch, s.HeadSeq, h.digest("s1", s.HeadSeq))
				}},
				{"admit", MoveCheckpointed, func(id string) *fsmpb.Command { return moveAdmit("s1", id, destPlacement(), admitChecks, nil) }},
				{"restore", MoveAdmitted, func(id string) *fsmpb.Command { return moveRestore("s1", id, s.Epoch+1, digest) }},
				{"cutover", MoveRestored, func(id string) *fsmpb.Command { return moveCutover("s1", id) }},
			} {
				if state != tt.from {
					cases = append(cases, refusal{tt.name + " from " + state, tt.cmd("m1"), ReasonMoveState})
				}
				cases = append(cases, refusal{tt.name + " of another move", tt.cmd("m2"), ReasonMoveState},
					refusal{tt.name + " of no move", tt.cmd(""), ReasonMoveState})
			}
			cases = append(cases, refusal{"fail another move", moveFail("s1", "m2", "x", false), ReasonMoveState},
				refusal{"fail no move", moveFail("s1", "", "x", true), ReasonMoveState})
			open := MoveOpen(s.Move)
			switch {
			case open:
				cases = append(cases,
					refusal{"second move", moveTo("s1", "m2", "n3"), ReasonBusy},
					refusal{"second move by drain", requestMove("s1", "m2", nil, MoveCauseDrain), ReasonBusy},
					refusal{"second move by recovery", requestMove("s1", "m2", nil, MoveCauseRecovery), ReasonBusy})
			case state == "none":
				cases = append(cases, refusal{"fail before any move", moveFail("s1", "m1", "x", false), ReasonMoveState})
			}
			h.refuseAll(t, cases)
			if state == "none" {
				return
			}
			// The same move again, requested or failed after it ended, is a
			// no-op that changes nothing.
			h.noOp(moveTo("s1", "m1", "n3"))
			h.noOp(requestMove("s1", "m1", nil, MoveCauseRecovery))
			if !open {
				h.noOp(moveFail("s1", "m1", "late", false))
				h.noOp(moveFail("s1", "m1", "late", true))
			}
		})
	}
}

func TestMoveFailureLeavesSourceCurrent(t *testing.T) {
	// A failure in each open state, plain or unsafe: the source epoch and
	// placement stay current and keep serving; the restored epoch (if any)
	// never becomes current.
	for _, phase := range []string{MoveSafePointRequested, MoveCheckpointed, MoveAdmitted, MoveRestored} {
		for _, unsafe := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s unsafe=%v", phase, unsafe), func(t *testing.T) {
				h := newHarness(t)
				mover(t, h, "s1")
				want := h.driveMove("s1", "m1", phase)
				tf := h.clock + sec
				r := h.apply1(at(tf, moveFail("s1", "m1", "deadline", unsafe)))
				state, kind := MoveFailed, KindMoveFailed
				if unsafe {
					state, kind = MoveUnsafe, KindMoveUnsafe
				}
				want.HeadSeq++
				want.UpdatedUnixNano = tf
				want.Move.State, want.Move.StateUnixNano, want.Move.Reason, want.Move.Phase = state, tf, "deadline", phase
				h.wantSession(r, want)
				to := ""
				if want.Move.Admitted != nil {
					to = `"to":"n2",`
				}
				h.wantEvent("s1", want.HeadSeq, kind, state+" in "+phase+": deadline",
					fmt.Sprintf(`{"move_id":"m1","state":"%s","from":"n1",%s"reason":"deadline","phase":"%s","elapsed_nanos":%d}`,
						state, to, phase, tf-want.Move.RequestedUnixNano), tf)
				if MoveOpen(want.Move) || want.Epoch != 1 || !proto.Equal(want.Placement, sourcePlacement()) || want.MovesCompleted != 0 {
					t.Fatalf("after the failure: %v", want)
				}

				// The source epoch is current: its runner serves the queued
				// input, input for it is accepted, the restored epoch is fenced.
				h.refused(runnerAppend("s1", 2, ev(KindTurnStarted, "")), ReasonStaleEpoch)
				h.refused(submitInput("s1", "a1", 2, "to the destination"), ReasonStaleEpoch)
				wantErr(t, h.apply1(runnerAppend("s1", 1, ev(KindTurnStarted, ""), ev(KindOutput, "still here"))), "")
				wantErr(t, h.apply1(submitInput("s1", "a1", 1, "hello source")), "")
				if s := h.session("s1"); s.TurnInputSeq != 9 || len(s.QueuedInputs) != 1 || s.Epoch != 1 {
					t.Fatalf("after failure: turn %d queued %v epoch %d", s.TurnInputSeq, s.QueuedInputs, s.Epoch)
				}

				// Failing again is a no-op; a new move may start.
				h.noOp(moveFail("s1", "m1", "again", !unsafe))
				wantErr(t, h.apply1(runnerAppend("s1", 1, ev(KindTurnCompleted, ""))), "")
				s := h.driveMove("s1", "m2", MoveCutoverCommitted)
				if s.Epoch < 2 || s.Epoch != s.Move.NewEpoch || s.MovesCompleted != 1 || s.Move.SourceEpoch != 1 {
					t.Fatalf("second move: epoch %d moves %d move %v", s.Epoch, s.MovesCompleted, s.Move)
				}
			})
		}
	}
}

func TestMoveFencesTheOldEpoch(t *testing.T) {
	// Inputs queued before and during a move are served after the cutover
	// by the new epoch, in journal order, each once; the old epoch's
	// runner and clients that still target it are refused.
	h := newHarness(t)
	mover(t, h, "s1") // input 9 queued
	for i, state := range []string{MoveSafePointRequested, MoveCheckpointed, MoveAdmitted, MoveRestored} {
		h.driveMove("s1", "m1", state)
		wantErr(t, h.apply1(submitInput("s1", "a1", 1, fmt.Sprintf("during %d", i))), "")
	}
	queued := h.session("s1").QueuedInputs
	if len(queued) != 5 {
		t.Fatalf("queued %v before the cutover, want 5 inputs", queued)
	}
	s := h.driveMove("s1", "m1", MoveCutoverCommitted)
	if !slices.Equal(s.QueuedInputs, queued) || s.TurnInputSeq != 0 {
		t.Fatalf("after the cutover: queued %v turn %d, want %v and no turn", s.QueuedInputs, s.TurnInputSeq, queued)
	}

	h.refuseAll(t, []refusal{
		{"old runner starts a turn", runnerAppend("s1", 1, ev(KindTurnStarted, "")), ReasonStaleEpoch},
		{"old runner writes output", runnerAppend("s1", 1, ev(KindOutput, "late")), ReasonStaleEpoch},
		{"input for the old epoch", submitInput("s1", "a1", 1, "late"), ReasonStaleEpoch},
		{"input for a future epoch", submitInput("s1", "a1", 3, "early"), ReasonStaleEpoch},
		{"checkpoint of the old epoch", moveCheckpoint("s1", "m1", 1, s.HeadSeq, h.digest("s1", s.HeadSeq)), ReasonMoveState},
	})
	wantErr(t, h.apply1(submitInput("s1", "a1", 2, "after")), "")
	queued = h.session("s1").QueuedInputs

	var served []uint64
	for range queued {
		wantErr(t, h.apply1(runnerAppend("s1", 2, ev(KindTurnStarted, ""))), "")
		served = append(served, h.session("s1").TurnInputSeq)
		h.refused(runnerAppend("s1", 1, ev(KindTurnCompleted, "")), ReasonStaleEpoch)
		wantErr(t, h.apply1(runnerAppend("s1", 2, ev(KindOutput, "ok"), ev(KindTurnCompleted, ""))), "")
	}
	if !slices.Equal(served, queued) || !slices.IsSorted(served) {
		t.Fatalf("the new epoch served %v, want %v in journal order", served, queued)
	}
	if s := h.session("s1"); len(s.QueuedInputs) != 0 || s.TurnsCompleted != 1+uint64(len(queued)) {
		t.Fatalf("after serving: queued %v, %d turns", s.QueuedInputs, s.TurnsCompleted)
	}
	h.refused(runnerAppend("s1", 2, ev(KindTurnStarted, "")), ReasonTurnOrder)
}

func TestMoveAgain(t *testing.T) {
	// After a cutover the next move starts from the new placement and
	// epoch; a move back is fine.
	h := newHarness(t)
	mover(t, h, "s1")
	h.driveMove("s1", "m1", MoveCutoverCommitted)
	h.noOp(moveFail("s1", "m1", "late", false))

	wantErr(t, h.apply1(moveTo("s1", "m2", "n1")), "")
	s := h.session("s1")
	if m := s.Move; m.MoveId != "m2" || m.SourceNode != "n2" || m.SourceEpoch != 2 || m.CheckpointSeq != 0 || m.NewEpoch != 0 {
		t.Fatalf("second move %v", m)
	}
	if s.MovesCompleted != 1 {
		t.Fatalf("moves completed %d, want 1", s.MovesCompleted)
	}
	// The first move is over for good: its id no longer names the session's move.
	h.refused(moveFail("s1", "m1", "late", false), ReasonMoveState)
	s = h.driveMove("s1", "m2", MoveCutoverCommitted)
	if s.Epoch != 3 || s.MovesCompleted != 2 || !proto.Equal(s.Placement, sourcePlacement()) {
		t.Fatalf("after the second move: epoch %d, %d moves, placement %v", s.Epoch, s.MovesCompleted, s.Placement)
	}
	if got := h.epochs("s1"); !slices.Equal(got, []uint64{1, 2, 3}) {
		t.Fatalf("epochs %v, want [1 2 3]", got)
	}
	if n := h.countKind("s1", KindMoveCutover); n != 2 {
		t.Fatalf("%d cutovers, want 2", n)
	}
}

func TestMoveOnePerSession(t *testing.T) {
	// At most one move per session; other sessions move independently.
	h := newHarness(t)
	mover(t, h, "s1")
	mover(t, h, "s2")
	h.driveMove("s1", "m1", MoveCheckpointed)
	wantErrMsg(t, h.refused(moveTo("s1", "m2", "n3"), ReasonBusy), ReasonBusy, "move m1", "CHECKPOINTED")
	h.noOp(moveTo("s1", "m1", "n3")) // a retried request
	h.driveMove("s2", "m1", MoveAdmitted)
	h.driveMove("s1", "m1", MoveCutoverCommitted)
	h.driveMove("s2", "m1", MoveCutoverCommitted)
	for _, id := range []string{"s1", "s2"} {
		if s := h.session(id); s.Epoch != 2 || s.Placement.Node != "n2" || h.countKind(id, KindMoveRequested) != 1 {
			t.Fatalf("%s: epoch %d on %s", id, s.Epoch, s.Placement.Node)
		}
	}
}

func TestMoveCheckpointNeedsSafePoint(t *testing.T) {
	h := newHarness(t)
	for _, id := range []string{"operator", "drain", "recovery"} {
		mover(t, h, id)
		// The source runner starts a turn on input 9; the move is
		// requested while it runs.
		wantErr(t, h.apply1(runnerAppend(id, 1, ev(KindTurnStarted, ""))), "")
		wantErr(t, h.apply1(requestMove(id, "m1", &fsmpb.Placement{Node: "n2"}, id)), "")
	}
	for _, id := range []string{"operator", "drain"} {
		s := h.session(id)
		d := h.digest(id, s.HeadSeq)
		wantErrMsg(t, h.refused(moveCheckpoint(id, "m1", 1, s.HeadSeq, d), ReasonBusy), ReasonBusy, "turn is in flight (input #9)")
		// The epoch is checked first: a stale source is told so.
		h.refused(moveCheckpoint(id, "m1", 2, s.HeadSeq, d), ReasonStaleEpoch)
		// The turn finishes: the safe point.
		wantErr(t, h.apply1(runnerAppend(id, 1, ev(KindOutput, "done"), ev(KindTurnCompleted, ""))), "")
		s = h.session(id)
		wantErr(t, h.apply1(moveCheckpoint(id, "m1", 1, s.HeadSeq, h.digest(id, s.HeadSeq))), "")
		if m := h.session(id).Move; m.State != MoveCheckpointed || m.CheckpointSeq != s.HeadSeq {
			t.Fatalf("%s: move %v", id, m)
		}
	}

	// A recovery has no safe point to wait for: the source is gone. It
	// checkpoints at the last committed address, turn in flight or not,
	// and the cutover fences the lost runner.
	s := h.session("recovery")
	wantErr(t, h.apply1(moveCheckpoint("recovery", "m1", 1, s.HeadSeq, h.digest("recovery", s.HeadSeq))), "")
	s = h.driveMove("recovery", "m1", MoveCutoverCommitted)
	if s.Epoch != 2 || s.Move.Cause != MoveCauseRecovery {
		t.Fatalf("recovered: epoch %d move %v", s.Epoch, s.Move)
	}
	h.refused(runnerAppend("recovery", 1, ev(KindOutput, "from the dead")), ReasonStaleEpoch)
	if d := h.eventData("recovery", s.HeadSeq); d["cause"] != MoveCauseRecovery {
		t.Fatalf("move.cutover data %v", d)
	}
}

func TestMoveDigestMismatch(t *testing.T) {
	h := newHarness(t)
	mover(t, h, "s1")
	s := h.driveMove("s1", "m1", MoveAdmitted)
	m := s.Move
	if m.CheckpointSeq != 10 || m.Digest != h.digest("s1", 10) {
		t.Fatalf("checkpoint %d %s", m.CheckpointSeq, m.Digest)
	}
	// A destination whose replica differs before or after the checkpoint
	// address computes another digest.
	for _, tt := range []struct {
		name   string
		digest string
	}{
		{"replica behind the checkpoint", h.digest("s1", 9)},
		{"digest past the checkpoint", h.digest("s1", 11)},
		{"empty journal", h.digest("s1", 0)},
		{"another journal", hexDigest},
	} {
		r := h.refused(moveRestore("s1", "m1", 2, tt.digest), ReasonDigestMismatch)
		wantErrMsg(t, r, ReasonDigestMismatch, tt.digest, m.Digest)
	}
	// The controller fails the move; the source stays in charge.
	r := h.apply1(moveFail("s1", "m1", "digest mismatch", false))
	wantErr(t, r, "")
	s = r.GetSession()
	if s.Move.State != MoveFailed || s.Move.Phase != MoveAdmitted || s.Move.Reason != "digest mismatch" || s.Epoch != 1 || s.Placement.Node != "n1" {
		t.Fatalf("after the mismatch: %v", s)
	}
	h.refused(moveRestore("s1", "m1", 2, m.Digest), ReasonMoveState)
}

func TestMoveDegradation(t *testing.T) {
	// A model or provider change discloses its degradation at admission;
	// unless the move accepted degradation it is refused.
	h := newHarness(t)
	mover(t, h, "refused")
	mover(t, h, "accepted")
	target := &fsmpb.Placement{Node: "n2", Provider: "openai", Model: "gpt"}
	wantErr(t, h.apply1(requestMove("refused", "m1", target, MoveCauseOperator)), "")
	c := requestMove("accepted", "m1", target, MoveCauseOperator)
	c.GetRequestMove().AcceptDegradation = true
	wantErr(t, h.apply1(c), "")
	admitted := &fsmpb.Placement{RuntimeAdapter: "echo", Provider: "openai", AccountRef: "work", Model: "gpt", Node: "n2"}
	degradation := []string{"unsupported tools: web_search", "smaller context: 200000 → 128000", "cold cache"}
	for _, id := range []string{"refused", "accepted"} {
		h.driveMove(id, "m1", MoveCheckpointed)
	}
	wantErrMsg(t, h.refused(moveAdmit("refused", "m1", admitted, admitChecks, degradation), ReasonInvalidArgument),
		ReasonInvalidArgument, "cold cache", "not accepted")
	if m := h.session("refused").Move; m.State != MoveCheckpointed {
		t.Fatalf("refused admission moved the move to %s", m.State)
	}

	r := h.apply1(moveAdmit("accepted", "m1", admitted, admitChecks, degradation))
	wantErr(t, r, "")
	if m := r.GetSession().Move; !slices.Equal(m.Degradation, degradation) || !proto.Equal(m.Admitted, admitted) || !m.AcceptDegradation {
		t.Fatalf("admitted move %v", m)
	}
	d := h.eventData("accepted", h.session("accepted").HeadSeq)
	if got := fmt.Sprint(d["degradation"]); got != fmt.Sprint([]any{degradation[0], degradation[1], degradation[2]}) {
		t.Fatalf("move.admitted degradation %v", d["degradation"])
	}
	s := h.driveMove("accepted", "m1", MoveCutoverCommitted)
	if !proto.Equal(s.Placement, admitted) || s.Provider != "openai" || s.Epoch != 2 {
		t.Fatalf("after the cutover: placement %v provider %q epoch %d", s.Placement, s.Provider, s.Epoch)
	}
	if e := h.event("accepted", s.HeadSeq-1); e.Kind != KindEpochChanged || e.Text != "epoch 2: echo gpt on n2 (move)" {
		t.Fatalf("epoch.changed %v", e)
	}
}

func TestMoveOnStoppedSession(t *testing.T) {
	// A stopped session's journal ends at session.stopped: no transition
	// of a move left open by the stop may write after it.
	for _, phase := range []string{MoveSafePointRequested, MoveCheckpointed, MoveAdmitted, MoveRestored} {
		t.Run(phase, func(t *testing.T) {
			h := newHarness(t)
			mover(t, h, "s1")
			s := h.driveMove("s1", "m1", phase)
			wantErr(t, h.apply1(stop("s1", "DONE")), "")
			var c *fsmpb.Command
			switch phase {
			case MoveSafePointRequested:
				c = moveCheckpoint("s1", "m1", 1, s.HeadSeq, h.digest("s1", s.HeadSeq))
			case MoveCheckpointed:
				c = moveAdmit("s1", "m1", destPlacement(), admitChecks, nil)
			case MoveAdmitted:
				c = moveRestore("s1", "m1", 2, s.Move.Digest)
			case MoveRestored:
				c = moveCutover("s1", "m1")
			}
			before := h.state()
			r := h.apply1(c)
			if r.Error == nil {
				t.Fatalf("openMove: the next step of a move on a stopped session (from %s) succeeds and writes %v after session.stopped",
					phase, h.kinds("s1", s.HeadSeq+2))
			}
			// Refused as the stopped session it is, or as a move the stop
			// ended.
			if reason := ReasonOf(ResultError(r)); reason != ReasonSessionStopped && reason != ReasonMoveState {
				t.Fatalf("result %v, want SESSION_STOPPED or MOVE_STATE", r)
			}
			h.wantUnchanged(before, "a transition on a stopped session")
		})
	}
}

func TestMoveEpochChangesDuringMove(t *testing.T) {
	// A fresh (or a provider resume) bumps the epoch while a move is
	// open. The checkpoint must name the epoch current then, and the
	// cutover must still end on an epoch no runner has held before.
	t.Run("before the checkpoint", func(t *testing.T) {
		h := newHarness(t)
		mover(t, h, "s1")
		h.driveMove("s1", "m1", MoveSafePointRequested)
		wantErr(t, h.apply1(fresh("s1", "p-fresh")), "")
		s := h.session("s1")
		h.refused(moveCheckpoint("s1", "m1", 1, s.HeadSeq, h.digest("s1", s.HeadSeq)), ReasonStaleEpoch)
		s = h.driveMove("s1", "m1", MoveCutoverCommitted)
		if s.Epoch != 3 || s.Move.NewEpoch != 3 {
			t.Fatalf("after the cutover: epoch %d, move %v", s.Epoch, s.Move)
		}
		if got := h.epochs("s1"); !slices.Equal(got, []uint64{1, 2, 3}) {
			t.Fatalf("epochs %v, want [1 2 3]", got)
		}
		if d := h.eventData("s1", s.Move.CheckpointSeq+1); d["source_epoch"] != num(uint64(2)) {
			t.Fatalf("move.checkpointed data %v", d)
		}
		if s.Move.SourceEpoch != 2 {
			t.Fatalf("moveCheckpoint: Move.source_epoch stays %d (the epoch at the request) while the checkpoint, and its event, are of epoch 2",
				s.Move.SourceEpoch)
		}
	})
	t.Run("between restore and cutover", func(t *testing.T) {
		h := newHarness(t)
		mover(t, h, "s1")
		h.driveMove("s1", "m1", MoveRestored) // restored as epoch 2
		wantErr(t, h.apply1(fresh("s1", "p-fresh")), "")
		// The source runner now writes as the fresh epoch on n1.
		srcEpoch := h.session("s1").Epoch
		r := h.apply1(moveCutover("s1", "m1"))
		epochs := h.epochs("s1")
		for i := 1; i < len(epochs); i++ {
			if epochs[i] <= epochs[i-1] {
				t.Fatalf("moveCutover: the destination restored as epoch 2, then a fresh gave epoch 2 to the source; the cutover makes epoch 2 current again (epoch.changed epochs %v), so the source runner's writes as epoch 2 are not fenced",
					epochs)
			}
		}
		// Once fixed, either the cutover is refused (the source stays
		// current) or it ends on an epoch above the source's, which fences
		// the source runner.
		// (A runner's write is checked for its epoch first.)
		if r.Error == nil {
			h.refused(runnerAppend("s1", srcEpoch, ev(KindTurnStarted, "")), ReasonStaleEpoch)
		} else if reason := ReasonOf(ResultError(h.apply1(runnerAppend("s1", srcEpoch, ev(KindTurnStarted, ""))))); reason == ReasonStaleEpoch {
			t.Fatalf("the cutover was refused, yet the source epoch %d is fenced", srcEpoch)
		}
	})
	t.Run("after a failed restore", func(t *testing.T) {
		h := newHarness(t)
		mover(t, h, "s1")
		h.driveMove("s1", "m1", MoveRestored) // n2's runner restored as epoch 2
		wantErr(t, h.apply1(moveFail("s1", "m1", "destination partitioned", false)), "")
		wantErr(t, h.apply1(fresh("s1", "p-fresh")), "")
		if s := h.session("s1"); s.Epoch == 2 {
			t.Fatalf("moveRestore/moveFail: epoch 2, which the failed move's destination restored as, is handed to the source by the next epoch change; a stale n2 runner writing as epoch 2 is not fenced")
		}
	})
}

// refDigest is JournalDigest written out from its definition: for each
// event, seq as 8 bytes little endian, then kind, text and data, each
// preceded by its length as 8 bytes little endian; SHA-256, hex.
func refDigest(events []*fsmpb.Event) string {
	h := sha256.New()
	for _, e := range events {
		h.Write(binary.LittleEndian.AppendUint64(nil, e.Seq))
		for _, b := range [][]byte{[]byte(e.Kind), []byte(e.Text), e.Data} {
			h.Write(binary.LittleEndian.AppendUint64(nil, uint64(len(b))))
			h.Write(b)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

func TestJournalDigest(t *testing.T) {
	events := func() []*fsmpb.Event {
		return []*fsmpb.Event{
			{SessionId: "s1", Seq: 1, Kind: KindSessionCreated, Text: "title", TimeUnixNano: t0},
			{SessionId: "s1", Seq: 2, Kind: KindEpochChanged, Text: "epoch 1: echo", Data: []byte(`{"epoch":1}`), TimeUnixNano: t0},
			{SessionId: "s1", Seq: 3, Kind: KindInput, Text: "hello", Data: []byte(`{"epoch":1}`), TimeUnixNano: t0 + 1, RequestId: "r1"},
		}
	}
	base := JournalDigest(events())
	if len(base) != 64 || base != JournalDigest(events()) || base != refDigest(events()) {
		t.Fatalf("digest %q: not the 64-hex SHA-256 of its definition (%s), or not stable", base, refDigest(events()))
	}
	if empty := JournalDigest(nil); empty != hex.EncodeToString(sha256.New().Sum(nil)) || empty != JournalDigest([]*fsmpb.Event{}) {
		t.Fatalf("digest of no events %s", empty)
	}

	// Sensitive to every digested field and to the events' number and order.
	seen := map[string]string{base: "base"}
	for _, tt := range []struct {
		name string
		edit func(evs []*fsmpb.Event) []*fsmpb.Event
	}{
		{"seq", func(evs []*fsmpb.Event) []*fsmpb.Event { evs[2].Seq = 4; return evs }},
		{"kind", func(evs []*fsmpb.Event) []*fsmpb.Event { evs[2].Kind = KindNote; return evs }},
		{"text", func(evs []*fsmpb.Event) []*fsmpb.Event { evs[2].Text = "hellO"; return evs }},
		{"data", func(evs []*fsmpb.Event) []*fsmpb.Event { evs[2].Data = []byte(`{"epoch":2}`); return evs }},
		{"data added", func(evs []*fsmpb.Event) []*fsmpb.Event { evs[0].Data = []byte(`{}`); return evs }},
		{"text moved into kind", func(evs []*fsmpb.Event) []*fsmpb.Event {
			evs[2].Kind, evs[2].Text = KindInput+"h", "ello"
			return evs
		}},
		{"text moved into data", func(evs []*fsmpb.Event) []*fsmpb.Event {
			evs[2].Text, evs[2].Data = "hell", append([]byte("o"), evs[2].Data...)
			return evs
		}},
		{"one event fewer", func(evs []*fsmpb.Event) []*fsmpb.Event { return evs[:2] }},
		{"one event more", func(evs []*fsmpb.Event) []*fsmpb.Event {
			return append(evs, &fsmpb.Event{Seq: 4, Kind: KindNote})
		}},
		{"reordered", func(evs []*fsmpb.Event) []*fsmpb.Event { evs[1], evs[2] = evs[2], evs[1]; return evs }},
	} {
		evs := tt.edit(events())
		d := JournalDigest(evs)
		if other, dup := seen[d]; dup {
			t.Errorf("%s: digest equals that of %s", tt.name, other)
		}
		if d != refDigest(evs) {
			t.Errorf("%s: digest %s, by definition %s", tt.name, d, refDigest(evs))
		}
		seen[d] = tt.name
	}

	// Not digested: the fields a replica could differ in without its
	// journal differing, and those the address already fixes.
	evs := events()
	for _, e := range evs {
		e.SessionId, e.TimeUnixNano, e.RequestId = "other", 42, "r-other"
	}
	if d := JournalDigest(evs); d != base {
		t.Fatalf("digest depends on session id, time or request id: %s != %s", d, base)
	}
	evs = events()
	evs[1].Data = []byte{}
	evs2 := events()
	evs2[1].Data = nil
	if JournalDigest(evs) != JournalDigest(evs2) {
		t.Fatal("empty and nil data digest differently (proto does not distinguish them)")
	}

	// Two replicas of one log digest their journals alike.
	a, b := newHarness(t), newHarness(t)
	for _, h := range []*harness{a, b} {
		mover(t, h, "s1")
	}
	if da, db := a.digest("s1", 9), b.digest("s1", 9); da != db {
		t.Fatalf("replicas digest %s and %s", da, db)
	}
}
