package chaos

import (
	"fmt"
	"strings"
	"testing"

	"github.com/fak-dev/fak/chaos/checker"
	"github.com/fak-dev/fak/node/runner/model/modeltest"
)

// witnessTurn is the journal of one model turn under the witness: a read
// that saw seen, a write of the next link, the answer.
func witnessTurn(seq uint64, n int, input, seen string) []checker.JournalEvent {
	read, write := fmt.Sprintf("r%d", n), fmt.Sprintf("w%d", n)
	result := seen
	ok := "true"
	if seen == "" {
		result, ok = "error: stat witness.txt: no such file or directory", "false"
	}
	next := witnessNext(seen, input)
	return []checker.JournalEvent{
		jev(seq, "tool.call", "read_file", fmt.Sprintf(`{"id":%q,"name":"read_file","arguments":"{\"path\":\"witness.txt\"}"}`, read)),
		jev(seq+1, "tool.result", result, fmt.Sprintf(`{"id":%q,"name":"read_file","ok":%s}`, read, ok)),
		jev(seq+2, "tool.call", "write_file", fmt.Sprintf(`{"id":%q,"name":"write_file","arguments":"{\"content\":\"%s\",\"path\":\"witness.txt\"}"}`, write, next)),
		jev(seq+3, "tool.result", "wrote 64 bytes", fmt.Sprintf(`{"id":%q,"name":"write_file","ok":true}`, write)),
	}
}

func cutover(seq uint64, cause string) checker.JournalEvent {
	return jev(seq, "move.cutover", "cutover", fmt.Sprintf(`{"move_id":"m%d","state":"CUTOVER_COMMITTED","cause":%q,"from":"n1","to":"n2"}`, seq, cause))
}

func TestWorkspaceWitness(t *testing.T) {
	a := witnessNext("", "one")
	b := witnessNext(a, "two")
	var good []checker.JournalEvent
	good = append(good, witnessTurn(1, 1, "one", "")...)
	good = append(good, cutover(10, "operator"))
	good = append(good, witnessTurn(11, 2, "two", a)...)
	good = append(good, cutover(20, "recovery")) // back to an older copy: allowed
	good = append(good, witnessTurn(21, 3, "three", "")...)
	st := workspaceWitness(map[string][]checker.JournalEvent{"s": good}, []string{"s"})
	if st.Reads != 3 || st.AfterMoves != 1 || st.AfterRecoveries != 1 || len(st.Violations) != 0 {
		t.Fatalf("good chain: %+v", st)
	}

	// The workspace after a move is not the one the source left.
	var bad []checker.JournalEvent
	bad = append(bad, witnessTurn(1, 1, "one", "")...)
	bad = append(bad, witnessTurn(5, 2, "two", a)...)
	bad = append(bad, cutover(10, "operator"))
	bad = append(bad, witnessTurn(11, 3, "three", a)...) // b was written
	st = workspaceWitness(map[string][]checker.JournalEvent{"s": bad}, []string{"s"})
	if len(st.Violations) != 1 || !strings.Contains(st.Violations[0], "after move m10 n1 → n2 (operator)") {
		t.Fatalf("stale workspace after a move: %+v", st)
	}

	// A write whose result was never journaled (its node died) may or may
	// not have happened, or left the file truncated.
	for _, seen := range []string{a, b, ""} {
		evs := witnessTurn(1, 1, "one", "")
		evs = append(evs, witnessTurn(5, 2, "two", a)[:3]...) // no write result
		evs = append(evs, witnessTurn(11, 3, "three", seen)...)
		if st := workspaceWitness(map[string][]checker.JournalEvent{"s": evs}, []string{"s"}); len(st.Violations) != 0 {
			t.Errorf("seen %q after an unconfirmed write: %v", seen, st.Violations)
		}
	}
	// A recovery to an older copy, then a move before any turn read it
	// (seed 1231730015): the move carries the recovered copy.
	evs := witnessTurn(1, 1, "one", "")
	evs = append(evs, witnessTurn(5, 2, "two", a)...)
	evs = append(evs, cutover(10, "recovery"), cutover(11, "operator"))
	evs = append(evs, witnessTurn(12, 3, "three", a)...)
	if st := workspaceWitness(map[string][]checker.JournalEvent{"s": evs}, []string{"s"}); len(st.Violations) != 0 || st.AfterRecoveries != 1 {
		t.Errorf("an older copy carried by a move after its recovery: %+v", st)
	}
	// After a recovery, a state the chain never had is a violation.
	evs = witnessTurn(1, 1, "one", "")
	evs = append(evs, cutover(10, "recovery"))
	evs = append(evs, witnessTurn(11, 2, "two", "f00d")...)
	if st := workspaceWitness(map[string][]checker.JournalEvent{"s": evs}, []string{"s"}); len(st.Violations) != 1 {
		t.Fatalf("made-up state after a recovery: %+v", st)
	}
}

// The fake model's turn: read the witness, write its next link, answer.
func TestWitnessReply(t *testing.T) {
	req := func(msgs string) modeltest.Request {
		return modeltest.Request{Body: []byte(`{"model":"m","messages":[` + msgs + `]}`)}
	}
	user := `{"role":"user","content":"hi"}`
	r := witnessReply(req(user))
	if len(r.ToolCalls) != 1 || r.ToolCalls[0].Name != "read_file" {
		t.Fatalf("first step: %+v", r)
	}
	read := `{"role":"assistant","tool_calls":[{"id":"c1","type":"function","function":{"name":"read_file","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"error: stat witness.txt: no such file or directory"}`
	r = witnessReply(req(user + "," + read))
	if len(r.ToolCalls) != 1 || r.ToolCalls[0].Name != "write_file" || !strings.Contains(r.ToolCalls[0].Arguments, witnessNext("", "hi")) {
		t.Fatalf("second step: %+v", r)
	}
	write := `{"role":"assistant","tool_calls":[{"id":"c2","type":"function","function":{"name":"write_file","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"c2","content":"wrote 64 bytes to witness.txt"}`
	if r = witnessReply(req(user + "," + read + "," + write)); r.Text != modelReply("hi") || len(r.ToolCalls) != 0 {
		t.Fatalf("last step: %+v", r)
	}
}
