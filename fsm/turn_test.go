package fsm

import (
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// turnState is the interaction bookkeeping of a session, for comparisons.
type turnState struct {
	queued         []uint64
	turn, approval uint64
	completed      uint64
}

func (h *harness) turnState(id string) turnState {
	h.t.Helper()
	s := h.session(id)
	return turnState{slices.Clone(s.QueuedInputs), s.TurnInputSeq, s.PendingApprovalSeq, s.TurnsCompleted}
}

func (h *harness) wantTurnState(id string, want turnState) {
	h.t.Helper()
	got := h.turnState(id)
	if !slices.Equal(got.queued, want.queued) || got.turn != want.turn || got.approval != want.approval || got.completed != want.completed {
		h.t.Fatalf("turn state of %s = %+v, want %+v", id, got, want)
	}
}

func TestRunnerAppendErrorsAppendNothing(t *testing.T) {
	h := newHarness(t)
	interactive(t, h, "s1")
	interactive(t, h, "stopped")
	wantErr(t, h.apply(submitInput("stopped", "a1", 1, "hi"), stop("stopped", ""))[1], "")

	wantErrMsg(t, h.refused(runnerAppend("s1", 2, ev(KindOutput, "x")), ReasonStaleEpoch), ReasonStaleEpoch, "epoch 2", "current epoch is 1")
	wantErrMsg(t, h.refused(runnerAppend("s1", 1, ev(KindNote, "x")), ReasonInvalidArgument), ReasonInvalidArgument, `kind "note" is not written by runners`)
	wantErrMsg(t, h.refused(runnerAppend("s1", 1, ev(KindOutput, "x")), ReasonTurnOrder), ReasonTurnOrder, "output outside a turn")
	wantErrMsg(t, h.refused(runnerAppend("s1", 1, ev(KindTurnStarted, "")), ReasonTurnOrder), ReasonTurnOrder, "no queued input")

	tooMany := make([]*fsmpb.EventInput, MaxEventsPerAppend+1)
	for i := range tooMany {
		tooMany[i] = ev(KindOutput, "x")
	}
	h.refuseAll(t, []refusal{
		{"epoch zero", runnerAppend("s1", 0, ev(KindOutput, "x")), ReasonStaleEpoch},
		{"epoch ahead", runnerAppend("s1", 2, ev(KindTurnStarted, "")), ReasonStaleEpoch},
		{"client kind", runnerAppend("s1", 1, ev("checkpoint", "x")), ReasonInvalidArgument},
		{"input kind", runnerAppend("s1", 1, ev(KindInput, "x")), ReasonInvalidArgument},
		{"system kind", runnerAppend("s1", 1, ev(KindApprovalAnswered, "x")), ReasonInvalidArgument},
		{"unknown kind", runnerAppend("s1", 1, ev("bogus", "x")), ReasonInvalidArgument},
		{"empty kind", runnerAppend("s1", 1, ev("", "x")), ReasonInvalidArgument},
		{"no events", runnerAppend("s1", 1), ReasonInvalidArgument},
		{"too many events", runnerAppend("s1", 1, tooMany...), ReasonInvalidArgument},
		{"unknown session", runnerAppend("nope", 1, ev(KindOutput, "x")), ReasonNotFound},
		{"stopped session", runnerAppend("stopped", 1, ev(KindTurnStarted, "")), ReasonSessionStopped},
		{"output outside a turn", runnerAppend("s1", 1, ev(KindOutput, "x")), ReasonTurnOrder},
		{"tool.call outside a turn", runnerAppend("s1", 1, ev(KindToolCall, "x")), ReasonTurnOrder},
		{"tool.result outside a turn", runnerAppend("s1", 1, ev(KindToolResult, "x")), ReasonTurnOrder},
		{"approval outside a turn", runnerAppend("s1", 1, ev(KindApprovalRequested, "x")), ReasonTurnOrder},
		{"turn.completed outside a turn", runnerAppend("s1", 1, ev(KindTurnCompleted, "")), ReasonTurnOrder},
		{"turn.started without input", runnerAppend("s1", 1, ev(KindTurnStarted, "")), ReasonTurnOrder},
	})
}

func TestFullTurn(t *testing.T) {
	h := newHarness(t)
	interactive(t, h, "s1")
	wantErr(t, h.apply1(submitInput("s1", "a1", 1, "clean the build")), "") // 6
	h.wantTurnState("s1", turnState{queued: []uint64{6}})

	// The runner starts a turn on the oldest queued input.
	if r := h.apply1(runnerAppend("s1", 1, ev(KindTurnStarted, ""))); !proto.Equal(r, appendResult("s1", 7, 7)) {
		t.Fatalf("turn.started result %v", r)
	}
	h.wantTurnState("s1", turnState{turn: 6})
	h.refused(runnerAppend("s1", 1, ev(KindTurnStarted, "")), ReasonTurnOrder) // one turn at a time

	// Output streams in chunks; events keep the runner's data.
	c := req("run-1", runnerAppend("s1", 1, ev(KindOutput, "clean"), &fsmpb.EventInput{Kind: KindOutput, Text: "ing", Data: []byte{7}}))
	if r := h.apply1(c); !proto.Equal(r, appendResult("s1", 8, 9)) {
		t.Fatalf("output result %v", r)
	}
	if e := h.event("s1", 9); e.Data[0] != 7 || e.RequestId != "run-1" {
		t.Fatalf("output event %v", e)
	}

	// A tool call that needs approval.
	wantErr(t, h.apply1(runnerAppend("s1", 1, ev(KindToolCall, "rm -rf build"), ev(KindApprovalRequested, "may I?"))), "")
	h.wantTurnState("s1", turnState{turn: 6, approval: 11})
	if ap := h.session("s1").Approval; !proto.Equal(ap, &fsmpb.Approval{ApprovalSeq: 11}) {
		t.Fatalf("approval before the answer: %v", ap)
	}
	wantErrMsg(t, h.refused(runnerAppend("s1", 1, ev(KindToolResult, "deleted")), ReasonTurnOrder),
		ReasonTurnOrder, "before approval 11 was answered")
	h.refused(runnerAppend("s1", 1, ev(KindApprovalRequested, "and this?")), ReasonTurnOrder)
	h.refused(answerApproval("s1", "a2", 10, true, ""), ReasonNoPendingApproval)
	h.refused(answerApproval("s1", "ghost", 11, true, ""), ReasonAttachmentNotFound)

	// The phone answers: an attachment is enough, the lease is a1's.
	wantErr(t, h.apply1(at(t0+5*sec, answerApproval("s1", "a2", 11, true, "go ahead"))), "") // 12
	wantAp := &fsmpb.Approval{ApprovalSeq: 11, Answered: true, Approved: true, AttachmentId: "a2", Note: "go ahead"}
	if ap := h.session("s1").Approval; !proto.Equal(ap, wantAp) {
		t.Fatalf("approval %v, want %v", ap, wantAp)
	}
	if got, want := string(h.event("s1", 12).Data), `{"approval_seq":11,"approved":true,"attachment_id":"a2","client_kind":"browser","client_name":"phone","note":"go ahead"}`; got != want {
		t.Fatalf("approval.answered data %s, want %s", got, want)
	}
	h.wantTurnState("s1", turnState{turn: 6, approval: 11}) // pending until the tool result

	// A second answer, even a different one, changes nothing.
	before := h.state()
	wantNoOp(t, h.apply1(answerApproval("s1", "a1", 11, false, "no wait")))
	if h.state() != before {
		t.Fatal("a second answer changed the state")
	}

	wantErr(t, h.apply1(runnerAppend("s1", 1, ev(KindToolResult, "deleted"))), "") // 13
	h.wantTurnState("s1", turnState{turn: 6})
	wantErr(t, h.apply1(runnerAppend("s1", 1, ev(KindOutput, "done"), ev(KindTurnCompleted, ""))), "")
	h.wantTurnState("s1", turnState{completed: 1})
	h.refused(runnerAppend("s1", 1, ev(KindOutput, "late")), ReasonTurnOrder)
	// The answered approval stays answered after its turn.
	before = h.state()
	wantNoOp(t, h.apply1(answerApproval("s1", "a2", 11, false, "")))
	if h.state() != before {
		t.Fatal("answering a finished turn's approval changed the state")
	}

	h.wantJournal("s1", withJournal("s1",
		"3 attachment.joined terminal tty-a1",
		"4 attachment.joined browser phone",
		"5 lease.taken lease taken by terminal tty-a1",
		"6 input clean the build",
		"7 turn.started ",
		"8 output clean",
		"9 output ing",
		"10 tool.call rm -rf build",
		"11 approval.requested may I?",
		"12 approval.answered approved by browser phone",
		"13 tool.result deleted",
		"14 output done",
		"15 turn.completed ",
	)...)
}

func TestQueuedInputsRunInOrder(t *testing.T) {
	h := newHarness(t)
	interactive(t, h, "s1")
	wantErr(t, h.apply1(submitInput("s1", "a1", 1, "first")), "") // 6
	wantErr(t, h.apply1(runnerAppend("s1", 1, ev(KindTurnStarted, ""))), "")
	// Two inputs arrive while the first turn runs.
	rs := h.apply(submitInput("s1", "a1", 1, "second"), submitInput("s1", "a1", 1, "third")) // 8, 9
	wantErr(t, rs[0], "")
	wantErr(t, rs[1], "")
	h.wantTurnState("s1", turnState{queued: []uint64{8, 9}, turn: 6})

	wantErr(t, h.apply1(runnerAppend("s1", 1, ev(KindOutput, "1"), ev(KindTurnCompleted, ""))), "")
	h.wantTurnState("s1", turnState{queued: []uint64{8, 9}, completed: 1})
	wantErr(t, h.apply1(runnerAppend("s1", 1, ev(KindTurnStarted, ""))), "")
	h.wantTurnState("s1", turnState{queued: []uint64{9}, turn: 8, completed: 1})
	// Several turns may go by in one command.
	wantErr(t, h.apply1(runnerAppend("s1", 1,
		ev(KindOutput, "2"), ev(KindTurnCompleted, ""),
		ev(KindTurnStarted, ""), ev(KindOutput, "3"), ev(KindTurnCompleted, ""),
	)), "")
	h.wantTurnState("s1", turnState{completed: 3})
	h.refused(runnerAppend("s1", 1, ev(KindTurnStarted, "")), ReasonTurnOrder)

	var outputs []string
	for _, line := range h.journal("s1") {
		if f := strings.Fields(line); f[1] == KindInput || f[1] == KindOutput || f[1] == KindTurnStarted {
			outputs = append(outputs, strings.Join(f[1:], " "))
		}
	}
	want := []string{"input first", "turn.started", "input second", "input third", "output 1",
		"turn.started", "output 2", "turn.started", "output 3"}
	if !slices.Equal(outputs, want) {
		t.Fatalf("journal order %q, want %q", outputs, want)
	}
}

func TestRunnerAppendIsAllOrNothing(t *testing.T) {
	// The whole command is checked before anything is written: a bad event
	// in the middle leaves no trace of the good ones before it, not even in
	// the turn bookkeeping they would have changed.
	h := newHarness(t)
	interactive(t, h, "s1")
	wantErr(t, h.apply1(submitInput("s1", "a1", 1, "go")), "") // 6
	h.refuseAll(t, []refusal{
		{"second turn.started", runnerAppend("s1", 1, ev(KindTurnStarted, ""), ev(KindOutput, "x"), ev(KindTurnStarted, "")), ReasonTurnOrder},
		{"output after turn.completed", runnerAppend("s1", 1, ev(KindTurnStarted, ""), ev(KindTurnCompleted, ""), ev(KindOutput, "x")), ReasonTurnOrder},
		{"tool.result before the answer", runnerAppend("s1", 1, ev(KindTurnStarted, ""), ev(KindToolCall, "x"), ev(KindApprovalRequested, "?"), ev(KindToolResult, "x")), ReasonTurnOrder},
		{"non-runner kind last", runnerAppend("s1", 1, ev(KindTurnStarted, ""), ev(KindOutput, "x"), ev(KindNote, "x")), ReasonInvalidArgument},
	})
	h.wantTurnState("s1", turnState{queued: []uint64{6}})

	// In one entry beside a good command, the bad one still writes nothing.
	rs := h.apply(
		runnerAppend("s1", 1, ev(KindTurnStarted, ""), ev(KindOutput, "x"), ev(KindTurnStarted, "")),
		runnerAppend("s1", 1, ev(KindTurnStarted, ""), ev(KindOutput, "ok")),
	)
	wantErr(t, rs[0], ReasonTurnOrder)
	if !proto.Equal(rs[1], appendResult("s1", 7, 8)) {
		t.Fatalf("good command after a bad one: %v", rs[1])
	}
	h.wantTurnState("s1", turnState{turn: 6})
}

func TestAnswerApprovalErrors(t *testing.T) {
	h := newHarness(t)
	interactive(t, h, "s1")
	h.refused(answerApproval("s1", "a2", 0, true, ""), ReasonNoPendingApproval) // nothing pending
	wantErr(t, h.apply1(submitInput("s1", "a1", 1, "go")), "")                  // 6
	wantErr(t, h.apply1(runnerAppend("s1", 1, ev(KindTurnStarted, ""), ev(KindToolCall, "x"), ev(KindApprovalRequested, "?"))), "")
	h.wantTurnState("s1", turnState{turn: 6, approval: 9})

	interactive(t, h, "stopped")
	wantErr(t, h.apply1(submitInput("stopped", "a1", 1, "go")), "")
	wantErr(t, h.apply1(runnerAppend("stopped", 1, ev(KindTurnStarted, ""), ev(KindApprovalRequested, "?"))), "") // 8
	wantErr(t, h.apply1(stop("stopped", "")), "")

	h.refuseAll(t, []refusal{
		{"wrong seq", answerApproval("s1", "a2", 8, true, ""), ReasonNoPendingApproval},
		{"seq zero", answerApproval("s1", "a2", 0, true, ""), ReasonNoPendingApproval},
		{"unknown attachment", answerApproval("s1", "ghost", 9, true, ""), ReasonAttachmentNotFound},
		{"empty attachment id", answerApproval("s1", "", 9, true, ""), ReasonInvalidArgument},
		{"note too long", answerApproval("s1", "a2", 9, true, strings.Repeat("n", MaxReasonBytes+1)), ReasonInvalidArgument},
		{"unknown session", answerApproval("nope", "a2", 9, true, ""), ReasonNotFound},
		{"stopped session", answerApproval("stopped", "a2", 8, true, ""), ReasonSessionStopped},
	})

	// A denial is an answer too: the tool result may follow.
	wantErr(t, h.apply1(answerApproval("s1", "a1", 9, false, "")), "")
	if j := h.journal("s1"); j[len(j)-1] != "10 approval.answered denied by terminal tty-a1" {
		t.Fatalf("last event %q", j[len(j)-1])
	}
	wantErr(t, h.apply1(runnerAppend("s1", 1, ev(KindToolResult, "skipped"))), "")
	h.wantTurnState("s1", turnState{turn: 6})
}

func TestApprovalAbandonedWithItsTurn(t *testing.T) {
	// A turn that completes with its approval unanswered clears it; the
	// late answer finds nothing pending, and the next turn may ask again.
	h := newHarness(t)
	interactive(t, h, "s1")
	h.apply(submitInput("s1", "a1", 1, "one"), submitInput("s1", "a1", 1, "two")) // 6, 7
	wantErr(t, h.apply1(runnerAppend("s1", 1, ev(KindTurnStarted, ""), ev(KindApprovalRequested, "?"), ev(KindTurnCompleted, "gave up"))), "")
	h.wantTurnState("s1", turnState{queued: []uint64{7}, completed: 1})
	h.refused(answerApproval("s1", "a2", 9, true, ""), ReasonNoPendingApproval)

	wantErr(t, h.apply1(runnerAppend("s1", 1, ev(KindTurnStarted, ""), ev(KindApprovalRequested, "again?"))), "") // 11, 12
	h.wantTurnState("s1", turnState{turn: 7, approval: 12, completed: 1})
	wantErr(t, h.apply1(answerApproval("s1", "a2", 12, true, "")), "")
}
