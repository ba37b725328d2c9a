package model

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/openai/openai-go/v3"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
)

// NoResult is what the model is told about a tool call whose turn ended
// (interrupted, failed, its node lost) before the call's tool.result was
// journaled: every tool call in a request must be answered.
const NoResult = "no result: the turn ended before this tool call finished"

// Messages rebuilds the Chat Completions messages of a context from its
// journal events, deterministically (the rules are in the package doc).
// events are the context in journal order: the events after the last
// reset boundary (earlier ones, up to a reset_boundary in events, are
// skipped), ending with the turn.started of the turn being served or with
// the input it serves; a model runtime appends the events its turn has
// journaled so far.
func Messages(system string, events []*fsmpb.Event) ([]openai.ChatCompletionMessageParamUnion, error) {
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].GetKind() == fsm.KindResetBoundary {
			events = events[i+1:]
			break
		}
	}
	b := &builder{inputs: map[uint64]*fsmpb.Event{}}
	if system != "" {
		b.msgs = append(b.msgs, openai.SystemMessage(system))
	}
	for i, ev := range events {
		switch ev.GetKind() {
		case fsm.KindInput:
			b.inputs[ev.Seq] = ev
			if i == len(events)-1 {
				// The input being served, for a caller that cuts the
				// context at it: no turn.started names it yet.
				b.user(ev.Text)
			}
		case fsm.KindTurnStarted:
			var d startedData
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return nil, fmt.Errorf("context: turn.started at seq %d: %w", ev.Seq, err)
			}
			in := b.inputs[d.InputSeq]
			if in == nil {
				return nil, fmt.Errorf("context: turn.started at seq %d serves input %d, which is not in the context", ev.Seq, d.InputSeq)
			}
			b.user(in.Text)
		case fsm.KindOutput:
			b.output(ev.Text)
		case fsm.KindToolCall:
			var d callData
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return nil, fmt.Errorf("context: tool.call at seq %d: %w", ev.Seq, err)
			}
			b.call(d)
		case fsm.KindToolResult:
			var d resultData
			if err := json.Unmarshal(ev.Data, &d); err != nil {
				return nil, fmt.Errorf("context: tool.result at seq %d: %w", ev.Seq, err)
			}
			b.result(d.ID, ev.Text)
		case fsm.KindTurnCompleted:
			b.endTurn()
		}
	}
	b.endTurn()
	return b.msgs, nil
}

// builder assembles messages: the assistant message of the step being
// read (text and tool calls), then the tool calls of the last assistant
// message still waiting for their results.
type builder struct {
	msgs    []openai.ChatCompletionMessageParamUnion
	inputs  map[uint64]*fsmpb.Event
	text    strings.Builder
	calls   []callData
	waiting []string // tool call ids
}

func (b *builder) user(text string) {
	b.endTurn()
	b.msgs = append(b.msgs, openai.UserMessage(text))
}

func (b *builder) output(text string) {
	b.answerMissing()
	b.text.WriteString(text)
}

func (b *builder) call(d callData) {
	b.answerMissing()
	b.calls = append(b.calls, d)
}

// result answers a waiting tool call; a result that answers none (its
// call is not in the context) is not sent, as the API would refuse it.
func (b *builder) result(id, text string) {
	b.closeStep()
	if i := slices.Index(b.waiting, id); i >= 0 {
		b.waiting = slices.Delete(b.waiting, i, i+1)
		b.msgs = append(b.msgs, openai.ToolMessage(text, id))
	}
}

func (b *builder) endTurn() {
	b.closeStep()
	b.answerMissing()
}

// closeStep turns the step read so far into one assistant message.
func (b *builder) closeStep() {
	if b.text.Len() == 0 && len(b.calls) == 0 {
		return
	}
	m := openai.ChatCompletionAssistantMessageParam{}
	if b.text.Len() > 0 {
		m.Content.OfString = openai.String(b.text.String())
	}
	for _, c := range b.calls {
		m.ToolCalls = append(m.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
			OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
				ID:       c.ID,
				Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: c.Arguments},
			},
		})
		b.waiting = append(b.waiting, c.ID)
	}
	b.msgs = append(b.msgs, openai.ChatCompletionMessageParamUnion{OfAssistant: &m})
	b.text.Reset()
	b.calls = nil
}

// answerMissing answers the tool calls still waiting with NoResult.
func (b *builder) answerMissing() {
	for _, id := range b.waiting {
		b.msgs = append(b.msgs, openai.ToolMessage(NoResult, id))
	}
	b.waiting = nil
}

// RequestBody is the exact JSON body the runtime sends for a context
// (events as for Messages): model (o.Model when empty), the messages, the
// tools, stream and stream_options.
func RequestBody(o Options, model string, events []*fsmpb.Event) ([]byte, error) {
	system := o.System
	if system == "" {
		system = DefaultSystem
	}
	if model == "" {
		model = o.Model
	}
	msgs, err := Messages(system, events)
	if err != nil {
		return nil, err
	}
	params := openai.ChatCompletionNewParams{
		Model:         model,
		Messages:      msgs,
		Tools:         toolParams(o.Tools),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	body, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("request body: %w", err)
	}
	// "stream" is appended the way the SDK's own streaming call sets it
	// (a new key goes last), so the SDK setting it again on this body
	// changes no byte.
	body = bytes.TrimRight(body, " \n")
	if len(body) < 2 || body[len(body)-1] != '}' {
		return nil, fmt.Errorf("request body is not a JSON object")
	}
	return append(body[:len(body)-1], `,"stream":true}`...), nil
}
