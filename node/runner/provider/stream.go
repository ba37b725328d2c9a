package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"time"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/runner"
	"github.com/fak-dev/fak/node/runner/proc"
)

// stream is one turn's process in progress: its lines read one by one,
// each mapped to journal events by the dialect's handler, in the order
// the FSM requires (text flushed before any other event, one pending
// approval at a time).
type stream struct {
	rt      *runtime
	ctx     context.Context // the runner's: writes
	tctx    context.Context // bounded by the turn timeout: the process, waits for people
	t       runner.Turn
	pr      *proc.Piped
	out     *runner.Output
	lines   *proc.LineReader
	resumed string // the thread the process resumes ("": a new one)

	thread    string // the thread the CLI named, bound on the turn
	emitted   bool   // something reached the journal (or the output stream)
	said      bool   // text was written this turn
	broke     bool   // another event came after the last text
	approval  bool   // an approval.requested waits for a tool.result (the FSM's pending approval)
	toolCalls uint64 // tool calls seen, for the usage charged
	failure   string // an error the CLI reported before its end (codex, gemini)
	end       *ending
}

// ending is the CLI's final line, read.
type ending struct {
	failure string         // the CLI reported the turn failed: PROVIDER_ERROR
	facts   map[string]any // added to turn.completed's data
	usage   *fsmpb.Budget  // what the CLI reported; charged unless a gateway metered it
}

// run reads lines until the CLI's result (then finish) or the end of its
// stdout.
func (s *stream) run(h handler) (runner.TurnResult, error) {
	h.begin(s)
	for s.end == nil {
		if err := s.tctx.Err(); err != nil {
			return runner.TurnResult{}, err
		}
		line, err := s.lines.Next()
		switch {
		case errors.Is(err, io.EOF):
			return runner.TurnResult{}, s.endedEarly()
		case errors.Is(err, proc.ErrLineTooLong):
			return runner.TurnResult{}, s.fail("%v", err)
		case err != nil:
			return runner.TurnResult{}, fmt.Errorf("reading %s's stdout: %w", s.rt.o.Kind, err)
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		typ, err := lineType(line)
		if err != nil {
			return runner.TurnResult{}, s.fail("%v", err)
		}
		if err := h.line(s, typ, line); err != nil {
			return runner.TurnResult{}, err
		}
	}
	return s.finish()
}

// fail ends the turn for a protocol error on the line last read: the
// group is killed at once.
func (s *stream) fail(format string, args ...any) error {
	s.pr.Kill()
	return runner.Failf(ReasonRuntimeProtocol, "line %d: %s", s.lines.N(), fmt.Sprintf(format, args...))
}

// bind records the thread the CLI names, as soon as it names it: the
// runner binds it on the session whatever the turn's outcome.
func (s *stream) bind(id string) {
	if id != "" && id != s.thread {
		s.thread = id
		s.t.Bind(s.rt.o.Kind, id)
	}
}

// text streams assistant text. A whole message (claude, codex) is set
// off from the text before it by a blank line, and so is text after a
// tool call; deltas (gemini) join as they come.
func (s *stream) text(text string, whole bool) error {
	if text == "" {
		return nil
	}
	if s.said && (whole || s.broke) {
		text = "\n\n" + text
	}
	s.said, s.broke, s.emitted = true, false, true
	return s.out.Write(text)
}

// emit journals one event after the text before it, keeping the FSM's
// approval state: approval.requested makes one pending, the next
// tool.result clears it.
func (s *stream) emit(ev runner.Event) (uint64, error) {
	if err := s.out.Flush(); err != nil {
		return 0, err
	}
	seq, err := s.t.Emit(s.ctx, ev)
	if err != nil {
		return 0, err
	}
	s.emitted, s.broke = true, true
	switch ev.Kind {
	case fsm.KindApprovalRequested:
		s.approval = true
	case fsm.KindToolResult:
		s.approval = false
	}
	return seq, nil
}

// toolCall journals a tool.call: its text "name: what it does", its data
// the id, name and input (cut when huge) and extra.
func (s *stream) toolCall(id, name string, input json.RawMessage, extra map[string]any) error {
	s.toolCalls++
	in, cut := rawJSON(input)
	data := map[string]any{"id": id, "name": name, "input": in}
	if cut {
		data["input_truncated"] = true
	}
	maps.Copy(data, extra)
	text := name
	if sum := inputSummary(input); sum != "" && sum != "null" {
		text += ": " + sum
	}
	_, err := s.emit(runner.Event{Kind: fsm.KindToolCall, Text: runner.Truncate(text, summaryBytes), Data: marshal(data)})
	return err
}

// toolResult journals a tool.result: its text the output (cut), its data
// the call's id, whether it failed and extra.
func (s *stream) toolResult(id, output string, isError bool, extra map[string]any) error {
	data := map[string]any{"tool_use_id": id, "is_error": isError}
	maps.Copy(data, extra)
	_, err := s.emit(runner.Event{Kind: fsm.KindToolResult, Text: runner.Truncate(output, toolTextBytes), Data: marshal(data)})
	return err
}

// finish: the CLI wrote its result. Its stdin closes and it has exitGrace
// to exit; what it still writes is not the turn's and is dropped. A CLI
// that lingers past its result (an MCP server shutting down) is killed:
// its answer is complete.
func (s *stream) finish() (runner.TurnResult, error) {
	resultAt := s.lines.N()
	s.pr.CloseStdin()
	grace := time.AfterFunc(s.rt.exitGrace, s.pr.Kill) // its stdout then ends too
	defer grace.Stop()
	if n := s.lines.Discard(); n > 0 {
		s.rt.o.Logger.Debug("dropped output after the result", "session", s.rt.ep.SessionID, "provider", s.rt.o.Kind, "bytes", n)
	}
	exited := s.pr.WaitExit(s.rt.exitGrace)
	if err := s.tctx.Err(); err != nil {
		return runner.TurnResult{}, err
	}
	if s.end.failure != "" {
		if err := s.chargeFailed(); err != nil {
			return runner.TurnResult{}, err
		}
		return runner.TurnResult{}, runner.Failf(ReasonProviderError, "%s", s.end.failure)
	}
	if !exited {
		s.rt.o.Logger.Warn("the CLI did not exit after its result; its group was killed",
			"session", s.rt.ep.SessionID, "provider", s.rt.o.Kind, "line", resultAt)
	} else if err := s.pr.ExitStatus(ReasonRuntimeExit, fmt.Sprintf("after its result (line %d)", resultAt)); err != nil {
		return runner.TurnResult{}, err
	}
	tail, err := s.out.Detach()
	if err != nil {
		return runner.TurnResult{}, err
	}
	facts := map[string]any{"provider": s.rt.o.Kind, "resumed": s.resumed != ""}
	if s.thread != "" {
		facts["thread_id"] = s.thread
	}
	maps.Copy(facts, s.end.facts)
	res := runner.TurnResult{Facts: facts, Tail: tail}
	if s.rt.o.Gateway == nil {
		res.Usage = s.end.usage
	}
	return res, nil
}

// endedEarly: stdout ended without a result. An error the CLI reported
// says why; else a CLI that exited non-zero failed (its stderr says why),
// one that exited 0 or kept running broke the protocol.
func (s *stream) endedEarly() error {
	exited := s.pr.WaitExit(s.rt.exitGrace)
	if err := s.tctx.Err(); err != nil {
		return err
	}
	if s.failure != "" {
		return runner.Failf(ReasonProviderError, "%s", s.failure)
	}
	if !exited {
		return runner.Failf(ReasonRuntimeProtocol, "%s closed its stdout without a result; its group was killed", s.rt.o.Kind)
	}
	if err := s.pr.ExitStatus(ReasonRuntimeExit, "before its result"); err != nil {
		return err
	}
	return runner.Failf(ReasonRuntimeProtocol, "%s exited without a result (exit status 0, after %d lines)", s.rt.o.Kind, s.lines.N())
}

// stillborn reports whether a resumed process failed before the CLI
// named the thread, wrote its result or anything reached the journal:
// the thread could not be opened, and a new one loses nothing.
func (s *stream) stillborn(err error) bool {
	if s == nil || err == nil || s.thread != "" || s.emitted || s.end != nil {
		return false
	}
	var te *runner.TurnError
	return errors.As(err, &te) && (te.Reason == ReasonRuntimeExit || te.Reason == ReasonProviderError)
}

// furtherQueries is the queries a turn charges for its model calls: the
// runner charged the first with turn.started.
func furtherQueries(calls uint64) uint64 {
	if calls <= 1 {
		return 0
	}
	return calls - 1
}

// chargeFailed charges what a failed turn's model calls used, as the CLI
// reported it: the runner charges nothing for a failed turn, yet the
// provider billed the calls. A refusal (BUDGET_EXHAUSTED) becomes the
// turn's error.
func (s *stream) chargeFailed() error {
	u := s.end.usage
	if s.rt.o.Gateway != nil || u == nil || (u.InputTokens == 0 && u.OutputTokens == 0 &&
		u.SpendMicros == 0 && u.ToolCalls == 0 && u.Queries == 0) {
		return nil
	}
	if err := s.out.Flush(); err != nil {
		return err
	}
	return s.t.Charge(s.ctx, u)
}
