package model

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/fak-dev/fak/node/runner"
)

// reply is what one model call produced.
type reply struct {
	text   string
	calls  []callData
	finish string
	usage  *tokens // nil: the endpoint sent no usage chunk
}

type tokens struct{ prompt, completion int64 }

// complete makes one model call with body, streaming its text into out,
// retrying what is worth retrying. It returns a *runner.TurnError for an
// upstream failure, out's write error, or the context's.
func (rt *runtime) complete(ctx context.Context, svc openai.ChatCompletionService, body []byte, out *runner.Output) (reply, error) {
	for attempt := 1; ; attempt++ {
		r, streamed, err := rt.attempt(ctx, svc, body, out)
		var ue *upstreamError
		if err == nil || ctx.Err() != nil || !errors.As(err, &ue) {
			return r, err
		}
		// Once text of this call is in the journal, a second attempt
		// would journal a second, different beginning after it: the
		// call fails as it stands.
		if !ue.retryable || streamed || attempt > rt.o.MaxRetries {
			return r, ue.turnError(attempt)
		}
		rt.o.Logger.Warn("model call failed, retrying", "session", rt.ep.SessionID, "attempt", attempt, "reason", ue.reason, "error", ue.msg)
		t := time.NewTimer(retryWait(ue, attempt-1))
		select {
		case <-ctx.Done():
			t.Stop()
			return r, context.Cause(ctx)
		case <-t.C:
		}
	}
}

// attempt streams one request. streamed reports whether any text reached
// out. Errors are *upstreamError, out's write error, or the context's.
func (rt *runtime) attempt(ctx context.Context, svc openai.ChatCompletionService, body []byte, out *runner.Output) (r reply, streamed bool, err error) {
	callCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stall := time.AfterFunc(rt.o.StallTimeout, func() { cancel(errStalled) })
	defer stall.Stop()
	x := &exchange{alive: func() { stall.Reset(rt.o.StallTimeout) }}

	// The body is RequestBody's, byte for byte; the empty params are
	// replaced by it (and the SDK's "stream": true finds it already set).
	stream := svc.NewStreaming(callCtx, openai.ChatCompletionNewParams{},
		option.WithRequestBody("application/json", body), option.WithMiddleware(x.middleware))
	defer stream.Close()

	var text strings.Builder
	var calls assembler
	for stream.Next() {
		chunk := stream.Current()
		if chunk.JSON.Usage.Valid() {
			r.usage = &tokens{prompt: chunk.Usage.PromptTokens, completion: chunk.Usage.CompletionTokens}
		}
		for _, c := range chunk.Choices {
			if c.Index != 0 {
				continue // one choice is asked for; ignore others
			}
			if t := c.Delta.Content + c.Delta.Refusal; t != "" {
				if err := out.Write(t); err != nil {
					return r, streamed, err
				}
				streamed = true
				text.WriteString(t)
			}
			for _, tc := range c.Delta.ToolCalls {
				calls.add(tc)
			}
			if c.FinishReason != "" {
				r.finish = c.FinishReason
			}
		}
	}
	r.text = text.String()
	err = stream.Err()
	if ctx.Err() != nil {
		return r, streamed, context.Cause(ctx)
	}
	if err == nil && (r.finish == "" || !x.done) {
		err = errCut
	}
	if err != nil {
		return r, streamed, classify(callCtx, x, err, rt.o.StallTimeout)
	}
	r.calls = calls.list()
	return r, streamed, nil
}

// assembler puts tool calls together from their deltas: keyed by index,
// the first fragment carrying id and name, the arguments concatenated.
type assembler struct {
	calls []*partialCall
}

type partialCall struct {
	index    int64
	id, name string
	args     strings.Builder
}

func (a *assembler) add(d openai.ChatCompletionChunkChoiceDeltaToolCall) {
	var c *partialCall
	if i := slices.IndexFunc(a.calls, func(c *partialCall) bool { return c.index == d.Index }); i >= 0 {
		c = a.calls[i]
	} else {
		c = &partialCall{index: d.Index}
		a.calls = append(a.calls, c)
	}
	if c.id == "" {
		c.id = d.ID
	}
	if c.name == "" {
		c.name = d.Function.Name
	}
	c.args.WriteString(d.Function.Arguments)
}

// list returns the calls in index order.
func (a *assembler) list() []callData {
	slices.SortStableFunc(a.calls, func(x, y *partialCall) int { return cmp.Compare(x.index, y.index) })
	out := make([]callData, 0, len(a.calls))
	for _, c := range a.calls {
		out = append(out, callData{ID: c.id, Name: c.name, Arguments: c.args.String()})
	}
	return out
}
