package model

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/runner"
)

var errTurnTimeout = errors.New("turn timeout")

// Facts of turn.completed.
const (
	FactModel            = "model"
	FactSteps            = "steps"             // model calls made
	FactPromptTokens     = "prompt_tokens"     // summed over the calls
	FactCompletionTokens = "completion_tokens" // summed over the calls
	FactContextTokens    = "context_tokens"    // the last call's prompt: the context's size
	FactToolCalls        = "tool_calls"        // tool calls that ran
)

// Turn runs the loop: rebuild the context, call the model, run the tools
// it asks for, and call it again with their results, until it answers
// without tool calls.
func (rt *runtime) Turn(ctx context.Context, in *fsmpb.Event, t runner.Turn) (runner.TurnResult, error) {
	tctx, cancel := context.WithTimeoutCause(ctx, rt.o.TurnTimeout, errTurnTimeout)
	defer cancel()
	// Output writes under the runner's context, not the turn's: text
	// streamed before a timeout still reaches the journal.
	out := runner.NewOutput(ctx, t)
	res, err := rt.loop(tctx, in, t, out)
	if err == nil {
		// The last text goes out with turn.completed, in one write.
		res.Tail, err = out.Detach()
	} else {
		_ = out.Close() // the turn's error is the one to report
	}
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(tctx), errTurnTimeout) {
		err = runner.Failf(ReasonTurnTimeout, "the turn ran longer than its %s limit", rt.o.TurnTimeout)
	}
	return res, err
}

// turnState is one turn's progress: the events it has journaled, as the
// journal holds them, which extend the context for the next model call;
// and what turn.completed reports.
type turnState struct {
	own                []*fsmpb.Event
	steps              int
	prompt, completion int64
	context            int64 // the last call's prompt
	ran                int   // tool calls that ran
}

func (st *turnState) facts(model string) map[string]any {
	return map[string]any{
		FactModel: model, FactSteps: st.steps, FactPromptTokens: st.prompt, FactCompletionTokens: st.completion,
		FactContextTokens: st.context, FactToolCalls: st.ran,
	}
}

func (rt *runtime) loop(ctx context.Context, in *fsmpb.Event, t runner.Turn, out *runner.Output) (runner.TurnResult, error) {
	if err := rt.catchUp(ctx); err != nil {
		return runner.TurnResult{}, err
	}
	svc, err := rt.service()
	if err != nil {
		return runner.TurnResult{}, err
	}
	past := rt.contextFor(in)
	st := &turnState{}
	for step := 1; ; step++ {
		if step > rt.o.MaxSteps {
			return runner.TurnResult{}, runner.Failf(ReasonMaxSteps, "the model still called tools after %d model calls", rt.o.MaxSteps)
		}
		// The runner charged the turn's first query with the turn; a
		// gateway charges every call it passes.
		if step > 1 && rt.o.Gateway == nil {
			if err := t.Charge(ctx, &fsmpb.Budget{Queries: 1}); err != nil {
				return runner.TurnResult{}, err
			}
		}
		body, err := RequestBody(rt.o, rt.model, slices.Concat(past, st.own))
		if err != nil {
			return runner.TurnResult{}, runner.Failf(ReasonBadContext, "%v", err)
		}
		r, err := rt.complete(ctx, svc, body, out)
		// Whatever the call streamed is journaled before anything else;
		// after the last call, that is turn.completed (Turn).
		if err != nil || len(r.calls) > 0 {
			if ferr := out.Flush(); ferr != nil {
				return runner.TurnResult{}, ferr
			}
		}
		if r.text != "" {
			st.own = append(st.own, &fsmpb.Event{Kind: fsm.KindOutput, Text: r.text})
		}
		if err != nil {
			return runner.TurnResult{}, err
		}
		st.steps = step
		if len(r.calls) == 0 {
			// The last call's usage is charged by the runner after
			// turn.completed.
			usage := rt.countUsage(st, r.usage)
			if rt.o.Gateway != nil {
				usage = nil // the gateway charged it
			}
			return runner.TurnResult{Facts: st.facts(rt.model), Usage: usage}, nil
		}
		if err := rt.chargeUsage(ctx, t, st, r.usage); err != nil {
			return runner.TurnResult{}, err
		}
		if err := rt.useTools(ctx, t, st, step, r.calls); err != nil {
			return runner.TurnResult{}, err
		}
	}
}

// chargeUsage charges a call's tokens and spend, and counts them in the
// turn's facts. An endpoint that sends no usage is charged nothing here;
// the runner then charges the turn's output words instead.
func (rt *runtime) chargeUsage(ctx context.Context, t runner.Turn, st *turnState, u *tokens) error {
	if usage := rt.countUsage(st, u); usage != nil && rt.o.Gateway == nil {
		return t.Charge(ctx, usage)
	}
	return nil
}

// countUsage counts a call's tokens in the turn's facts and returns what
// to charge for them (nil: nothing).
func (rt *runtime) countUsage(st *turnState, u *tokens) *fsmpb.Budget {
	if u == nil {
		return nil
	}
	st.prompt += u.prompt
	st.completion += u.completion
	st.context = u.prompt
	usage := &fsmpb.Budget{OutputTokens: uint64(max(u.completion, 0)), SpendMicros: spendMicros(rt.o.Price, u.prompt, u.completion)}
	if usage.OutputTokens == 0 && usage.SpendMicros == 0 {
		return nil
	}
	return usage
}

// useTools journals a step's tool calls together, then runs them one by
// one (each waiting for its approval), journaling each result.
func (rt *runtime) useTools(ctx context.Context, t runner.Turn, st *turnState, step int, calls []callData) error {
	evs := make([]runner.Event, len(calls))
	for i := range calls {
		c := &calls[i]
		if c.ID == "" {
			// Some servers send no id; the one made up here is
			// journaled, so the context rebuilds with it.
			c.ID = fmt.Sprintf("call_%d_%d_%d", t.InputSeq(), step, i+1)
		}
		c.Step = step
		evs[i] = runner.Event{Kind: fsm.KindToolCall, Text: label(c.Name + " " + c.Arguments), Data: mustJSON(c)}
	}
	last, err := t.Emit(ctx, evs...)
	if err != nil {
		return err
	}
	for _, ev := range evs {
		st.own = append(st.own, &fsmpb.Event{Kind: ev.Kind, Text: ev.Text, Data: ev.Data})
	}
	for i, c := range calls {
		res, err := rt.useTool(ctx, t, c, last-uint64(len(calls)-1-i))
		if err != nil {
			return err
		}
		ev := runner.Event{Kind: fsm.KindToolResult, Text: res.text, Data: mustJSON(resultData{
			ID: c.ID, Name: c.Name, OK: res.ok, Refused: res.refused, Denied: res.denied,
		})}
		if _, err := t.Emit(ctx, ev); err != nil {
			return err
		}
		st.own = append(st.own, &fsmpb.Event{Kind: ev.Kind, Text: ev.Text, Data: ev.Data})
		if res.ran {
			st.ran++
			if err := t.Charge(ctx, &fsmpb.Budget{ToolCalls: 1}); err != nil {
				return err
			}
		}
	}
	return nil
}

// Denied is what the model is told about a tool call whose approval was
// answered no.
const Denied = "denied: the user did not allow this tool call"

// useTool checks a call, asks for its approval unless its tool runs
// without asking, and runs it. A call fak refuses is refused before
// anyone is asked.
func (rt *runtime) useTool(ctx context.Context, t runner.Turn, c callData, callSeq uint64) (toolResult, error) {
	args, err := rt.tools.check(c.Name, c.Arguments)
	if err != nil {
		return refused(err), nil
	}
	if !slices.Contains(rt.o.AutoApprove, c.Name) {
		seq, err := t.Emit(ctx, runner.Event{
			Kind: fsm.KindApprovalRequested,
			Text: "allow " + c.Name + ": " + label(args.summary(c.Name)) + "?",
			Data: mustJSON(approvalData{ToolCallID: c.ID, ToolCallSeq: callSeq, Name: c.Name}),
		})
		if err != nil {
			return toolResult{}, err
		}
		approved, err := t.AwaitApproval(ctx, seq)
		if err != nil {
			return toolResult{}, err
		}
		if !approved {
			return toolResult{text: Denied, denied: true}, nil
		}
	}
	return rt.tools.run(ctx, c.Name, args)
}
