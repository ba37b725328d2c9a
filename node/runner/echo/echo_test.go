package echo

import (
	"context"
	"strings"
	"testing"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/runner"
)

func TestParseTool(t *testing.T) {
	for _, tc := range []struct {
		in, tool, args string
		ok             bool
	}{
		{"!tool ls -la", "ls", "-la", true},
		{"!tool ls", "ls", "", true},
		{"!tool   grep -r  x ", "grep", "-r  x", true},
		{"!tool ", "", "", false},
		{"!tools ls", "", "", false},
		{"hello", "", "", false},
	} {
		tool, args, ok := parseTool(strings.TrimSpace(tc.in))
		if tool != tc.tool || args != tc.args || ok != tc.ok {
			t.Errorf("parseTool(%q) = %q, %q, %v; want %q, %q, %v", tc.in, tool, args, ok, tc.tool, tc.args, tc.ok)
		}
	}
}

func TestSplitKeepsTheReplyAndBoundsChunks(t *testing.T) {
	for _, s := range []string{"echo: hi", "echo: a  b", strings.Repeat("word ", 100) + "end"} {
		chunks := split(s, maxChunks)
		if strings.Join(chunks, "") != s {
			t.Errorf("split(%q) loses text: %q", s, chunks)
		}
		if len(chunks) < 2 || len(chunks) > maxChunks {
			t.Errorf("split(%q) gives %d chunks, want 2..%d", s, len(chunks), maxChunks)
		}
	}
}

// fakeJournal serves a fixed context; fakeTurn records what is emitted.
type fakeJournal []*fsmpb.Event

func (j fakeJournal) Events(from uint64, limit int) ([]*fsmpb.Event, error) {
	var out []*fsmpb.Event
	for _, ev := range j {
		if ev.Seq >= from && len(out) < limit {
			out = append(out, ev)
		}
	}
	return out, nil
}

type fakeTurn struct{ out strings.Builder }

func (t *fakeTurn) Emit(_ context.Context, evs ...runner.Event) (uint64, error) {
	for _, ev := range evs {
		t.out.WriteString(ev.Text)
	}
	return 0, nil
}

func (t *fakeTurn) AwaitApproval(context.Context, uint64) (bool, error) { return true, nil }
func (t *fakeTurn) Charge(context.Context, *fsmpb.Budget) error         { return nil }
func (t *fakeTurn) InputSeq() uint64                                    { return 0 }

// The context counts the inputs the journal view holds up to the turn's
// own input (a later queued input is not in it yet) and the turns
// completed in it.
func TestTurnReportsTheInputsInItsContext(t *testing.T) {
	ev := func(seq uint64, kind, text string) *fsmpb.Event {
		return &fsmpb.Event{Seq: seq, Kind: kind, Text: text}
	}
	j := fakeJournal{ // a view after a reset boundary at 9
		ev(10, fsm.KindInput, "x"), ev(11, fsm.KindTurnStarted, ""), ev(12, fsm.KindOutput, "echo: x"), ev(13, fsm.KindTurnCompleted, ""),
		ev(14, fsm.KindInput, "hello there"), ev(15, fsm.KindInput, "queued"), ev(16, fsm.KindTurnStarted, ""),
	}
	rt, err := New(Options{}).Start(context.Background(), runner.Epoch{SessionID: "s", Epoch: 1, ResetSeq: 9}, j)
	if err != nil {
		t.Fatal(err)
	}
	tr := &fakeTurn{}
	res, err := rt.Turn(context.Background(), j[4], tr)
	if err != nil {
		t.Fatal(err)
	}
	if res.Summary != "turn 2 done" || res.Facts[FactContextInputs] != 2 || tr.out.String() != "echo: hello there" {
		t.Fatalf("turn: %+v, output %q; want turn 2 done, context_inputs 2, echo: hello there", res, tr.out.String())
	}
}
