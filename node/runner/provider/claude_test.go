package provider

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/runner/proc/proctest"
	"github.com/fak-dev/fak/node/runner/runnertest"
)

// The command line, the initialize request and the user message are the
// SDK's; stdin closes after the result.
func TestClaudeSpeaksTheSDKsProtocol(t *testing.T) {
	f := newFixture(t)
	rt, _ := f.start(Options{Kind: ProviderClaude, Model: "claude-opus-4"}, history(1, "-rf \"quoted\""), nil)
	tr := &runnertest.Turn{Input: 1}
	mustTurn(t, rt, inputEvent(1, `-rf "quoted"`), tr)
	r := f.last()
	want := []string{"-p", "--output-format", "stream-json", "--verbose", "--input-format", "stream-json",
		"--model", "claude-opus-4", "--permission-prompt-tool", "stdio", "--session-id=" + tr.Binding().ThreadID}
	if !slices.Equal(r.argv, want) {
		t.Fatalf("argv %q,\nwant %q", r.argv, want)
	}
	init := r.line("init ")
	if !strings.HasPrefix(init, `{"type":"control_request","request_id":"req_1_`) ||
		!strings.HasSuffix(init, `","request":{"subtype":"initialize","hooks":null}}`) {
		t.Fatalf("initialize request %q", init)
	}
	if p := r.line("prompt "); p != `-rf \"quoted\"` {
		t.Fatalf("the user message's content is %q", p)
	}
	if !r.has("stdin closed") {
		t.Fatal("stdin was not closed after the result")
	}
	if out := tr.Output(); out != "new "+tr.Binding().ThreadID+`: -rf "quoted"` {
		t.Fatalf("output %q", out)
	}
}

// A permission prompt becomes an approval; allowed, the tool runs with
// its input and its result follows the answer.
func TestClaudeAskAllowed(t *testing.T) {
	f := newFixture(t)
	rt, _ := f.start(Options{Kind: ProviderClaude}, history(1, "use-tool"), nil)
	var asked []uint64
	tr := &runnertest.Turn{Input: 1, Approve: func(seq uint64) (bool, error) { asked = append(asked, seq); return true, nil }}
	res := mustTurn(t, rt, inputEvent(1, "use-tool"), tr)
	wantKinds(t, tr, fsm.KindOutput, fsm.KindToolCall, fsm.KindApprovalRequested, fsm.KindToolResult, fsm.KindOutput)
	wantFSMOrder(t, tr.Events())
	ap := eventsOf(tr, fsm.KindApprovalRequested)[0]
	if ap.Text != "Bash: ls -la" {
		t.Fatalf("approval text %q", ap.Text)
	}
	d := data(t, ap)
	if d["tool_name"] != "Bash" || d["tool_use_id"] != "toolu_01A" || fmt.Sprint(d["input"]) != "map[command:ls -la]" {
		t.Fatalf("approval data %v", d)
	}
	if len(asked) != 1 || asked[0] != 3 { // output, tool.call, approval
		t.Fatalf("asked %v", asked)
	}
	call := data(t, eventsOf(tr, fsm.KindToolCall)[0])
	if call["id"] != "toolu_01A" || call["name"] != "Bash" {
		t.Fatalf("tool.call data %v", call)
	}
	result := eventsOf(tr, fsm.KindToolResult)[0]
	if d := data(t, result); d["tool_use_id"] != "toolu_01A" || d["is_error"] != false || d["content"] != "file-a\nfile-b" {
		t.Fatalf("tool.result data %v", d)
	}
	want := `{"type":"control_response","response":{"subtype":"success","request_id":"perm-1","response":{"behavior":"allow","updatedInput":{"command":"ls -la"}}}}`
	if got := f.last().line("answer "); got != want {
		t.Fatalf("answer %s,\nwant %s", got, want)
	}
	if tr.Output() != "I will list the files.\n\nThere are two files." {
		t.Fatalf("output %q", tr.Output())
	}
	if res.Usage.GetToolCalls() != 1 {
		t.Fatalf("usage %v", res.Usage)
	}
}

// Denied, claude is told who denied it, and its failed tool result is
// journaled.
func TestClaudeAskDenied(t *testing.T) {
	f := newFixture(t)
	j := &liveJournal{events: history(1, "use-tool")}
	rt, _ := f.start(Options{Kind: ProviderClaude}, j, nil)
	tr := &runnertest.Turn{Input: 1, Approve: func(seq uint64) (bool, error) {
		j.add(&fsmpb.Event{Seq: 100, Kind: fsm.KindApprovalAnswered, Text: "denied by cli alice",
			Data: fmt.Appendf(nil, `{"approval_seq":%d,"approved":false,"client_kind":"cli","client_name":"alice","note":"not now"}`, seq)})
		return false, nil
	}}
	mustTurn(t, rt, inputEvent(1, "use-tool"), tr)
	wantKinds(t, tr, fsm.KindOutput, fsm.KindToolCall, fsm.KindApprovalRequested, fsm.KindToolResult, fsm.KindOutput)
	wantFSMOrder(t, tr.Events())
	want := `{"type":"control_response","response":{"subtype":"success","request_id":"perm-1","response":{"behavior":"deny","message":"denied by cli alice: not now"}}}`
	if got := f.last().line("answer "); got != want {
		t.Fatalf("answer %s,\nwant %s", got, want)
	}
	result := eventsOf(tr, fsm.KindToolResult)[0]
	if d := data(t, result); d["is_error"] != true || d["content"] != "denied by cli alice: not now" {
		t.Fatalf("tool.result data %v", d)
	}
	if !strings.HasSuffix(tr.Output(), "I was not allowed to list the files.") {
		t.Fatalf("output %q", tr.Output())
	}
}

// A permission mode lets claude decide: no prompt tool, no approval.
func TestClaudePermissionMode(t *testing.T) {
	f := newFixture(t)
	rt, _ := f.start(Options{Kind: ProviderClaude, Policy: "acceptEdits"}, history(1, "use-tool"), nil)
	tr := &runnertest.Turn{Input: 1, Approve: func(uint64) (bool, error) {
		t.Error("asked for an approval under a permission mode")
		return false, nil
	}}
	mustTurn(t, rt, inputEvent(1, "use-tool"), tr)
	wantKinds(t, tr, fsm.KindOutput, fsm.KindToolCall, fsm.KindToolResult, fsm.KindOutput)
	r := f.last()
	if !containsRun(r.argv, []string{"--permission-mode", "acceptEdits"}) || slices.Contains(r.argv, "--permission-prompt-tool") {
		t.Fatalf("argv %q", r.argv)
	}
}

// Two prompts before either tool returns: the FSM holds one pending
// approval, so the second is denied at once, telling the model why.
func TestClaudeOneApprovalAtATime(t *testing.T) {
	f := newFixture(t)
	rt, _ := f.start(Options{Kind: ProviderClaude}, history(1, "two-tools"), nil)
	tr := &runnertest.Turn{Input: 1, Approve: func(uint64) (bool, error) { return true, nil }}
	mustTurn(t, rt, inputEvent(1, "two-tools"), tr)
	wantKinds(t, tr, fsm.KindToolCall, fsm.KindToolCall, fsm.KindApprovalRequested, fsm.KindToolResult, fsm.KindToolResult, fsm.KindOutput)
	wantFSMOrder(t, tr.Events())
	var answers []string
	for _, l := range f.last().lines {
		if a, ok := strings.CutPrefix(l, "answer "); ok {
			answers = append(answers, a)
		}
	}
	if len(answers) != 2 || !strings.Contains(answers[0], `"request_id":"perm-A","response":{"behavior":"allow"`) ||
		!strings.Contains(answers[1], `"request_id":"perm-B","response":{"behavior":"deny","message":"fak asks people to approve one tool call at a time`) {
		t.Fatalf("answers %q", answers)
	}
}

// fak answers control requests it does not offer with an error and the
// turn goes on.
func TestClaudeOtherControlRequests(t *testing.T) {
	f := newFixture(t)
	rt, _ := f.start(Options{Kind: ProviderClaude}, history(1, "other-control"), nil)
	tr := &runnertest.Turn{Input: 1}
	mustTurn(t, rt, inputEvent(1, "other-control"), tr)
	want := `{"type":"control_response","response":{"subtype":"error","request_id":"req-x","error":"not supported by fak"}}`
	if got := f.last().line("answer "); got != want {
		t.Fatalf("answer %s,\nwant %s", got, want)
	}
	if tr.Output() != "carried on" {
		t.Fatalf("output %q", tr.Output())
	}
}

// A failed result's usage is charged all the same: the provider billed
// the calls.
func TestClaudeChargesAFailedResult(t *testing.T) {
	f := newFixture(t)
	rt, _ := f.start(Options{Kind: ProviderClaude}, history(1, "provider-error"), nil)
	tr := &runnertest.Turn{Input: 1}
	_, err := proctest.RunTurn(t, rt, inputEvent(1, "provider-error"), tr)
	proctest.WantReason(t, err, ReasonProviderError)
	if c := tr.Charges(); len(c) != 1 || c[0].InputTokens != 5 || c[0].SpendMicros != 1000 {
		t.Fatalf("charges %v", c)
	}
}
