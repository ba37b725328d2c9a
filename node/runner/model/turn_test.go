package model

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/runner"
	"github.com/fak-dev/fak/node/runner/model/modeltest"
	"github.com/fak-dev/fak/node/runner/runnertest"
)

// A text reply streams into output events, its usage is charged at the
// configured price, and the request is RequestBody of the context.
func TestPlainTextTurn(t *testing.T) {
	f := newFixture(t)
	f.srv.Script(modeltest.Reply{Text: "Hello there, friend.", Deltas: 4, Usage: &modeltest.Usage{PromptTokens: 1000, CompletionTokens: 50}})
	j := &journal{}
	rt := f.start(j, nil)
	tr := &runnertest.Turn{}
	res, err := f.turn(rt, j, "hi", tr)
	if err != nil {
		t.Fatal(err)
	}
	if got := tr.Output(); got != "Hello there, friend." {
		t.Fatalf("output %q", got)
	}
	if k := kinds(tr.Events()); k != "output" {
		t.Fatalf("events %s, want only output", k)
	}
	// 1000 × 2 + 50 × 8 = 2400 µunits, the last call's usage: returned for
	// the runner to charge after turn.completed, not charged in the turn.
	if charges := tr.Charges(); len(charges) != 0 {
		t.Fatalf("charges %v during the turn; the last call's usage goes with the result", charges)
	}
	if u := res.Usage; u == nil || u.OutputTokens != 50 || u.SpendMicros != 2400 || u.Queries != 0 {
		t.Fatalf("result usage %v, want 50 output tokens and 2400 µ", u)
	}
	want := map[string]any{FactModel: "gpt-test", FactSteps: 1, FactPromptTokens: int64(1000),
		FactCompletionTokens: int64(50), FactContextTokens: int64(1000), FactToolCalls: 0}
	for k, v := range want {
		if res.Facts[k] != v {
			t.Errorf("fact %s = %v, want %v", k, res.Facts[k], v)
		}
	}
	msgs := f.srv.Requests()[0]
	if m := msgs.Messages(); len(m) != 2 || m[0].Role != "system" || m[1].Role != "user" || m[1].Content != "hi" {
		t.Fatalf("messages %+v", m)
	}
	if !msgs.IncludeUsage() || msgs.Model() != "gpt-test" {
		t.Fatalf("request %s: want model gpt-test and include_usage", msgs.Body)
	}
	// The context the turn saw: everything up to its turn.started.
	f.wantBody(0, "", j.context()[:2])
}

// A tool call whose arguments arrive in fragments is journaled whole,
// waits for its approval, runs, and its result goes back to the model in
// a tool message after the assistant message carrying the call.
func TestToolCallApprovedThenFedBack(t *testing.T) {
	f := newFixture(t, ToolWriteFile)
	args := `{"path":"notes/a.txt","content":"hi there"}`
	f.srv.Script(
		modeltest.Reply{Text: "Writing it.", ToolCalls: []modeltest.ToolCall{{ID: "call_w", Name: ToolWriteFile, Arguments: args, Split: 5}}},
		modeltest.Reply{Text: "Done."},
	)
	j := &journal{}
	rt := f.start(j, nil)
	var asked []uint64
	tr := &runnertest.Turn{Approve: func(seq uint64) (bool, error) { asked = append(asked, seq); return true, nil }}
	res, err := f.turn(rt, j, "write a note", tr)
	if err != nil {
		t.Fatal(err)
	}
	evs := tr.Events()
	if k := kinds(evs); k != "output tool.call approval.requested tool.result output" {
		t.Fatalf("events %s", k)
	}
	callEv := only(evs, fsm.KindToolCall)[0]
	call := decode[callData](t, callEv.Data)
	if call.ID != "call_w" || call.Name != ToolWriteFile || call.Arguments != args || call.Step != 1 || callEv.Text != "write_file "+args {
		t.Fatalf("tool.call %q %+v", callEv.Text, call)
	}
	// runnertest.Turn numbers events as it records them.
	callSeq := uint64(slices.IndexFunc(evs, func(ev runner.Event) bool { return ev.Kind == fsm.KindToolCall }) + 1)
	ap := decode[approvalData](t, only(evs, fsm.KindApprovalRequested)[0].Data)
	if ap.ToolCallID != "call_w" || ap.ToolCallSeq != callSeq || len(asked) != 1 || asked[0] != callSeq+1 {
		t.Fatalf("approval %+v asked at %v; the call is at %d", ap, asked, callSeq)
	}
	resultEv := only(evs, fsm.KindToolResult)[0]
	result := decode[resultData](t, resultEv.Data)
	if !result.OK || result.ID != "call_w" || resultEv.Text != "wrote 8 bytes to notes/a.txt" {
		t.Fatalf("tool.result %q %+v", resultEv.Text, result)
	}
	if b, err := os.ReadFile(filepath.Join(f.ws, "notes/a.txt")); err != nil || string(b) != "hi there" {
		t.Fatalf("workspace file: %q, %v", b, err)
	}
	// The second request: ..., user, assistant (text + the call), tool.
	m := f.srv.Requests()[1].Messages()
	asst, tool := m[len(m)-2], m[len(m)-1]
	if asst.Role != "assistant" || asst.Content != "Writing it." || len(asst.ToolCalls) != 1 ||
		asst.ToolCalls[0] != (modeltest.ToolCall{ID: "call_w", Name: ToolWriteFile, Arguments: args}) {
		t.Fatalf("assistant message %+v", asst)
	}
	if tool.Role != "tool" || tool.ToolCallID != "call_w" || tool.Content != resultEv.Text {
		t.Fatalf("tool message %+v", tool)
	}
	// Both requests are RequestBody of the journal as it stood.
	ctx := j.context()
	f.wantBody(0, "", ctx[:2])
	result1 := slices.IndexFunc(ctx, func(ev *fsmpb.Event) bool { return ev.Kind == fsm.KindToolResult })
	f.wantBody(1, "", ctx[:result1+1])
	// One more query for the second call, one tool call.
	var queries, toolCalls uint64
	for _, c := range tr.Charges() {
		queries += c.Queries
		toolCalls += c.ToolCalls
	}
	if queries != 1 || toolCalls != 1 || res.Facts[FactSteps] != 2 || res.Facts[FactToolCalls] != 1 {
		t.Fatalf("queries %d, tool calls %d, facts %v", queries, toolCalls, res.Facts)
	}
}

// A tool listed in AutoApprove runs without asking.
func TestAutoApproveSkipsApproval(t *testing.T) {
	f := newFixture(t, ToolReadFile, ToolShell)
	f.o.AutoApprove = []string{ToolReadFile}
	if err := os.WriteFile(filepath.Join(f.ws, "a.txt"), []byte("alpha"), 0o644); err != nil {
		t.Fatal(err)
	}
	f.srv.Script(
		modeltest.Reply{ToolCalls: []modeltest.ToolCall{{ID: "c1", Name: ToolReadFile, Arguments: `{"path":"a.txt"}`}}},
		modeltest.Reply{Text: "It says alpha."},
	)
	j := &journal{}
	tr := &runnertest.Turn{Approve: func(uint64) (bool, error) { t.Error("asked for an approval"); return false, nil }}
	if _, err := f.turn(f.start(j, nil), j, "read a.txt", tr); err != nil {
		t.Fatal(err)
	}
	evs := tr.Events()
	if k := kinds(evs); k != "tool.call tool.result output" {
		t.Fatalf("events %s", k)
	}
	if r := only(evs, fsm.KindToolResult)[0]; r.Text != "alpha" {
		t.Fatalf("tool.result %q", r.Text)
	}
	// A tool call with no text opens the assistant message with no content.
	m := f.srv.Requests()[1].Messages()
	if asst := m[len(m)-2]; asst.Role != "assistant" || asst.Content != "" || len(asst.ToolCalls) != 1 {
		t.Fatalf("assistant message %+v", asst)
	}
}

// A denied call does not run; the model is told so and answers.
func TestDeniedApproval(t *testing.T) {
	f := newFixture(t, ToolShell)
	f.srv.Script(
		modeltest.Reply{ToolCalls: []modeltest.ToolCall{{ID: "c1", Name: ToolShell, Arguments: `{"command":"touch ran"}`}}},
		modeltest.Reply{Text: "Understood."},
	)
	j := &journal{}
	tr := &runnertest.Turn{Approve: func(uint64) (bool, error) { return false, nil }}
	if _, err := f.turn(f.start(j, nil), j, "touch a file", tr); err != nil {
		t.Fatal(err)
	}
	evs := tr.Events()
	if k := kinds(evs); k != "tool.call approval.requested tool.result output" {
		t.Fatalf("events %s", k)
	}
	if ap := only(evs, fsm.KindApprovalRequested)[0]; ap.Text != "allow shell: touch ran?" {
		t.Fatalf("approval text %q", ap.Text)
	}
	resultEv := only(evs, fsm.KindToolResult)[0]
	r := decode[resultData](t, resultEv.Data)
	if r.OK || !r.Denied || r.Refused || resultEv.Text != Denied {
		t.Fatalf("tool.result %q %+v", resultEv.Text, r)
	}
	if _, err := os.Stat(filepath.Join(f.ws, "ran")); !os.IsNotExist(err) {
		t.Fatalf("the denied command ran: %v", err)
	}
	for _, c := range tr.Charges() {
		if c.ToolCalls != 0 {
			t.Fatalf("a denied call was charged: %v", c)
		}
	}
	if m := f.srv.Requests()[1].Messages(); m[len(m)-1].Content != Denied {
		t.Fatalf("the model was told %q", m[len(m)-1].Content)
	}
}

// Paths that leave the workspace — by "..", as an absolute path, through
// a symlink — are refused and journaled as refused; nothing outside is
// read or written.
func TestPathEscapesRefused(t *testing.T) {
	f := newFixture(t, ToolReadFile, ToolWriteFile, ToolListFiles)
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	if err := os.WriteFile(secret, []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(f.ws, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../"+filepath.Base(outside), filepath.Join(f.ws, "rel")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(f.ws, "inside"), []byte("ok"), 0o644); err != nil {
		t.Fatal(err)
	}
	calls := []modeltest.ToolCall{
		{ID: "dotdot", Name: ToolReadFile, Arguments: `{"path":"../` + filepath.Base(outside) + `/secret"}`},
		{ID: "abs", Name: ToolReadFile, Arguments: `{"path":"` + secret + `"}`},
		{ID: "symlink", Name: ToolReadFile, Arguments: `{"path":"link/secret"}`},
		{ID: "relsymlink", Name: ToolListFiles, Arguments: `{"path":"rel"}`},
		{ID: "write", Name: ToolWriteFile, Arguments: `{"path":"link/secret","content":"pwned"}`},
		{ID: "absinside", Name: ToolReadFile, Arguments: `{"path":"` + filepath.Join(f.ws, "inside") + `"}`},
	}
	f.srv.Script(modeltest.Reply{ToolCalls: calls}, modeltest.Reply{Text: "ok"})
	j := &journal{}
	var asked atomic.Int32
	tr := &runnertest.Turn{Approve: func(uint64) (bool, error) { asked.Add(1); return true, nil }}
	if _, err := f.turn(f.start(j, nil), j, "escape", tr); err != nil {
		t.Fatal(err)
	}
	results := only(tr.Events(), fsm.KindToolResult)
	if len(results) != len(calls) {
		t.Fatalf("%d results for %d calls", len(results), len(calls))
	}
	for i, r := range results[:5] {
		d := decode[resultData](t, r.Data)
		if !d.Refused || d.OK || d.ID != calls[i].ID || !strings.HasPrefix(r.Text, "refused: ") || strings.Contains(r.Text, "s3cret") {
			t.Errorf("call %s: tool.result %q %+v, want refused", calls[i].ID, r.Text, d)
		}
	}
	if d := decode[resultData](t, results[5].Data); !d.OK || results[5].Text != "ok" {
		t.Errorf("an absolute path inside the workspace: %q %+v", results[5].Text, d)
	}
	if b, _ := os.ReadFile(secret); string(b) != "s3cret" {
		t.Fatalf("the file outside was written: %q", b)
	}
	// Spelled outside: refused before anyone is asked. The symlinks are
	// found when the call runs, after its approval.
	if n := asked.Load(); n != 4 {
		t.Fatalf("%d approvals asked, want 4 (three symlinks, one inside)", n)
	}
}

// A file written in one step is read back in the next.
func TestWriteThenReadFile(t *testing.T) {
	f := newFixture(t, ToolWriteFile, ToolReadFile, ToolListFiles)
	f.o.AutoApprove = []string{ToolWriteFile, ToolReadFile, ToolListFiles}
	f.srv.Script(
		modeltest.Reply{ToolCalls: []modeltest.ToolCall{{ID: "w", Name: ToolWriteFile, Arguments: `{"path":"d/e/f.txt","content":"héllo\n"}`}}},
		modeltest.Reply{ToolCalls: []modeltest.ToolCall{
			{ID: "r", Name: ToolReadFile, Arguments: `{"path":"d/e/f.txt"}`},
			{ID: "l", Name: ToolListFiles, Arguments: `{"path":"d"}`},
		}},
		modeltest.Reply{Text: "Read it back."},
	)
	j := &journal{}
	tr := &runnertest.Turn{}
	res, err := f.turn(f.start(j, nil), j, "round trip", tr)
	if err != nil {
		t.Fatal(err)
	}
	results := only(tr.Events(), fsm.KindToolResult)
	if len(results) != 3 || results[1].Text != "héllo\n" || results[2].Text != "e/" {
		t.Fatalf("results %+v", results)
	}
	if res.Facts[FactSteps] != 3 || res.Facts[FactToolCalls] != 3 {
		t.Fatalf("facts %v", res.Facts)
	}
	// Two calls of one step make one assistant message, then two tool
	// messages in order.
	m := f.srv.Requests()[2].Messages()
	tail := m[len(m)-3:]
	if len(tail[0].ToolCalls) != 2 || tail[1].ToolCallID != "r" || tail[2].ToolCallID != "l" {
		t.Fatalf("messages %+v", tail)
	}
	ctx := j.context()
	last := slices.IndexFunc(ctx, func(ev *fsmpb.Event) bool {
		return ev.Kind == fsm.KindToolResult && decode[resultData](t, ev.Data).ID == "l"
	})
	f.wantBody(2, "", ctx[:last+1])
}

// The next turn's request, built by the runtime that ran the last one and
// by a fresh one started from the journal (a restarted runner, a move's
// destination) whose replica has not applied turn.started yet, are byte
// for byte RequestBody of the journal.
func TestContextRebuiltFromJournalByteForByte(t *testing.T) {
	f := newFixture(t, ToolShell)
	f.o.AutoApprove = []string{ToolShell}
	f.srv.Script(
		modeltest.Reply{Text: "Let me look. ", ToolCalls: []modeltest.ToolCall{
			{ID: "a", Name: ToolShell, Arguments: `{"command":"echo one"}`},
			{ID: "b", Name: ToolShell, Arguments: `{"command":"echo two; exit 4"}`},
		}},
		modeltest.Reply{Text: "One \"and\" <two>.\n", Deltas: 7},
	)
	j := &journal{}
	rt := f.start(j, nil)
	if _, err := f.turn(rt, j, "first", &runnertest.Turn{}); err != nil {
		t.Fatal(err)
	}
	// A note and a queued input land before the next turn starts.
	j.add(fsm.KindNote, "a note", nil)
	in := j.add(fsm.KindInput, "second", nil)
	queued := j.add(fsm.KindInput, "third, queued", nil)
	fresh := f.start(j, nil) // before turn.started is applied here
	j.add(fsm.KindTurnStarted, "", map[string]any{"input_seq": in.Seq})
	ctx := j.context()

	for n, rtm := range []runner.Runtime{rt, fresh} {
		f.srv.Script(modeltest.Reply{Text: "ok"})
		if _, err := runnertest.Run(context.Background(), rtm, in, &runnertest.Turn{Input: in.Seq}); err != nil {
			t.Fatal(err)
		}
		f.wantBody(2+n, "", ctx)
	}
	m := f.srv.Requests()[2].Messages()
	var roles []string
	for _, msg := range m {
		roles = append(roles, msg.Role)
	}
	if got := strings.Join(roles, " "); got != "system user assistant tool tool assistant user" {
		t.Fatalf("roles %s", got)
	}
	if m[3].Content != "one\n" || m[4].Content != "two\n[exit status 4]" || m[5].Content != "One \"and\" <two>.\n" || m[6].Content != "second" {
		t.Fatalf("messages %+v", m)
	}
	for _, msg := range m {
		if msg.Content == queued.Text || msg.Content == "a note" {
			t.Fatalf("sent %q, which is not in the context", msg.Content)
		}
	}
	// A caller that cuts the context at the input gets the same body.
	cut := slices.IndexFunc(ctx, func(ev *fsmpb.Event) bool { return ev.Seq == in.Seq })
	f.wantBody(2, "", ctx[:cut+1])
}

// After a reset only the events after the boundary are sent.
func TestResetBoundary(t *testing.T) {
	f := newFixture(t)
	j := &journal{}
	if _, err := f.turn(f.start(j, nil), j, "before the reset", &runnertest.Turn{}); err != nil {
		t.Fatal(err)
	}
	full := slices.Clone(j.evs)
	j.reset()
	rt := f.start(j, nil) // a reset retires the runtime; the next starts afresh
	f.srv.Script(modeltest.Reply{Text: "fresh"})
	if _, err := f.turn(rt, j, "after the reset", &runnertest.Turn{}); err != nil {
		t.Fatal(err)
	}
	m := f.srv.Requests()[1].Messages()
	if len(m) != 2 || m[1].Content != "after the reset" {
		t.Fatalf("messages after the reset %+v", m)
	}
	// Messages cuts a full journal at its last boundary itself.
	all := append(full, j.evs[len(full):]...)
	f.wantBody(1, "", all[:len(all)-2])
}

// budgetTurn refuses query charges: the envelope is exhausted.
type budgetTurn struct{ *runnertest.Turn }

var errExhausted = &fsm.Error{Reason: fsm.ReasonBudgetExhausted, Message: "queries budget of session s1 is exhausted"}

func (b budgetTurn) Charge(ctx context.Context, u *fsmpb.Budget) error {
	if u.Queries > 0 {
		return errExhausted
	}
	return b.Turn.Charge(ctx, u)
}

// An exhausted budget stops the loop before the next model call, with the
// refusal as the turn's error.
func TestBudgetExhaustedBeforeNextCall(t *testing.T) {
	f := newFixture(t, ToolListFiles)
	f.o.AutoApprove = []string{ToolListFiles}
	f.srv.Script(modeltest.Reply{ToolCalls: []modeltest.ToolCall{{ID: "l", Name: ToolListFiles, Arguments: `{}`}}})
	j := &journal{}
	tr := &runnertest.Turn{}
	in := j.input("list")
	_, err := f.start(j, nil).Turn(context.Background(), in, budgetTurn{tr})
	if fsm.ReasonOf(err) != fsm.ReasonBudgetExhausted {
		t.Fatalf("error %v, want BUDGET_EXHAUSTED", err)
	}
	if n := f.srv.Stats().Requests; n != 1 {
		t.Fatalf("%d model calls, want 1", n)
	}
	if k := kinds(tr.Events()); k != "tool.call tool.result" {
		t.Fatalf("events %s", k)
	}
}

// 429 with Retry-After is retried after the wait it asks for.
func TestRateLimitRetriedAfterRetryAfter(t *testing.T) {
	f := newFixture(t)
	f.srv.Script(modeltest.ErrorReply(429, "Rate limit reached", "Retry-After", "1"), modeltest.Reply{Text: "finally"})
	j := &journal{}
	tr := &runnertest.Turn{}
	if _, err := f.turn(f.start(j, nil), j, "hi", tr); err != nil {
		t.Fatal(err)
	}
	reqs := f.srv.Requests()
	if len(reqs) != 2 || tr.Output() != "finally" {
		t.Fatalf("%d requests, output %q", len(reqs), tr.Output())
	}
	if wait := reqs[1].Received.Sub(reqs[0].Received); wait < time.Second {
		t.Fatalf("retried after %s, Retry-After said 1s", wait)
	}
	if string(reqs[0].Body) != string(reqs[1].Body) {
		t.Fatal("the retry sent another body")
	}
}

// Retries are bounded; the failure names the status and message.
func TestRetriesExhausted(t *testing.T) {
	for _, tc := range []struct {
		status int
		reason string
	}{{503, ReasonUpstreamUnavailable}, {429, ReasonUpstreamRateLimited}} {
		f := newFixture(t)
		f.o.MaxRetries = 2
		for range 3 {
			f.srv.Script(modeltest.ErrorReply(tc.status, "try later", "Retry-After-Ms", "5"))
		}
		j := &journal{}
		_, err := f.turn(f.start(j, nil), j, "hi", &runnertest.Turn{})
		wantReason(t, err, tc.reason, strconv.Itoa(tc.status)+" "+http.StatusText(tc.status)+": try later (after 3 attempts)")
		if n := f.srv.Stats().Requests; n != 3 {
			t.Fatalf("%d requests, want 3", n)
		}
	}
}

// 401 and 404 fail at once, with the upstream message.
func TestAuthAndNotFoundFailAtOnce(t *testing.T) {
	for _, tc := range []struct {
		status      int
		msg, reason string
	}{
		{401, "Incorrect API key provided: sk-bad.", ReasonUpstreamAuth},
		{403, "Project does not have access to model", ReasonUpstreamAuth},
		{404, "The model `gpt-nope` does not exist", ReasonUpstreamNotFound},
	} {
		f := newFixture(t)
		f.srv.Script(modeltest.ErrorReply(tc.status, tc.msg))
		j := &journal{}
		_, err := f.turn(f.start(j, nil), j, "hi", &runnertest.Turn{})
		wantReason(t, err, tc.reason, strconv.Itoa(tc.status)+" "+http.StatusText(tc.status)+": "+tc.msg)
		if n := f.srv.Stats().Requests; n != 1 {
			t.Fatalf("%d: %d requests, want 1", tc.status, n)
		}
	}
}

// A malformed chunk fails the turn; the text before it stays journaled.
func TestMalformedChunk(t *testing.T) {
	f := newFixture(t)
	f.srv.Script(modeltest.Reply{Text: "one two three", Fault: modeltest.Malformed, FaultAfter: 2})
	j := &journal{}
	tr := &runnertest.Turn{}
	_, err := f.turn(f.start(j, nil), j, "hi", tr)
	wantReason(t, err, ReasonUpstreamProtocol, "malformed chunk")
	if tr.Output() != "one two " || f.srv.Stats().Requests != 1 {
		t.Fatalf("output %q after %d requests", tr.Output(), f.srv.Stats().Requests)
	}
}

// A stream cut after text fails the turn (a retry would journal a second
// beginning); cut before any text, the call is retried.
func TestStreamCut(t *testing.T) {
	f := newFixture(t)
	f.srv.Script(modeltest.Reply{Text: "one two three", Fault: modeltest.Cut, FaultAfter: 2})
	j := &journal{}
	tr := &runnertest.Turn{}
	_, err := f.turn(f.start(j, nil), j, "hi", tr)
	wantReason(t, err, ReasonUpstreamStreamCut)
	if tr.Output() != "one two " || f.srv.Stats().Requests != 1 {
		t.Fatalf("output %q after %d requests", tr.Output(), f.srv.Stats().Requests)
	}

	f.srv.Script(modeltest.Reply{Text: "lost", Fault: modeltest.Cut, FaultAfter: 0, Header: map[string][]string{"Retry-After-Ms": {"1"}}},
		modeltest.Reply{Text: "whole"})
	tr = &runnertest.Turn{}
	if _, err := f.turn(f.start(j, nil), j, "again", tr); err != nil {
		t.Fatal(err)
	}
	if tr.Output() != "whole" || f.srv.Stats().Requests != 3 {
		t.Fatalf("output %q after %d requests", tr.Output(), f.srv.Stats().Requests)
	}
}

// A stream that ends cleanly but without finish_reason and [DONE] is cut
// too.
func TestStreamEndingEarlyIsCut(t *testing.T) {
	f := newFixture(t)
	f.o.MaxRetries = -1
	f.srv.Script(modeltest.Reply{Text: "x y", Fault: modeltest.End, FaultAfter: 1})
	j := &journal{}
	_, err := f.turn(f.start(j, nil), j, "hi", &runnertest.Turn{})
	wantReason(t, err, ReasonUpstreamStreamCut)
}

// Cancelling the turn (an interrupt) cancels the stream at once.
func TestInterruptCancelsStream(t *testing.T) {
	f := newFixture(t)
	f.srv.Script(modeltest.Reply{Text: "partial answer", Fault: modeltest.Hang, FaultAfter: 1})
	j := &journal{}
	rt := f.start(j, nil)
	in := j.input("hi")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := runnertest.Run(ctx, rt, in, &runnertest.Turn{Input: in.Seq})
		done <- err
	}()
	wait, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	if err := f.srv.WaitFor(wait, func(s modeltest.Stats) bool { return s.Hanging == 1 }); err != nil {
		t.Fatal("the stream never reached its hang")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("error %v, want context.Canceled", err)
		}
	case <-wait.Done():
		t.Fatal("the turn did not end after its context was cancelled")
	}
	// The connection was closed, not left open behind the turn.
	if err := f.srv.WaitFor(wait, func(s modeltest.Stats) bool { return s.Gone == 1 }); err != nil {
		t.Fatal("the server never saw the client leave")
	}
}

// An endpoint that goes silent times out.
func TestStallTimesOut(t *testing.T) {
	f := newFixture(t)
	f.o.StallTimeout = 100 * time.Millisecond
	f.o.MaxRetries = 1
	f.srv.Script(modeltest.Reply{Fault: modeltest.Hang}, modeltest.Reply{Fault: modeltest.Hang})
	j := &journal{}
	_, err := f.turn(f.start(j, nil), j, "hi", &runnertest.Turn{})
	wantReason(t, err, ReasonUpstreamTimeout, "sent nothing for 100ms", "after 2 attempts")
}

// The turn's own limit ends it as TURN_TIMEOUT.
func TestTurnTimeout(t *testing.T) {
	f := newFixture(t)
	f.o.TurnTimeout = 200 * time.Millisecond
	f.srv.Script(modeltest.Reply{Text: "slow", Fault: modeltest.Hang, FaultAfter: 1})
	j := &journal{}
	tr := &runnertest.Turn{}
	_, err := f.turn(f.start(j, nil), j, "hi", tr)
	wantReason(t, err, ReasonTurnTimeout, "200ms")
	if tr.Output() != "slow" {
		t.Fatalf("the text streamed before the timeout was lost: %q", tr.Output())
	}
}

// The placement's model and account win over the runtime's; the key is
// the account's, never the node's OPENAI_API_KEY.
func TestPlacementModelAndAccount(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-node-env")
	f := newFixture(t)
	f.o.AccountRef = "default"
	f.o.ResolveKey = func(ref string) (string, error) {
		if ref == "missing" {
			return "", errors.New("no api_key_env set")
		}
		return "sk-" + ref, nil
	}
	j := &journal{}
	if _, err := f.turn(f.start(j, &fsmpb.Placement{Model: "gpt-big", AccountRef: "team"}), j, "hi", &runnertest.Turn{}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.turn(f.start(j, nil), j, "hi", &runnertest.Turn{}); err != nil {
		t.Fatal(err)
	}
	reqs := f.srv.Requests()
	if reqs[0].Model() != "gpt-big" || reqs[0].Header.Get("Authorization") != "Bearer sk-team" {
		t.Fatalf("placement: model %q, auth %q", reqs[0].Model(), reqs[0].Header.Get("Authorization"))
	}
	if reqs[1].Model() != "gpt-test" || reqs[1].Header.Get("Authorization") != "Bearer sk-default" {
		t.Fatalf("defaults: model %q, auth %q", reqs[1].Model(), reqs[1].Header.Get("Authorization"))
	}
	f.o.AccountRef = ""
	if _, err := f.turn(f.start(j, nil), j, "hi", &runnertest.Turn{}); err != nil {
		t.Fatal(err)
	}
	if auth := f.srv.Requests()[2].Header.Get("Authorization"); auth != "" {
		t.Fatalf("no account, yet Authorization %q", auth)
	}
	_, err := f.turn(f.start(j, &fsmpb.Placement{AccountRef: "missing"}), j, "hi", &runnertest.Turn{})
	wantReason(t, err, ReasonAccountUnresolved, `account "missing"`)
}

// The loop stops after MaxSteps model calls.
func TestMaxSteps(t *testing.T) {
	f := newFixture(t, ToolListFiles)
	f.o.AutoApprove = []string{ToolListFiles}
	f.o.MaxSteps = 2
	for range 3 {
		f.srv.Script(modeltest.Reply{ToolCalls: []modeltest.ToolCall{{ID: "l", Name: ToolListFiles, Arguments: `{}`}}})
	}
	j := &journal{}
	_, err := f.turn(f.start(j, nil), j, "loop", &runnertest.Turn{})
	wantReason(t, err, ReasonMaxSteps, "2 model calls")
	if n := f.srv.Stats().Requests; n != 2 {
		t.Fatalf("%d requests, want 2", n)
	}
}

// A call streamed without an id gets one, journaled and sent back.
func TestToolCallWithoutID(t *testing.T) {
	f := newFixture(t, ToolListFiles)
	f.o.AutoApprove = []string{ToolListFiles}
	f.srv.Script(modeltest.Reply{ToolCalls: []modeltest.ToolCall{{Name: ToolListFiles, Arguments: `{}`}}}, modeltest.Reply{Text: "empty"})
	j := &journal{}
	tr := &runnertest.Turn{}
	if _, err := f.turn(f.start(j, nil), j, "ls", tr); err != nil {
		t.Fatal(err)
	}
	id := decode[callData](t, only(tr.Events(), fsm.KindToolCall)[0].Data).ID
	if id != "call_1_1_1" {
		t.Fatalf("made-up id %q", id)
	}
	if m := f.srv.Requests()[1].Messages(); m[len(m)-1].ToolCallID != id {
		t.Fatalf("the tool message answers %q", m[len(m)-1].ToolCallID)
	}
}

// Large arguments are journaled whole once, in the tool.call's data; the
// texts people read are cut.
func TestLargeArgumentsJournaledWholeOnce(t *testing.T) {
	f := newFixture(t, ToolWriteFile)
	content := strings.Repeat("0123456789", 1000)
	args := `{"path":"big.txt","content":"` + content + `"}`
	f.srv.Script(modeltest.Reply{ToolCalls: []modeltest.ToolCall{{ID: "w", Name: ToolWriteFile, Arguments: args, Split: 50}}}, modeltest.Reply{Text: "ok"})
	j := &journal{}
	tr := &runnertest.Turn{}
	if _, err := f.turn(f.start(j, nil), j, "write", tr); err != nil {
		t.Fatal(err)
	}
	callEv := only(tr.Events(), fsm.KindToolCall)[0]
	if decode[callData](t, callEv.Data).Arguments != args || len(callEv.Text) > maxLabel+len("…") || !strings.HasSuffix(callEv.Text, "…") {
		t.Fatalf("tool.call text of %d bytes", len(callEv.Text))
	}
	if ap := only(tr.Events(), fsm.KindApprovalRequested)[0]; ap.Text != "allow write_file: big.txt (10000 bytes)?" || strings.Contains(string(ap.Data), content) {
		t.Fatalf("approval %q %s", ap.Text, ap.Data)
	}
	if b, _ := os.ReadFile(filepath.Join(f.ws, "big.txt")); string(b) != content {
		t.Fatal("the file holds something else")
	}
}

// BenchmarkTextTurn is a one-call turn against the fake server on
// loopback: the runtime's own cost around a model call.
func BenchmarkTextTurn(b *testing.B) {
	f := newFixture(b)
	j := &journal{}
	rt := f.start(j, nil)
	in := j.input("hello there")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := runnertest.Run(context.Background(), rt, in, &runnertest.Turn{Input: in.Seq}); err != nil {
			b.Fatal(err)
		}
	}
}

// An endpoint that answers with something other than an event stream, or
// not at all, fails the turn saying so.
func TestNotAStreamAndNoEndpoint(t *testing.T) {
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"choices":[]}`))
	}))
	defer plain.Close()
	f := newFixture(t)
	f.o.Endpoint = plain.URL + "/v1"
	j := &journal{}
	_, err := f.turn(f.start(j, nil), j, "hi", &runnertest.Turn{})
	wantReason(t, err, ReasonUpstreamProtocol, `200: the endpoint answered with Content-Type "application/json", not an event stream`)

	plain.Close()
	f.o.MaxRetries = -1
	_, err = f.turn(f.start(j, nil), j, "hi", &runnertest.Turn{})
	wantReason(t, err, ReasonUpstreamUnavailable, "connection refused")
}
