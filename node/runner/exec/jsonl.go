package exec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/runner"
	"github.com/fak-dev/fak/node/runner/proc"
)

// maxEventBytes is the API's default bound on one event (text + data): a
// line that would make a bigger event fails the turn as a protocol error
// rather than as a refused write.
const maxEventBytes = 1 << 20

// toolCallTextBytes bounds the summary a tool.call event carries as text;
// its data holds the whole input.
const toolCallTextBytes = 1 << 10

// jsonlTurn speaks fak runtime protocol v1: the turn line in, the
// process's lines out until done.
func (rt *runtime) jsonlTurn(ctx, tctx context.Context, in *fsmpb.Event, t runner.Turn) (runner.TurnResult, error) {
	events, err := rt.history.forTurn(in.Seq)
	if err != nil {
		return runner.TurnResult{}, err
	}
	line, err := encodeLine(turnLine{
		Type: "turn", Protocol: protocolVersion,
		SessionID: rt.ep.SessionID, Epoch: rt.ep.Epoch,
		Input:   turnInput{Seq: in.Seq, Text: in.Text},
		Context: events,
	})
	if err != nil {
		return runner.TurnResult{}, err
	}
	// Deferred first, so it runs last: the group is dead before the
	// output left is journaled.
	out := newTextStream(runner.NewOutput(ctx, t))
	defer out.close()
	pr, err := startProcess(tctx, rt.spec(in))
	if err != nil {
		return runner.TurnResult{}, err
	}
	defer pr.Stop()
	pr.Send(line)
	x := &exchange{
		ctx: ctx, tctx: tctx, t: t, pr: pr, out: out,
		lines: proc.NewLineReader(pr, maxLineBytes), exitGrace: rt.exitGrace,
		calls: map[string]*toolCall{},
	}
	return x.run()
}

// exchange is one jsonl turn in progress: what the process has said so
// far, checked against the protocol's ordering rules before anything
// reaches the journal, so the FSM never has to refuse a write of ours
// because the process broke them.
type exchange struct {
	ctx       context.Context // the runner's: writes
	tctx      context.Context // bounded by the turn timeout: waits for people
	t         runner.Turn
	pr        *proc.Piped
	out       *textStream
	lines     *proc.LineReader
	exitGrace time.Duration

	calls       map[string]*toolCall // this turn's tool calls by id
	awaiting    string               // an approval answered whose tool.result has not come
	inputTokens uint64
}

type toolCall struct {
	name     string
	answered bool // its tool.result came
}

func (x *exchange) run() (runner.TurnResult, error) {
	for {
		if err := x.tctx.Err(); err != nil {
			return runner.TurnResult{}, err
		}
		line, err := x.lines.Next()
		switch {
		case errors.Is(err, io.EOF):
			return runner.TurnResult{}, x.endedBeforeDone()
		case errors.Is(err, proc.ErrLineTooLong):
			return runner.TurnResult{}, x.fail("%v", err)
		case err != nil:
			return runner.TurnResult{}, fmt.Errorf("reading the process's stdout: %w", err)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		msg, err := decodeLine(line)
		if err != nil {
			return runner.TurnResult{}, x.fail("%v", err)
		}
		if d, ok := msg.(doneLine); ok {
			return x.done(d)
		}
		if err := x.handle(msg); err != nil {
			return runner.TurnResult{}, err
		}
	}
}

// fail ends the turn for a protocol error on the line last read: the
// group is killed at once.
func (x *exchange) fail(format string, args ...any) error {
	x.pr.Kill()
	return runner.Failf(ReasonRuntimeProtocol, "line %d: %s", x.lines.N(), fmt.Sprintf(format, args...))
}

// handle acts on one line other than done.
func (x *exchange) handle(msg any) error {
	switch m := msg.(type) {
	case outputLine:
		return x.out.write([]byte(m.text))
	case toolCallLine:
		if _, dup := x.calls[m.id]; dup {
			return x.fail("tool.call %q: the id is already used in this turn", m.id)
		}
		x.calls[m.id] = &toolCall{name: m.name}
		summary := runner.Truncate(m.name+" "+string(m.input), toolCallTextBytes)
		_, err := x.emit(runner.Event{Kind: fsm.KindToolCall, Text: summary,
			Data: marshal(map[string]any{"id": m.id, "name": m.name, "input": m.input})})
		return err
	case toolResultLine:
		call, ok := x.calls[m.id]
		switch {
		case !ok:
			return x.fail("tool.result %q names no tool.call of this turn", m.id)
		case call.answered:
			return x.fail("tool.result %q: that tool call already has its result", m.id)
		}
		call.answered = true
		x.awaiting = ""
		_, err := x.emit(runner.Event{Kind: fsm.KindToolResult, Text: m.output,
			Data: marshal(map[string]any{"id": m.id, "name": call.name, "is_error": m.isError})})
		return err
	case approvalRequestLine:
		return x.approval(m)
	case usageLine:
		return x.charge(m)
	}
	return x.fail("unhandled line %T", msg)
}

// emit journals one event after the output before it.
func (x *exchange) emit(ev runner.Event) (uint64, error) {
	if n := len(ev.Text) + len(ev.Data); n > maxEventBytes {
		return 0, x.fail("the %s would be a %d-byte event; the limit is %d", ev.Kind, n, maxEventBytes)
	}
	if err := x.out.flush(); err != nil {
		return 0, err
	}
	return x.t.Emit(x.ctx, ev)
}

// approval journals the request, waits for a person's answer and hands it
// to the process. The FSM allows one pending approval, cleared by a
// tool.result: a second request before that is the process's error.
func (x *exchange) approval(m approvalRequestLine) error {
	if x.awaiting != "" {
		return x.fail("approval.request %q before a tool.result followed approval %q (each approval is followed by the tool.result it gated)", m.id, x.awaiting)
	}
	seq, err := x.emit(runner.Event{Kind: fsm.KindApprovalRequested, Text: m.text,
		Data: marshal(map[string]any{"id": m.id})})
	if err != nil {
		return err
	}
	approved, err := x.t.AwaitApproval(x.tctx, seq)
	if err != nil {
		return err
	}
	x.awaiting = m.id
	answer, err := encodeLine(approvalAnswer{Type: "approval.answer", ID: m.id, Approved: approved})
	if err != nil {
		return err
	}
	x.pr.Send(answer)
	return nil
}

// charge charges the usage the process measured to the session's budget
// envelope. A refusal (BUDGET_EXHAUSTED) ends the turn: the group dies and
// the refusal is the turn's error.
func (x *exchange) charge(m usageLine) error {
	x.inputTokens += m.inputTokens
	b := &fsmpb.Budget{OutputTokens: m.outputTokens, SpendMicros: m.spendMicros, ToolCalls: m.toolCalls, Queries: m.queries}
	if b.OutputTokens == 0 && b.SpendMicros == 0 && b.ToolCalls == 0 && b.Queries == 0 {
		return nil
	}
	if err := x.out.flush(); err != nil {
		return err
	}
	if err := x.t.Charge(x.ctx, b); err != nil {
		x.pr.Kill()
		return err
	}
	return nil
}

// done: stdin closes and the process has exitGrace to exit; nothing may
// follow done on its stdout.
func (x *exchange) done(d doneLine) (runner.TurnResult, error) {
	doneAt := x.lines.N()
	x.pr.CloseStdin()
	grace := time.AfterFunc(x.exitGrace, x.pr.Kill) // its stdout then ends too
	defer grace.Stop()
	for {
		line, err := x.lines.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil && !errors.Is(err, proc.ErrLineTooLong) {
			return runner.TurnResult{}, fmt.Errorf("reading the process's stdout: %w", err)
		}
		if err != nil || len(bytes.TrimSpace(line)) > 0 {
			return runner.TurnResult{}, x.fail("output after done (line %d)", doneAt)
		}
	}
	if !x.pr.WaitExit(x.exitGrace) {
		if err := x.tctx.Err(); err != nil {
			return runner.TurnResult{}, err
		}
		return runner.TurnResult{}, runner.Failf(ReasonRuntimeProtocol,
			"line %d: the process did not exit within %s of done; its group was killed", doneAt, x.exitGrace)
	}
	if err := x.pr.ExitStatus(ReasonExitStatus, "after done"); err != nil {
		return runner.TurnResult{}, err
	}
	if err := x.out.close(); err != nil {
		return runner.TurnResult{}, err
	}
	facts := map[string]any{"exit_code": 0, "pid": x.pr.Pid()}
	if x.inputTokens > 0 {
		facts["input_tokens"] = x.inputTokens
	}
	return runner.TurnResult{Summary: d.summary, Facts: facts}, nil
}

// endedBeforeDone: stdout ended without done. A process that exited
// non-zero crashed (its stderr says why); one that exited 0 or kept
// running broke the protocol.
func (x *exchange) endedBeforeDone() error {
	exited := x.pr.WaitExit(x.exitGrace)
	if err := x.tctx.Err(); err != nil {
		return err
	}
	if !exited {
		return runner.Failf(ReasonRuntimeProtocol, "the process closed its stdout before done; its group was killed")
	}
	if err := x.pr.ExitStatus(ReasonExitStatus, "before done"); err != nil {
		return err
	}
	return runner.Failf(ReasonRuntimeProtocol, "the process exited before done (exit status 0, after %d lines)", x.lines.N())
}

// marshal is an event's JSON data (of values that always marshal).
func marshal(v any) []byte {
	b, _ := encodeLine(v)
	return bytes.TrimSuffix(b, []byte("\n"))
}
