package echo

import (
	"context"
	"strings"
	"testing"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/runner"
	"github.com/fak-dev/fak/node/runner/runnertest"
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

// The context counts the inputs the journal view holds up to the turn's
// own input (a later queued input is not in it yet) and the turns
// completed in it.
func TestTurnReportsTheInputsInItsContext(t *testing.T) {
	ev := func(seq uint64, kind, text string) *fsmpb.Event {
		return &fsmpb.Event{Seq: seq, Kind: kind, Text: text}
	}
	j := runnertest.Journal{ // a view after a reset boundary at 9
		ev(10, fsm.KindInput, "x"), ev(11, fsm.KindTurnStarted, ""), ev(12, fsm.KindOutput, "echo: x"), ev(13, fsm.KindTurnCompleted, ""),
		ev(14, fsm.KindInput, "hello there"), ev(15, fsm.KindInput, "queued"), ev(16, fsm.KindTurnStarted, ""),
	}
	rt, err := New(Options{}).Start(context.Background(), runner.Epoch{SessionID: "s", Epoch: 1, ResetSeq: 9}, j)
	if err != nil {
		t.Fatal(err)
	}
	tr := &runnertest.Turn{}
	res, err := rt.Turn(context.Background(), j[4], tr)
	if err != nil {
		t.Fatal(err)
	}
	if res.Summary != "turn 2 done" || res.Facts[FactContextInputs] != 2 || tr.Output() != "echo: hello there" {
		t.Fatalf("turn: %+v, output %q; want turn 2 done, context_inputs 2, echo: hello there", res, tr.Output())
	}
}
