package fsm

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

func appendResult(id string, first, last uint64) *fsmpb.Result {
	return &fsmpb.Result{Body: &fsmpb.Result_Append{Append: &fsmpb.AppendResult{
		SessionId: id, FirstSeq: first, LastSeq: last,
	}}}
}

func TestAppendEventsSequencesWithoutGaps(t *testing.T) {
	h := newHarness(t)
	h.apply(create("a"), create("b"))

	steps := []struct {
		cmds []*fsmpb.Command // one log entry
		want []*fsmpb.Result
	}{
		{
			cmds: []*fsmpb.Command{appendEv("a", ev("note", "a3"), ev("checkpoint", "a4"))},
			want: []*fsmpb.Result{appendResult("a", 3, 4)},
		},
		{ // sessions interleaved inside one entry
			cmds: []*fsmpb.Command{
				appendEv("b", ev("note", "b3")),
				appendEv("a", ev("compaction", "a5")),
				appendEv("b", ev("note", "b4"), ev("checkpoint", "b5")),
				appendEv("a", ev("note", "a6")),
			},
			want: []*fsmpb.Result{
				appendResult("b", 3, 3),
				appendResult("a", 5, 5),
				appendResult("b", 4, 5),
				appendResult("a", 6, 6),
			},
		},
		{ // a failing command in the middle of an entry does not disturb the others
			cmds: []*fsmpb.Command{
				appendEv("a", ev("note", "a7")),
				appendEv("missing", ev("note", "x")),
				appendEv("b", ev("checkpoint", "b6")),
			},
			want: []*fsmpb.Result{
				appendResult("a", 7, 7),
				{Error: &fsmpb.Error{Reason: string(ReasonNotFound), Message: "session missing not found"}},
				appendResult("b", 6, 6),
			},
		},
	}
	for i, st := range steps {
		got := h.apply(st.cmds...)
		for j := range got {
			if !proto.Equal(got[j], st.want[j]) {
				t.Fatalf("step %d command %d: result %v, want %v", i, j, got[j], st.want[j])
			}
		}
	}

	h.wantJournal("a", withJournal("a",
		"3 note a3",
		"4 checkpoint a4",
		"5 compaction a5",
		"6 note a6",
		"7 note a7",
	)...)
	h.wantJournal("b", withJournal("b",
		"3 note b3",
		"4 note b4",
		"5 checkpoint b5",
		"6 checkpoint b6",
	)...)
	if s := h.session("a"); s.HeadSeq != 7 {
		t.Fatalf("a head = %d, want 7", s.HeadSeq)
	}
}

func TestAppendEventsStampsEvents(t *testing.T) {
	h := newHarness(t)
	h.apply1(create("s1"))
	c := at(t0+500, req("req-7", appendEv("s1", &fsmpb.EventInput{Kind: "note", Text: "t", Data: []byte{0, 1, 2}})))
	wantErr(t, h.apply1(c), "")

	evs, _, _ := h.f.Events("s1", 3, 1)
	want := &fsmpb.Event{SessionId: "s1", Seq: 3, Kind: "note", TimeUnixNano: t0 + 500, Text: "t", Data: []byte{0, 1, 2}, RequestId: "req-7"}
	if len(evs) != 1 || !proto.Equal(evs[0], want) {
		t.Fatalf("event = %v, want %v", evs, want)
	}
	if s := h.session("s1"); s.UpdatedUnixNano != t0+500 {
		t.Fatalf("updated = %d, want %d", s.UpdatedUnixNano, t0+500)
	}
}

func TestAppendEventsErrorsChangeNothing(t *testing.T) {
	tooMany := make([]*fsmpb.EventInput, MaxEventsPerAppend+1)
	for i := range tooMany {
		tooMany[i] = ev("note", "n")
	}
	tests := []struct {
		name string
		cmd  *fsmpb.Command
		want Reason
	}{
		{"unknown session", appendEv("nope", ev("note", "x")), ReasonNotFound},
		{"empty session id", appendEv("", ev("note", "x")), ReasonInvalidArgument},
		{"no events", appendEv("live"), ReasonInvalidArgument},
		{"unknown kind", appendEv("live", ev("note", "ok"), ev("bogus", "x")), ReasonInvalidArgument},
		{"empty kind", appendEv("live", ev("", "x")), ReasonInvalidArgument},
		{"overlong kind", appendEv("live", ev(strings.Repeat("k", MaxKindBytes+1), "x")), ReasonInvalidArgument},
		{"system kind created", appendEv("live", ev(KindSessionCreated, "x")), ReasonInvalidArgument},
		{"system kind stopped", appendEv("live", ev("note", "ok"), ev(KindSessionStopped, "x")), ReasonInvalidArgument},
		{"system kind input", appendEv("live", ev(KindInput, "x")), ReasonInvalidArgument},
		{"runner kind output", appendEv("live", ev("note", "ok"), ev(KindOutput, "x")), ReasonInvalidArgument},
		{"too many events", appendEv("live", tooMany...), ReasonInvalidArgument},
		{"stopped session", appendEv("stopped", ev("note", "x")), ReasonSessionStopped},
		{"stopped session, matching expected seq", appendIf("stopped", 3, ev("note", "x")), ReasonSessionStopped},
		{"expected seq behind", appendIf("live", 2, ev("note", "x")), ReasonSeqMismatch},
		{"expected seq ahead", appendIf("live", 4, ev("note", "x")), ReasonSeqMismatch},
		{"expected seq zero", appendIf("live", 0, ev("note", "x")), ReasonSeqMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.apply(create("live"), appendEv("live", ev("note", "first")))
			h.apply(create("stopped"), stop("stopped", ""))
			before := h.state()

			wantErr(t, h.apply1(tt.cmd), tt.want)

			if after := h.state(); after != before {
				t.Fatalf("failed append changed the state:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

func TestAppendEventsMaxEventsIsInclusive(t *testing.T) {
	h := newHarness(t)
	h.apply1(create("s1"))
	evs := make([]*fsmpb.EventInput, MaxEventsPerAppend)
	for i := range evs {
		evs[i] = ev("note", "n")
	}
	r := h.apply1(appendEv("s1", evs...))
	if !proto.Equal(r, appendResult("s1", 3, MaxEventsPerAppend+2)) {
		t.Fatalf("result = %v", r)
	}
}

func TestAppendEventsEveryClientKind(t *testing.T) {
	h := newHarness(t)
	h.apply1(create("s1"))
	for kind := range clientKinds {
		wantErr(t, h.apply1(appendEv("s1", ev(kind, ""))), "")
	}
	if s := h.session("s1"); s.HeadSeq != uint64(2+len(clientKinds)) {
		t.Fatalf("head = %d, want %d", s.HeadSeq, 2+len(clientKinds))
	}
}

func TestCompareAndAppend(t *testing.T) {
	h := newHarness(t)
	h.apply1(create("s1")) // head 2: session.created, epoch.changed

	// A script of appends against one journal: the expected head, the
	// outcome, and the head reported by a mismatch.
	script := []struct {
		cmd      *fsmpb.Command
		want     *fsmpb.Result
		wantHead uint64 // session head afterwards
	}{
		{appendIf("s1", 2, ev("note", "a")), appendResult("s1", 3, 3), 3},
		{appendIf("s1", 3, ev("note", "b"), ev("checkpoint", "c")), appendResult("s1", 4, 5), 5},
		{ // stale writer: still thinks the head is 3
			appendIf("s1", 3, ev("note", "lost")),
			&fsmpb.Result{Error: &fsmpb.Error{Reason: string(ReasonSeqMismatch), Message: "expected head 3, journal head is 5", HeadSeq: 5}},
			5,
		},
		{ // writer from the future
			appendIf("s1", 9, ev("note", "lost")),
			&fsmpb.Result{Error: &fsmpb.Error{Reason: string(ReasonSeqMismatch), Message: "expected head 9, journal head is 5", HeadSeq: 5}},
			5,
		},
		{appendEv("s1", ev("note", "unconditional")), appendResult("s1", 6, 6), 6},
		{appendIf("s1", 6, ev("note", "d")), appendResult("s1", 7, 7), 7},
	}
	for i, st := range script {
		got := h.apply1(st.cmd)
		if !proto.Equal(got, st.want) {
			t.Fatalf("step %d: result %v, want %v", i, got, st.want)
		}
		if e, ok := ResultError(got).(*Error); ok && e.HeadSeq != st.wantHead {
			t.Fatalf("step %d: Error.HeadSeq = %d, want %d", i, e.HeadSeq, st.wantHead)
		}
		if s := h.session("s1"); s.HeadSeq != st.wantHead {
			t.Fatalf("step %d: head %d, want %d", i, s.HeadSeq, st.wantHead)
		}
	}
	h.wantJournal("s1", withJournal("s1",
		"3 note a",
		"4 note b",
		"5 checkpoint c",
		"6 note unconditional",
		"7 note d",
	)...)
}

func TestCompareAndAppendWithinOneEntry(t *testing.T) {
	// Two writers race with the same expected head; the log orders them
	// and exactly the first wins, even inside one entry.
	h := newHarness(t)
	h.apply1(create("s1"))
	rs := h.apply(
		appendIf("s1", 2, ev("note", "winner")),
		appendIf("s1", 2, ev("note", "loser")),
	)
	wantErr(t, rs[0], "")
	wantErr(t, rs[1], ReasonSeqMismatch)
	if rs[1].Error.HeadSeq != 3 {
		t.Fatalf("loser sees head %d, want 3", rs[1].Error.HeadSeq)
	}
	h.wantJournal("s1", withJournal("s1", "3 note winner")...)
}

func TestAppendEventsRefusesKindsWithOtherWriters(t *testing.T) {
	// Each kind has one writer. A client append of a runner or system kind
	// is refused with INVALID_ARGUMENT and a message that says who writes
	// it, and nothing is appended.
	tests := []struct {
		kind string
		want string // part of the message
	}{
		{KindInput, "input is submitted with Act by the input lease holder"},
		{KindOutput, `kind "output" is written by the session's runner, fenced by its epoch`},
		{KindTurnStarted, `kind "turn.started" is written by the session's runner`},
		{KindTurnCompleted, `kind "turn.completed" is written by the session's runner`},
		{KindToolCall, `kind "tool.call" is written by the session's runner`},
		{KindToolResult, `kind "tool.result" is written by the session's runner`},
		{KindApprovalRequested, `kind "approval.requested" is written by the session's runner`},
		{KindApprovalAnswered, `kind "approval.answered" is written by fak itself`},
		{KindSessionCreated, `kind "session.created" is written by fak itself`},
		{KindSessionStopped, `kind "session.stopped" is written by fak itself`},
		{KindEpochChanged, `kind "epoch.changed" is written by fak itself`},
		{KindAttachmentJoined, `kind "attachment.joined" is written by fak itself`},
		{KindAttachmentLeft, `kind "attachment.left" is written by fak itself`},
		{KindLeaseTaken, `kind "lease.taken" is written by fak itself`},
		{KindLeaseReleased, `kind "lease.released" is written by fak itself`},
		{KindResetBoundary, `kind "reset_boundary" is written by fak itself`},
		{KindProviderBoundary, `kind "fak.session.provider_boundary.v1" is written by fak itself`},
		{KindProviderBound, `kind "provider.bound" is written by fak itself`},
		{KindProviderEnd, `kind "provider.session_end" is written by fak itself`},
		{KindBudgetCharged, `kind "budget.charged" is written by fak itself`},
		{KindBudgetExhausted, `kind "budget.exhausted" is written by fak itself`},
		{KindSessionForked, `kind "session.forked" is written by fak itself`},
		{"bogus", `unknown kind "bogus"`},
	}
	for _, tt := range tests {
		t.Run(tt.kind, func(t *testing.T) {
			h := newHarness(t)
			h.apply1(create("s1"))
			// The offending event is second: the message names its index.
			r := h.refused(appendEv("s1", ev("note", "fine"), ev(tt.kind, "x")), ReasonInvalidArgument)
			wantErrMsg(t, r, ReasonInvalidArgument, "event 1: "+tt.want)
			if err := ValidateEventInputs([]*fsmpb.EventInput{ev(tt.kind, "x")}); ReasonOf(err) != ReasonInvalidArgument {
				t.Fatalf("ValidateEventInputs(%s) = %v, want INVALID_ARGUMENT", tt.kind, err)
			}
			h.wantJournal("s1", createdJournal("s1")...)
		})
	}
}

func TestKindVocabulary(t *testing.T) {
	// Every kind has exactly one writer.
	for kind := range allKinds() {
		n := 0
		for _, m := range []map[string]bool{systemKinds, runnerKinds, clientKinds} {
			if m[kind] {
				n++
			}
		}
		if n != 1 {
			t.Errorf("kind %q has %d writers, want 1", kind, n)
		}
		if AppendableKind(kind) != clientKinds[kind] || RunnerKind(kind) != runnerKinds[kind] {
			t.Errorf("kind %q: AppendableKind %v, RunnerKind %v", kind, AppendableKind(kind), RunnerKind(kind))
		}
	}
	for _, kind := range []string{KindInput, KindOutput, KindTurnStarted, KindApprovalAnswered} {
		if AppendableKind(kind) {
			t.Errorf("AppendableKind(%q) = true", kind)
		}
	}
	if KnownKind("bogus") || AppendableKind("") {
		t.Error("unknown kinds are known")
	}
}

// allKinds is every kind of the vocabulary.
func allKinds() map[string]bool {
	all := map[string]bool{}
	for _, m := range []map[string]bool{systemKinds, runnerKinds, clientKinds} {
		for k := range m {
			all[k] = true
		}
	}
	return all
}
