package runner_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// The controller's steps, applied by hand: the runner under test takes
// only its own (checkpoint on the source, restore on the destination).

func (l *local) requestMove(id, moveID, to string) {
	l.t.Helper()
	l.must(&fsmpb.Command{Body: &fsmpb.Command_RequestMove{RequestMove: &fsmpb.RequestMove{
		SessionId: id, MoveId: moveID, Target: &fsmpb.Placement{Node: to}, Cause: fsm.MoveCauseOperator}}})
}

func (l *local) admit(id, moveID, to string) {
	l.t.Helper()
	l.must(&fsmpb.Command{Body: &fsmpb.Command_MoveAdmit{MoveAdmit: &fsmpb.MoveAdmit{
		SessionId: id, MoveId: moveID, Placement: &fsmpb.Placement{RuntimeAdapter: "echo", Node: to}}}})
}

func (l *local) inputAt(id string, epoch uint64, text string) uint64 {
	l.t.Helper()
	return l.must(&fsmpb.Command{Body: &fsmpb.Command_SubmitInput{SubmitInput: &fsmpb.SubmitInput{
		SessionId: id, AttachmentId: "term", ExpectedEpoch: epoch, Text: text}}}).GetAppend().FirstSeq
}

func moveState(state string) func(*fsmpb.Session) bool {
	return func(s *fsmpb.Session) bool { return s.Move.GetState() == state }
}

// The source checkpoints at once when idle, with the digest of its journal
// up to the head; it starts no turn while the move is open and resumes
// when the move fails.
func TestRunner_SourceCheckpointsAndHoldsTurnsWhileMoving(t *testing.T) {
	l := newLocal(t)
	id := l.session("s1", "n1", "echo")
	l.startRunner(0, nil)
	l.requestMove(id, "m1", "n2")
	s := l.waitSession(id, "the checkpoint", moveState(fsm.MoveCheckpointed))
	if s.Move.CheckpointSeq != setupHead+1 || s.Move.SourceEpoch != 1 {
		t.Fatalf("checkpoint at #%d of epoch %d, want #%d of epoch 1", s.Move.CheckpointSeq, s.Move.SourceEpoch, setupHead+1)
	}
	if want := fsm.JournalDigest(l.journal(id)[:setupHead+1]); s.Move.Digest != want {
		t.Fatalf("digest %s, want %s", s.Move.Digest, want)
	}

	in := l.inputAt(id, 1, "during the move")
	l.admit(id, "m1", "n2")
	// The input is journaled and waits: a failure leaves the source in
	// charge, and it serves the input then.
	if s, _ := l.f.Session(id); s.TurnInputSeq != 0 || len(s.QueuedInputs) != 1 {
		t.Fatalf("the source started a turn during the move (turn %d, queued %v)", s.TurnInputSeq, s.QueuedInputs)
	}
	l.must(&fsmpb.Command{Body: &fsmpb.Command_MoveFail{MoveFail: &fsmpb.MoveFail{SessionId: id, MoveId: "m1", Reason: "test"}}})
	l.waitSession(id, "the held input's turn", turnsDone(1))
	if got := transcript(l.journal(id), in); !strings.Contains(got, "turn.started:echo on n1\noutput:echo: during the move") {
		t.Fatalf("transcript after the failed move:\n%s", got)
	}
}

// A move requested during a turn waits for it: the checkpoint follows the
// turn's completion (and the charge of its output, the last write of the
// runner's pass).
func TestRunner_SafePointWaitsForTheTurnInFlight(t *testing.T) {
	l := newLocal(t)
	id := l.session("s1", "n1", "echo")
	l.startRunner(0, nil)
	l.input(id, "!tool ls")
	s := l.waitSession(id, "an approval request", func(s *fsmpb.Session) bool { return s.PendingApprovalSeq != 0 })
	l.requestMove(id, "m1", "n2")
	l.answer(id, s.PendingApprovalSeq, true)
	s = l.waitSession(id, "the checkpoint", moveState(fsm.MoveCheckpointed))
	evs := l.journal(id)[:s.Move.CheckpointSeq]
	last := evs[len(evs)-1]
	if last.Kind == fsm.KindBudgetCharged {
		last = evs[len(evs)-2]
	}
	if last.Kind != fsm.KindTurnCompleted || s.TurnsCompleted != 1 {
		t.Fatalf("checkpoint at #%d (%s), want right after the turn completed", s.Move.CheckpointSeq, transcript(evs, last.Seq-1))
	}
}

// The destination verifies the digest on its replica, restores as the
// next epoch and, after cutover, serves the inputs queued during the move.
func TestRunner_DestinationRestoresAndServesAfterCutover(t *testing.T) {
	l := newLocal(t)
	id := l.session("s1", "n0", "echo") // n0 has no runner here
	l.requestMove(id, "m1", "n1")
	s, _ := l.f.Session(id)
	digest, err := l.f.JournalDigest(id, s.HeadSeq)
	if err != nil {
		t.Fatal(err)
	}
	l.must(&fsmpb.Command{Body: &fsmpb.Command_MoveCheckpoint{MoveCheckpoint: &fsmpb.MoveCheckpoint{
		SessionId: id, MoveId: "m1", SourceEpoch: 1, CheckpointSeq: s.HeadSeq, Digest: digest}}})
	queued := l.inputAt(id, 1, "queued during the move")
	l.startRunner(0, nil)
	l.admit(id, "m1", "n1")
	s = l.waitSession(id, "the restore", moveState(fsm.MoveRestored))
	if s.Move.NewEpoch != 2 || s.Epoch != 1 || s.TurnInputSeq != 0 {
		t.Fatalf("restored as epoch %d (current %d, turn %d), want 2 with epoch 1 current and no turn", s.Move.NewEpoch, s.Epoch, s.TurnInputSeq)
	}
	l.must(&fsmpb.Command{Body: &fsmpb.Command_MoveCutover{MoveCutover: &fsmpb.MoveCutover{SessionId: id, MoveId: "m1"}}})
	l.waitSession(id, "the queued input's turn", turnsDone(1))
	l.inputAt(id, 2, "after")
	l.waitSession(id, "a turn after cutover", turnsDone(2))
	want := strings.Join([]string{
		"input:queued during the move", "move.admitted:destination n1 admitted", "move.restored:restored on n1 as epoch 2; no provider cache to keep",
		"epoch.changed:epoch 2: echo on n1 (move)", "move.cutover:cutover: n0 → n1",
		"turn.started:echo on n1", "output:echo: queued during the move", "turn.completed:turn 1 done",
		"move.warmed:warm-up: the first turn after the move took X ms; no provider cache to keep",
		"input:after", "turn.started:echo on n1", "output:echo: after", "turn.completed:turn 2 done",
	}, "\n")
	// The warm-up's time varies: only its place and words are checked.
	got := regexp.MustCompile(`took [0-9.]+ ms`).ReplaceAllString(transcript(l.journal(id), queued-1), "took X ms")
	if got != want {
		t.Fatalf("transcript:\n%s\nwant:\n%s", got, want)
	}
}

// A checkpoint whose digest the destination's replica does not reproduce
// fails the move (DIGEST_MISMATCH); the source epoch stays current.
func TestRunner_DigestMismatchFailsTheMove(t *testing.T) {
	l := newLocal(t)
	id := l.session("s1", "n0", "echo")
	l.requestMove(id, "m1", "n1")
	s, _ := l.f.Session(id)
	l.must(&fsmpb.Command{Body: &fsmpb.Command_MoveCheckpoint{MoveCheckpoint: &fsmpb.MoveCheckpoint{
		SessionId: id, MoveId: "m1", SourceEpoch: 1, CheckpointSeq: s.HeadSeq, Digest: strings.Repeat("ab", 32)}}})
	l.startRunner(0, nil)
	l.admit(id, "m1", "n1")
	s = l.waitSession(id, "the failed move", moveState(fsm.MoveFailed))
	if !strings.HasPrefix(s.Move.Reason, string(fsm.ReasonDigestMismatch)) || s.Move.Phase != fsm.MoveAdmitted || s.Epoch != 1 {
		t.Fatalf("move %s in %s: %q (epoch %d), want DIGEST_MISMATCH in %s with epoch 1",
			s.Move.State, s.Move.Phase, s.Move.Reason, s.Epoch, fsm.MoveAdmitted)
	}
}
