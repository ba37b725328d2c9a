// Package echo is the built-in deterministic runtime adapter, for demos and
// tests: it streams a reply derived from each input over a configurable
// turn length, and an input asking for a tool ("!tool NAME ARGS") goes
// through tool.call, an approval and tool.result like a real agent's tool
// use. Same journal in, same events out. Each turn.completed reports
// context_inputs, the inputs in the turn's context (since the last reset).
package echo

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/runner"
)

// Name is the adapter's name in a placement.
const Name = "echo"

// DefaultTurnDuration is how long a turn takes unless configured.
const DefaultTurnDuration = time.Second

// ToolPrefix starts an input that asks for a tool: "!tool ls -la".
const ToolPrefix = "!tool "

// maxChunks bounds the output events of one reply, so a long input streams
// in a few writes rather than one per word.
const maxChunks = 8

// Options configure the adapter.
type Options struct {
	// TurnDuration is spread over a turn's steps; 0 runs turns as fast as
	// the cluster commits them.
	TurnDuration time.Duration
}

// New returns the echo adapter.
func New(opts Options) runner.Adapter { return &adapter{opts: opts} }

type adapter struct{ opts Options }

func (a *adapter) Name() string { return Name }

// Start rebuilds the runtime's state from its context (the journal after
// the last reset boundary): the inputs in it and the turns completed.
func (a *adapter) Start(ctx context.Context, _ runner.Epoch, j runner.Journal) (runner.Runtime, error) {
	rt := &runtime{opts: a.opts, journal: j, next: 1}
	if err := rt.catchUp(ctx); err != nil {
		return nil, err
	}
	return rt, nil
}

// runtime's only state is what it has read of its context, which it keeps
// reading as the journal grows.
type runtime struct {
	opts    Options
	journal runner.Journal
	next    uint64   // the next seq to read
	inputs  []uint64 // seqs of the input events read, ascending
	turns   uint64   // turn.completed events read
}

// catchUp reads the context up to the local replica's head.
func (rt *runtime) catchUp(ctx context.Context) error {
	for {
		evs, err := rt.journal.Events(rt.next, 1000)
		if err != nil {
			return err
		}
		if len(evs) == 0 {
			return nil
		}
		for _, ev := range evs {
			switch ev.Kind {
			case fsm.KindInput:
				rt.inputs = append(rt.inputs, ev.Seq)
			case fsm.KindTurnCompleted:
				rt.turns++
			}
		}
		rt.next = evs[len(evs)-1].Seq + 1
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
}

// contextInputs counts the inputs in the context up to and including in.
func (rt *runtime) contextInputs(in *fsmpb.Event) int {
	before, _ := slices.BinarySearch(rt.inputs, in.Seq)
	return before + 1
}

func (rt *runtime) SafePoint(context.Context) error { return nil } // nothing lives outside the journal
func (rt *runtime) Stop() error                     { return nil }

// Turn replies "echo: TEXT" (or runs the tool asked for). turn.completed
// reports the turn's number in the context ("turn N done": the turns
// completed since the last reset, this one included) and context_inputs,
// the inputs in the context: those after the last reset, this one
// included.
func (rt *runtime) Turn(ctx context.Context, in *fsmpb.Event, t runner.Turn) (runner.TurnResult, error) {
	if err := rt.catchUp(ctx); err != nil {
		return runner.TurnResult{}, err
	}
	inputs := rt.contextInputs(in)
	text := strings.TrimSpace(in.Text)
	var err error
	if tool, args, ok := parseTool(text); ok {
		err = rt.toolTurn(ctx, t, tool, args)
	} else {
		err = rt.stream(ctx, t, "echo: "+text, rt.opts.TurnDuration)
	}
	if err != nil {
		return runner.TurnResult{}, err
	}
	// This turn's turn.completed is read by the next catch-up.
	return runner.TurnResult{
		Summary: fmt.Sprintf("turn %d done", rt.turns+1),
		Facts:   map[string]any{FactContextInputs: inputs},
	}, nil
}

// FactContextInputs is the key of turn.completed's data that counts the
// inputs in the turn's context.
const FactContextInputs = "context_inputs"

// parseTool splits "!tool ls -la" into ("ls", "-la").
func parseTool(text string) (tool, args string, ok bool) {
	rest, found := strings.CutPrefix(text, ToolPrefix)
	if !found {
		return "", "", false
	}
	rest = strings.TrimSpace(rest)
	if rest == "" {
		return "", "", false
	}
	tool, args, _ = strings.Cut(rest, " ")
	return tool, strings.TrimSpace(args), true
}

// stream writes reply as output chunks spread evenly over d.
func (rt *runtime) stream(ctx context.Context, t runner.Turn, reply string, d time.Duration) error {
	chunks := split(reply, maxChunks)
	step := d / time.Duration(len(chunks))
	for _, c := range chunks {
		if err := pause(ctx, step); err != nil {
			return err
		}
		if _, err := t.Emit(ctx, runner.Event{Kind: fsm.KindOutput, Text: c}); err != nil {
			return err
		}
	}
	return nil
}

type toolFact struct {
	Tool     string `json:"tool"`
	Args     string `json:"args"`
	Approved *bool  `json:"approved,omitempty"`
}

func data(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

// toolTurn: tool.call and approval.requested together, wait for the answer,
// tool.result, then a reply. A quarter of the turn passes before the call
// and half of it streams the reply; waiting for a person is not counted.
func (rt *runtime) toolTurn(ctx context.Context, t runner.Turn, tool, args string) error {
	cmd := strings.TrimSpace(tool + " " + args)
	if err := pause(ctx, rt.opts.TurnDuration/4); err != nil {
		return err
	}
	seq, err := t.Emit(ctx,
		runner.Event{Kind: fsm.KindToolCall, Text: cmd, Data: data(toolFact{Tool: tool, Args: args})},
		runner.Event{Kind: fsm.KindApprovalRequested, Text: "run " + cmd + "?", Data: data(toolFact{Tool: tool, Args: args})})
	if err != nil {
		return err
	}
	approved, err := t.AwaitApproval(ctx, seq)
	if err != nil {
		return err
	}
	result, reply := cmd+": denied", "echo: did not run "+cmd
	if approved {
		result, reply = cmd+": approved, ran (echo)", "echo: ran "+cmd
	}
	if err := pause(ctx, rt.opts.TurnDuration/4); err != nil {
		return err
	}
	if _, err := t.Emit(ctx, runner.Event{Kind: fsm.KindToolResult, Text: result,
		Data: data(toolFact{Tool: tool, Args: args, Approved: &approved})}); err != nil {
		return err
	}
	return rt.stream(ctx, t, reply, rt.opts.TurnDuration/2)
}

// split cuts s into at most n chunks at word boundaries (each word keeps
// its trailing space), so the chunks concatenated give s back.
func split(s string, n int) []string {
	words := strings.SplitAfter(s, " ")
	per := (len(words) + n - 1) / n
	var out []string
	for i := 0; i < len(words); i += per {
		out = append(out, strings.Join(words[i:min(i+per, len(words))], ""))
	}
	return out
}

func pause(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
