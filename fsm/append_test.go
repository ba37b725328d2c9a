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
			cmds: []*fsmpb.Command{appendEv("a", ev("input", "a2"), ev("output", "a3"))},
			want: []*fsmpb.Result{appendResult("a", 2, 3)},
		},
		{ // sessions interleaved inside one entry
			cmds: []*fsmpb.Command{
				appendEv("b", ev("input", "b2")),
				appendEv("a", ev("turn.started", "a4")),
				appendEv("b", ev("tool.call", "b3"), ev("tool.result", "b4")),
				appendEv("a", ev("turn.completed", "a5")),
			},
			want: []*fsmpb.Result{
				appendResult("b", 2, 2),
				appendResult("a", 4, 4),
				appendResult("b", 3, 4),
				appendResult("a", 5, 5),
			},
		},
		{ // a failing command in the middle of an entry does not disturb the others
			cmds: []*fsmpb.Command{
				appendEv("a", ev("note", "a6")),
				appendEv("missing", ev("note", "x")),
				appendEv("b", ev("checkpoint", "b5")),
			},
			want: []*fsmpb.Result{
				appendResult("a", 6, 6),
				{Error: &fsmpb.Error{Reason: string(ReasonNotFound), Message: "session missing not found"}},
				appendResult("b", 5, 5),
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

	h.wantJournal("a",
		"1 session.created title a",
		"2 input a2",
		"3 output a3",
		"4 turn.started a4",
		"5 turn.completed a5",
		"6 note a6",
	)
	h.wantJournal("b",
		"1 session.created title b",
		"2 input b2",
		"3 tool.call b3",
		"4 tool.result b4",
		"5 checkpoint b5",
	)
	if s := h.session("a"); s.HeadSeq != 6 {
		t.Fatalf("a head = %d, want 6", s.HeadSeq)
	}
}

func TestAppendEventsStampsEvents(t *testing.T) {
	h := newHarness(t)
	h.apply1(create("s1"))
	c := at(t0+500, req("req-7", appendEv("s1", &fsmpb.EventInput{Kind: "output", Text: "t", Data: []byte{0, 1, 2}})))
	wantErr(t, h.apply1(c), "")

	evs, _, _ := h.f.Events("s1", 2, 1)
	want := &fsmpb.Event{SessionId: "s1", Seq: 2, Kind: "output", TimeUnixNano: t0 + 500, Text: "t", Data: []byte{0, 1, 2}, RequestId: "req-7"}
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
		{"unknown session", appendEv("nope", ev("input", "x")), ReasonNotFound},
		{"empty session id", appendEv("", ev("input", "x")), ReasonInvalidArgument},
		{"no events", appendEv("live"), ReasonInvalidArgument},
		{"unknown kind", appendEv("live", ev("input", "ok"), ev("bogus", "x")), ReasonInvalidArgument},
		{"empty kind", appendEv("live", ev("", "x")), ReasonInvalidArgument},
		{"overlong kind", appendEv("live", ev(strings.Repeat("k", MaxKindBytes+1), "x")), ReasonInvalidArgument},
		{"system kind created", appendEv("live", ev(KindSessionCreated, "x")), ReasonInvalidArgument},
		{"system kind stopped", appendEv("live", ev("input", "ok"), ev(KindSessionStopped, "x")), ReasonInvalidArgument},
		{"too many events", appendEv("live", tooMany...), ReasonInvalidArgument},
		{"stopped session", appendEv("stopped", ev("input", "x")), ReasonSessionStopped},
		{"stopped session, matching expected seq", appendIf("stopped", 2, ev("input", "x")), ReasonSessionStopped},
		{"expected seq behind", appendIf("live", 1, ev("input", "x")), ReasonSeqMismatch},
		{"expected seq ahead", appendIf("live", 3, ev("input", "x")), ReasonSeqMismatch},
		{"expected seq zero", appendIf("live", 0, ev("input", "x")), ReasonSeqMismatch},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t)
			h.apply(create("live"), appendEv("live", ev("input", "first")))
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
	if !proto.Equal(r, appendResult("s1", 2, MaxEventsPerAppend+1)) {
		t.Fatalf("result = %v", r)
	}
}

func TestAppendEventsEveryClientKind(t *testing.T) {
	h := newHarness(t)
	h.apply1(create("s1"))
	for kind := range clientKinds {
		wantErr(t, h.apply1(appendEv("s1", ev(kind, ""))), "")
	}
	if s := h.session("s1"); s.HeadSeq != uint64(1+len(clientKinds)) {
		t.Fatalf("head = %d, want %d", s.HeadSeq, 1+len(clientKinds))
	}
}

func TestCompareAndAppend(t *testing.T) {
	h := newHarness(t)
	h.apply1(create("s1")) // head 1

	// A script of appends against one journal: the expected head, the
	// outcome, and the head reported by a mismatch.
	script := []struct {
		cmd      *fsmpb.Command
		want     *fsmpb.Result
		wantHead uint64 // session head afterwards
	}{
		{appendIf("s1", 1, ev("input", "a")), appendResult("s1", 2, 2), 2},
		{appendIf("s1", 2, ev("output", "b"), ev("output", "c")), appendResult("s1", 3, 4), 4},
		{ // stale writer: still thinks the head is 2
			appendIf("s1", 2, ev("output", "lost")),
			&fsmpb.Result{Error: &fsmpb.Error{Reason: string(ReasonSeqMismatch), Message: "expected head 2, journal head is 4", HeadSeq: 4}},
			4,
		},
		{ // writer from the future
			appendIf("s1", 9, ev("output", "lost")),
			&fsmpb.Result{Error: &fsmpb.Error{Reason: string(ReasonSeqMismatch), Message: "expected head 9, journal head is 4", HeadSeq: 4}},
			4,
		},
		{appendEv("s1", ev("note", "unconditional")), appendResult("s1", 5, 5), 5},
		{appendIf("s1", 5, ev("note", "d")), appendResult("s1", 6, 6), 6},
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
	h.wantJournal("s1",
		"1 session.created title s1",
		"2 input a",
		"3 output b",
		"4 output c",
		"5 note unconditional",
		"6 note d",
	)
}

func TestCompareAndAppendWithinOneEntry(t *testing.T) {
	// Two writers race with the same expected head; the log orders them
	// and exactly the first wins, even inside one entry.
	h := newHarness(t)
	h.apply1(create("s1"))
	rs := h.apply(
		appendIf("s1", 1, ev("input", "winner")),
		appendIf("s1", 1, ev("input", "loser")),
	)
	wantErr(t, rs[0], "")
	wantErr(t, rs[1], ReasonSeqMismatch)
	if rs[1].Error.HeadSeq != 2 {
		t.Fatalf("loser sees head %d, want 2", rs[1].Error.HeadSeq)
	}
	h.wantJournal("s1", "1 session.created title s1", "2 input winner")
}
