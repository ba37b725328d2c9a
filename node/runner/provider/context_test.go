package provider

import (
	"strings"
	"testing"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/runner"
	"github.com/fak-dev/fak/node/runner/runnertest"
)

func event(seq uint64, kind, text, data string) *fsmpb.Event {
	return &fsmpb.Event{SessionId: testSession, Seq: seq, Kind: kind, Text: text, Data: []byte(data)}
}

func conversationOf(t *testing.T, j runnertest.Journal, resetSeq, seq uint64) (string, int) {
	t.Helper()
	rt := &runtime{ep: runner.Epoch{SessionID: testSession, ResetSeq: resetSeq}, journal: j}
	s, n, err := rt.conversation(seq)
	if err != nil {
		t.Fatal(err)
	}
	return s, n
}

// An input queued while a turn ran follows that turn's answer; the turn
// being served and what is queued after it are left out; events before
// the reset boundary are not read.
func TestConversationFollowsTheTurns(t *testing.T) {
	j := runnertest.Journal{
		event(1, fsm.KindInput, "before the reset", ""),
		event(2, fsm.KindResetBoundary, "", ""),
		event(3, fsm.KindInput, "one", ""),
		event(4, fsm.KindTurnStarted, "", `{"input_seq":3}`),
		event(5, fsm.KindInput, "two", ""), // queued while one ran
		event(6, fsm.KindOutput, "answer ", ""),
		event(7, fsm.KindToolCall, "ls", ""),
		event(8, fsm.KindOutput, "one", ""),
		event(9, fsm.KindTurnCompleted, "completed", `{"status":"completed","input_seq":3}`),
		event(10, fsm.KindTurnStarted, "", `{"input_seq":5}`),
		event(11, fsm.KindOutput, "half", ""),
		event(12, fsm.KindTurnCompleted, "failed: x", `{"status":"failed","input_seq":5}`),
		event(13, fsm.KindInput, "three", ""),
		event(14, fsm.KindTurnStarted, "", `{"input_seq":13}`),
		event(15, fsm.KindInput, "four", ""),
		event(16, fsm.KindTurnCompleted, "interrupted", `{"status":"interrupted","input_seq":13}`),
		event(17, fsm.KindTurnStarted, "", `{"input_seq":15}`), // the turn being served
		event(18, fsm.KindInput, "five", ""),
	}
	got, n := conversationOf(t, j, 2, 15)
	want := "user: one\nassistant: answer one\n" +
		"user: two\nassistant: half\n(the turn failed)\n" +
		"user: three\n(the turn interrupted without an answer)\n"
	if got != want || n != 3 {
		t.Fatalf("conversation (%d turns)\n%s\nwant\n%s", n, got, want)
	}
	if got, n := conversationOf(t, j, 2, 3); got != "" || n != 0 {
		t.Fatalf("the first turn's conversation is %q (%d)", got, n)
	}
}

// Only the conversation's last maxPromptPrefix bytes are kept, from a
// line's start.
func TestConversationKeepsItsEnd(t *testing.T) {
	var j runnertest.Journal
	seq := uint64(0)
	add := func(kind, text, data string) {
		seq++
		j = append(j, event(seq, kind, text, data))
	}
	for i := 0; i < 100; i++ {
		add(fsm.KindInput, "question", "")
		add(fsm.KindTurnStarted, "", "")
		add(fsm.KindOutput, strings.Repeat("é", 500), "")
		add(fsm.KindTurnCompleted, "", `{"status":"completed"}`)
	}
	add(fsm.KindInput, "now", "")
	got, n := conversationOf(t, j, 0, seq)
	if n != 100 || len(got) > maxPromptPrefix+64 || !strings.HasPrefix(got, "[… earlier conversation cut]\nuser: question\n") ||
		!strings.HasSuffix(got, "é\n") {
		t.Fatalf("%d turns, %d bytes: %.80q … %q", n, len(got), got, got[len(got)-20:])
	}
	if s := keepLast(strings.Repeat("é", 100), 51); s != "[… earlier conversation cut]\n"+strings.Repeat("é", 25) {
		t.Fatalf("cut inside a character: %q", s)
	}
}

func TestLineType(t *testing.T) {
	for line, want := range map[string]string{
		`{"type":"result","x":1}`: "result",
		`not json`:                "error: not a JSON object",
		`[1,2]`:                   "error: not a JSON object",
		`{"type":7}`:              `error: "type" is not a string`,
		`{"kind":"x"}`:            `error: no "type"`,
		`{"type":"x"`:             "error: not JSON",
	} {
		typ, err := lineType([]byte(line))
		got := typ
		if err != nil {
			got = "error: " + err.Error()
		}
		if !strings.HasPrefix(got, want) {
			t.Errorf("lineType(%s) = %q, want %q", line, got, want)
		}
	}
}
