package exec

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/runner"
	"github.com/fak-dev/fak/node/runner/proc/proctest"
	"github.com/fak-dev/fak/node/runner/runnertest"
)

// shell is an inline sh agent: the lines of its script.
func shell(lines ...string) []string {
	return []string{"sh", "-c", strings.Join(lines, "\n")}
}

// readTurn is the start of every inline jsonl agent: it reads the turn line
// and keeps it in turn.json.
const readTurn = `IFS= read -r turn; printf '%s\n' "$turn" > turn.json`

// sequence is the kinds of evs with runs of output collapsed: how the
// output was coalesced into events is the Output's business.
func sequence(evs []runner.Event) []string {
	var out []string
	for _, k := range kinds(evs) {
		if k == fsm.KindOutput && len(out) > 0 && out[len(out)-1] == k {
			continue
		}
		out = append(out, k)
	}
	return out
}

func event(evs []runner.Event, kind string) runner.Event {
	for _, e := range evs {
		if e.Kind == kind {
			return e
		}
	}
	return runner.Event{}
}

func decodeJSON(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%q: %v", b, err)
	}
	return m
}

// receivedTurn is the turn line an agent kept in turn.json.
type receivedTurn struct {
	Type      string `json:"type"`
	Protocol  int    `json:"protocol"`
	SessionID string `json:"session_id"`
	Epoch     uint64 `json:"epoch"`
	Input     struct {
		Seq  uint64 `json:"seq"`
		Text string `json:"text"`
	} `json:"input"`
	Context []struct {
		Seq  uint64          `json:"seq"`
		Kind string          `json:"kind"`
		Text string          `json:"text"`
		Data json.RawMessage `json:"data"`
	} `json:"context"`
}

func readReceivedTurn(t *testing.T, ws string) receivedTurn {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(ws, "turn.json"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(b), "\n") != 1 {
		t.Fatalf("the turn is not one line: %q", b)
	}
	var rt receivedTurn
	if err := json.Unmarshal(b, &rt); err != nil {
		t.Fatal(err)
	}
	return rt
}

func ev(seq uint64, kind, text, data string) *fsmpb.Event {
	return &fsmpb.Event{SessionId: testSession, Seq: seq, Kind: kind, Text: text, Data: []byte(data)}
}

// A session after a reset at 5: one answered turn, the input at 10, one
// queued after it, and the turn of the input at 10 started.
var contextJournal = runnertest.Journal{
	ev(1, fsm.KindSessionCreated, "", ""),
	ev(4, fsm.KindInput, "before the reset", ""),
	ev(5, fsm.KindResetBoundary, "", `{"reason":"clear"}`),
	ev(6, fsm.KindInput, "earlier", ""),
	ev(7, fsm.KindTurnStarted, "", `{"input_seq":6}`),
	ev(8, fsm.KindOutput, "echo: earlier", "not json"),
	ev(9, fsm.KindTurnCompleted, "completed", `{"status": "completed",
 "input_seq": 6}`),
	ev(10, fsm.KindInput, "make a file", ""),
	ev(11, fsm.KindInput, "queued later", ""),
	ev(12, fsm.KindTurnStarted, "", `{"input_seq":10}`),
}

// The shell agent's whole exchange, approved: output, a tool call behind an
// approval, its result, usage, done.
func TestJSONLShellAgentApproved(t *testing.T) {
	t.Parallel()
	rt, ws := start(t, Options{Command: []string{testdata(t, "tool_agent.sh")}, Protocol: ProtocolJSONL}, contextJournal, 5)
	var asked []uint64
	tr := &runnertest.Turn{Input: 10, Approve: func(seq uint64) (bool, error) {
		asked = append(asked, seq)
		return true, nil
	}}
	res, err := proctest.RunTurn(t, rt, inputEvent(10, "make a file"), tr)
	if err != nil {
		t.Fatal(err)
	}
	evs := tr.Events()
	want := []string{fsm.KindOutput, fsm.KindToolCall, fsm.KindApprovalRequested, fsm.KindToolResult, fsm.KindOutput}
	if got := sequence(evs); !reflect.DeepEqual(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	if got := tr.Output(); got != "thinking… made it" {
		t.Fatalf("output %q", got)
	}
	call := event(evs, fsm.KindToolCall)
	if call.Text != `touch {"path":"made.txt"}` {
		t.Fatalf("tool.call text %q", call.Text)
	}
	if got := decodeJSON(t, call.Data); !reflect.DeepEqual(got, map[string]any{"id": "t1", "name": "touch", "input": map[string]any{"path": "made.txt"}}) {
		t.Fatalf("tool.call data %v", got)
	}
	for i, e := range evs {
		if e.Kind == fsm.KindApprovalRequested {
			if e.Text != "create made.txt?" || !reflect.DeepEqual(asked, []uint64{uint64(i + 1)}) {
				t.Fatalf("approval %q at seq %d; AwaitApproval asked for %v", e.Text, i+1, asked)
			}
		}
	}
	result := event(evs, fsm.KindToolResult)
	if got := decodeJSON(t, result.Data); result.Text != "created made.txt" || !reflect.DeepEqual(got, map[string]any{"id": "t1", "name": "touch", "is_error": false}) {
		t.Fatalf("tool.result %q %v", result.Text, got)
	}
	if _, err := os.Stat(filepath.Join(ws, "made.txt")); err != nil {
		t.Fatalf("the approved tool did not run: %v", err)
	}
	charges := tr.Charges()
	if len(charges) != 1 || charges[0].OutputTokens != 3 || charges[0].SpendMicros != 150 || charges[0].ToolCalls != 1 || charges[0].Turns != 0 {
		t.Fatalf("charges %v", charges)
	}
	if res.Summary != "asked once" || res.Facts["input_tokens"] != uint64(12) || res.Facts["exit_code"] != 0 {
		t.Fatalf("result %+v", res)
	}

	got := readReceivedTurn(t, ws)
	if got.Type != "turn" || got.Protocol != 1 || got.SessionID != testSession || got.Epoch != 3 ||
		got.Input.Seq != 10 || got.Input.Text != "make a file" {
		t.Fatalf("turn line %+v", got)
	}
	var seqs []uint64
	for _, c := range got.Context {
		seqs = append(seqs, c.Seq)
	}
	if !reflect.DeepEqual(seqs, []uint64{6, 7, 8, 9, 10}) {
		t.Fatalf("context seqs %v, want the events after the reset up to the input", seqs)
	}
	if d := string(got.Context[3].Data); d != `{"status":"completed","input_seq":6}` {
		t.Fatalf("JSON data passed as %s", d)
	}
	if d := string(got.Context[2].Data); d != `"not json"` {
		t.Fatalf("non-JSON data passed as %s", d)
	}
	if got.Context[0].Data != nil || got.Context[4].Text != "make a file" {
		t.Fatalf("context %+v", got.Context)
	}
}

func TestJSONLShellAgentDenied(t *testing.T) {
	t.Parallel()
	rt, ws := start(t, Options{Command: []string{testdata(t, "tool_agent.sh")}, Protocol: ProtocolJSONL}, contextJournal, 5)
	tr := &runnertest.Turn{Input: 10, Approve: func(uint64) (bool, error) { return false, nil }}
	if _, err := proctest.RunTurn(t, rt, inputEvent(10, "make a file"), tr); err != nil {
		t.Fatal(err)
	}
	result := event(tr.Events(), fsm.KindToolResult)
	if result.Text != "denied" || decodeJSON(t, result.Data)["is_error"] != true {
		t.Fatalf("tool.result %q %s", result.Text, result.Data)
	}
	if _, err := os.Stat(filepath.Join(ws, "made.txt")); err == nil {
		t.Fatal("the denied tool ran")
	}
	if got := tr.Output(); got != "thinking… did not" {
		t.Fatalf("output %q", got)
	}
}

// The context is read in pages and kept between turns: each turn gets
// every event after the reset up to its own turn.started.
func TestJSONLContextIsTheJournalAfterTheReset(t *testing.T) {
	t.Parallel()
	j := runnertest.Journal{ev(2, fsm.KindResetBoundary, "", "")}
	for seq := uint64(3); seq <= 1501; seq++ {
		kind := fsm.KindOutput
		switch seq {
		case 1300, 1500:
			kind = fsm.KindInput
		case 1301, 1501:
			kind = fsm.KindTurnStarted
		}
		j = append(j, ev(seq, kind, fmt.Sprint(seq), ""))
	}
	for _, in := range []uint64{1300, 1500} {
		// The journal as it stands when the turn of in runs.
		rt, ws := start(t, Options{Command: shell(readTurn, `echo '{"type":"done"}'`), Protocol: ProtocolJSONL}, j[:in], 2)
		if _, err := proctest.RunTurn(t, rt, inputEvent(in, fmt.Sprint(in)), &runnertest.Turn{Input: in}); err != nil {
			t.Fatal(err)
		}
		got := readReceivedTurn(t, ws)
		if n := uint64(len(got.Context)); n != in-2 {
			t.Fatalf("input %d: %d context events, want %d", in, n, in-2)
		}
		for i, c := range got.Context {
			if c.Seq != uint64(i)+3 || c.Text != fmt.Sprint(c.Seq) {
				t.Fatalf("input %d: context[%d] = %+v", in, i, c)
			}
		}
	}
}

// One runtime serves turn after turn, reading only what is new: an input
// typed while the previous turn ran sees that turn's answer, and not the
// inputs queued after it.
func TestJSONLContextOfQueuedInputs(t *testing.T) {
	t.Parallel()
	full := runnertest.Journal{
		ev(1, fsm.KindInput, "A", ""),
		ev(2, fsm.KindTurnStarted, "", `{"input_seq":1}`),
		ev(3, fsm.KindInput, "B", ""),
		ev(4, fsm.KindOutput, "answer A", ""),
		ev(5, fsm.KindTurnCompleted, "", ""),
		ev(6, fsm.KindTurnStarted, "", `{"input_seq":3}`),
		ev(7, fsm.KindInput, "C", ""),
		ev(8, fsm.KindOutput, "answer B", ""),
	}
	var view growingJournal
	rt, ws := start(t, Options{Command: shell(readTurn, `echo '{"type":"done"}'`), Protocol: ProtocolJSONL}, &view, 0)
	for _, tc := range []struct {
		in, head uint64
		want     []uint64
	}{
		{1, 2, []uint64{1}},             // A's turn just started
		{3, 7, []uint64{1, 2, 3, 4, 5}}, // B's turn, with C queued meanwhile
	} {
		view.set(full[:tc.head])
		if _, err := proctest.RunTurn(t, rt, full[tc.in-1], &runnertest.Turn{Input: tc.in}); err != nil {
			t.Fatal(err)
		}
		var seqs []uint64
		for _, c := range readReceivedTurn(t, ws).Context {
			seqs = append(seqs, c.Seq)
		}
		if !reflect.DeepEqual(seqs, tc.want) {
			t.Fatalf("input %d with the journal at %d: context %v, want %v", tc.in, tc.head, seqs, tc.want)
		}
	}
}

// growingJournal is a journal whose head a test moves.
type growingJournal struct {
	mu sync.Mutex
	j  runnertest.Journal
}

func (g *growingJournal) set(j runnertest.Journal) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.j = j
}

func (g *growingJournal) Events(from uint64, limit int) ([]*fsmpb.Event, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.j.Events(from, limit)
}

func TestJSONLPythonExample(t *testing.T) {
	t.Parallel()
	runnertest.NeedTool(t, "python3", "python3")
	agent := []string{"python3", example(t, "echo_agent.py")}
	j := runnertest.Journal{
		ev(1, fsm.KindInput, "hello there fleet", ""),
		ev(2, fsm.KindInput, "!run echo ran > ran.txt", ""),
		ev(3, fsm.KindInput, "!run echo no > no.txt", ""),
	}
	rt, ws := start(t, Options{Command: agent, Protocol: ProtocolJSONL}, j, 0)

	tr := &runnertest.Turn{Input: 1}
	res, err := proctest.RunTurn(t, rt, j[0], tr)
	if err != nil {
		t.Fatal(err)
	}
	if got := tr.Output(); got != "echo: hello there fleet" {
		t.Fatalf("output %q", got)
	}
	if c := tr.Charges(); len(c) != 1 || c[0].OutputTokens != 4 || c[0].ToolCalls != 0 {
		t.Fatalf("charges %v", c)
	}
	if res.Summary != "4 words; 1 inputs in context" || res.Facts["input_tokens"] != uint64(3) {
		t.Fatalf("result %+v", res)
	}

	tr = &runnertest.Turn{Input: 2}
	if _, err := proctest.RunTurn(t, rt, j[1], tr); err != nil {
		t.Fatal(err)
	}
	want := []string{fsm.KindToolCall, fsm.KindApprovalRequested, fsm.KindToolResult, fsm.KindOutput}
	if got := sequence(tr.Events()); !reflect.DeepEqual(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "ran.txt")); err != nil || string(b) != "ran\n" {
		t.Fatalf("the approved command did not run in the workspace: %q %v", b, err)
	}
	if c := tr.Charges(); len(c) != 1 || c[0].ToolCalls != 1 {
		t.Fatalf("charges %v", c)
	}

	tr = &runnertest.Turn{Input: 3, Approve: func(uint64) (bool, error) { return false, nil }}
	if _, err := proctest.RunTurn(t, rt, j[2], tr); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(ws, "no.txt")); err == nil {
		t.Fatal("the denied command ran")
	}
	if r := event(tr.Events(), fsm.KindToolResult); decodeJSON(t, r.Data)["is_error"] != true {
		t.Fatalf("denied tool.result %q %s", r.Text, r.Data)
	}
}

// Every malformed line fails the turn as RUNTIME_PROTOCOL naming its line,
// and the process (which would sleep on) is killed.
func TestJSONLMalformedLinesFailTheTurn(t *testing.T) {
	t.Parallel()
	const out = `echo '{"type":"output","text":"ok"}'`
	for _, tc := range []struct {
		name  string
		lines []string
		want  string
	}{
		{"not json", []string{out, `echo 'hello'`}, "line 2: not JSON"},
		{"not an object", []string{`echo '[1,2]'`}, "line 1: not a JSON object"},
		{"null", []string{`echo 'null'`}, "line 1: not a JSON object"},
		{"no type", []string{`echo '{"text":"x"}'`}, `line 1: "type" is missing`},
		{"unknown type", []string{out, `echo '{"type":"thought","text":"x"}'`}, `line 2: unknown type "thought"`},
		{"blank lines count", []string{`echo`, `echo '{"type":"bogus"}'`}, `line 2: unknown type "bogus"`},
		{"output without text", []string{`echo '{"type":"output"}'`}, `line 1: output: "text" is missing`},
		{"text not a string", []string{`echo '{"type":"output","text":5}'`}, `line 1: output: "text" must be a string`},
		{"tool.call without name", []string{`echo '{"type":"tool.call","id":"a"}'`}, `line 1: tool.call: "name" is missing`},
		{"tool.call without id", []string{`echo '{"type":"tool.call","name":"ls"}'`}, `line 1: tool.call: "id" is missing`},
		{"input not an object", []string{`echo '{"type":"tool.call","id":"a","name":"x","input":[1]}'`}, `"input" must be a JSON object`},
		{"tool.call id reused", []string{`echo '{"type":"tool.call","id":"a","name":"x"}'`, `echo '{"type":"tool.call","id":"a","name":"y"}'`}, `line 2: tool.call "a": the id is already used`},
		{"result of no call", []string{`echo '{"type":"tool.result","id":"zz","output":""}'`}, `line 1: tool.result "zz" names no tool.call`},
		{"result twice", []string{`echo '{"type":"tool.call","id":"a","name":"x"}'`, `echo '{"type":"tool.result","id":"a","output":""}'`, `echo '{"type":"tool.result","id":"a","output":""}'`}, `line 3: tool.result "a": that tool call already has its result`},
		{"approval without text", []string{`echo '{"type":"approval.request","id":"a","text":""}'`}, `line 1: approval.request: "text" is empty`},
		{"two approvals", []string{
			`echo '{"type":"tool.call","id":"a","name":"x"}'`,
			`echo '{"type":"approval.request","id":"a","text":"run x?"}'`,
			`IFS= read -r answer`,
			`echo '{"type":"approval.request","id":"b","text":"run y?"}'`,
		}, `line 3: approval.request "b" before a tool.result followed approval "a"`},
		{"negative usage", []string{`echo '{"type":"usage","output_tokens":-1}'`}, `line 1: usage: "output_tokens" must be a non-negative integer`},
		{"fractional usage", []string{`echo '{"type":"usage","spend_micros":1.5}'`}, `"spend_micros" must be a non-negative integer`},
		{"line too long", []string{out, `head -c 1100000 /dev/zero | tr '\0' a; echo`}, "line 2: longer than 1048576 bytes"},
		{"output after done", []string{`echo '{"type":"done"}'`, out}, "line 2: output after done (line 1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			script := append([]string{readTurn}, tc.lines...)
			rt, _ := start(t, Options{Command: shell(append(script, "sleep 300")...), Protocol: ProtocolJSONL},
				runnertest.Journal{inputEvent(1, "hi")}, 0)
			began := time.Now()
			_, err := proctest.RunTurn(t, rt, inputEvent(1, "hi"), &runnertest.Turn{Input: 1})
			proctest.WantReason(t, err, ReasonRuntimeProtocol, tc.want)
			if d := time.Since(began); d > exitGrace {
				t.Fatalf("the turn took %s: the process was not killed at the bad line", d)
			}
		})
	}
}

func TestJSONLExitBeforeDone(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		lines  []string
		reason string
		want   []string
	}{
		{"status 0", []string{`echo '{"type":"output","text":"half"}'`, `exit 0`},
			ReasonRuntimeProtocol, []string{"exited before done (exit status 0, after 1 lines)"}},
		{"crash", []string{`echo '{"type":"output","text":"half"}'`, `echo 'Traceback: boom' >&2`, `exit 4`},
			ReasonExitStatus, []string{"exit status 4 before done", "Traceback: boom"}},
		{"done then non-zero", []string{`echo '{"type":"done"}'`, `exit 5`},
			ReasonExitStatus, []string{"exit status 5 after done"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rt, _ := start(t, Options{Command: shell(append([]string{readTurn}, tc.lines...)...), Protocol: ProtocolJSONL},
				runnertest.Journal{inputEvent(1, "hi")}, 0)
			tr := &runnertest.Turn{Input: 1}
			_, err := proctest.RunTurn(t, rt, inputEvent(1, "hi"), tr)
			proctest.WantReason(t, err, tc.reason, tc.want...)
			if tc.lines[0] != `echo '{"type":"done"}'` && tr.Output() != "half" {
				t.Fatalf("the output before the failure was not journaled: %q", tr.Output())
			}
		})
	}
}

// A process that says done but does not exit is killed after the grace.
func TestJSONLDoneWithoutExiting(t *testing.T) {
	t.Parallel()
	rt, ws := start(t, Options{Command: shell(readTurn, `echo $$ > pids`, `echo '{"type":"done"}'`, `sleep 300`), Protocol: ProtocolJSONL},
		runnertest.Journal{inputEvent(1, "hi")}, 0)
	rt.exitGrace = 100 * time.Millisecond
	_, err := proctest.RunTurn(t, rt, inputEvent(1, "hi"), &runnertest.Turn{Input: 1})
	proctest.WantReason(t, err, ReasonRuntimeProtocol, "line 1: the process did not exit within 100ms of done")
	proctest.WantAllDead(t, proctest.ReadPids(t, filepath.Join(ws, "pids")))
}

// An agent's usage refused by the envelope ends the turn with the refusal;
// the process, waiting for more, is killed.
func TestJSONLBudgetExhaustedEndsTheTurn(t *testing.T) {
	t.Parallel()
	rt, ws := start(t, Options{
		Command:  shell(readTurn, `echo $$ > pids`, `echo '{"type":"output","text":"spent"}'`, `echo '{"type":"usage","output_tokens":900}'`, `sleep 300`),
		Protocol: ProtocolJSONL,
	}, runnertest.Journal{inputEvent(1, "hi")}, 0)
	refusal := &fsm.Error{Reason: fsm.ReasonBudgetExhausted, Message: "output_tokens past the hard limit"}
	tr := &runnertest.Turn{Input: 1, Refuse: refusal}
	_, err := proctest.RunTurn(t, rt, inputEvent(1, "hi"), tr)
	if fsm.ReasonOf(err) != fsm.ReasonBudgetExhausted {
		t.Fatalf("error %v, want the BUDGET_EXHAUSTED refusal", err)
	}
	if tr.Output() != "spent" {
		t.Fatalf("output before the charge not journaled: %q", tr.Output())
	}
	proctest.WantAllDead(t, proctest.ReadPids(t, filepath.Join(ws, "pids")))
}

func TestJSONLUsageWithNothingToChargeChargesNothing(t *testing.T) {
	t.Parallel()
	rt, _ := start(t, Options{Command: shell(readTurn, `echo '{"type":"usage","input_tokens":50}'`, `echo '{"type":"done","summary":"s"}'`), Protocol: ProtocolJSONL},
		runnertest.Journal{inputEvent(1, "hi")}, 0)
	tr := &runnertest.Turn{Input: 1}
	res, err := proctest.RunTurn(t, rt, inputEvent(1, "hi"), tr)
	if err != nil {
		t.Fatal(err)
	}
	if c := tr.Charges(); len(c) != 0 {
		t.Fatalf("charged %v", c)
	}
	if res.Facts["input_tokens"] != uint64(50) || res.Summary != "s" {
		t.Fatalf("result %+v", res)
	}
}
