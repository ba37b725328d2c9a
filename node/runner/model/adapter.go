package model

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/runner"
)

// New returns a model adapter, or what is wrong with o.
func New(o Options) (runner.Adapter, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("model runtime %q: %w", o.Name, err)
	}
	return &adapter{o: o}, nil
}

type adapter struct{ o Options }

func (a *adapter) Name() string { return a.o.Name }

// Start prepares a runtime for one epoch: the placement's model and
// account (else the runtime's), and the context read so far.
func (a *adapter) Start(ctx context.Context, ep runner.Epoch, j runner.Journal) (runner.Runtime, error) {
	rt := &runtime{o: a.o, ep: ep, journal: j, model: a.o.Model, account: a.o.AccountRef, next: 1}
	if m := ep.Placement.GetModel(); m != "" {
		rt.model = m
	}
	if ref := ep.Placement.GetAccountRef(); ref != "" {
		rt.account = ref
	}
	rt.tools = &tools{
		enabled:   a.o.Tools,
		workspace: ep.Workspace, maxOutput: a.o.MaxToolOutput, sandbox: a.o.Sandbox, hide: a.o.Hide, groups: a.o.Groups,
		env: []string{"FAK_SESSION_ID=" + ep.SessionID, fmt.Sprintf("FAK_EPOCH=%d", ep.Epoch)},
	}
	if err := rt.catchUp(ctx); err != nil {
		return nil, err
	}
	return rt, nil
}

// runtime serves one epoch. Its only state is the context it has read
// from the journal (the events Messages uses) and where to read on.
type runtime struct {
	o       Options
	ep      runner.Epoch
	journal runner.Journal
	model   string
	account string
	tools   *tools

	events []*fsmpb.Event
	next   uint64
}

// contextKinds are the kinds Messages reads; the runtime keeps no others.
var contextKinds = map[string]bool{
	fsm.KindInput: true, fsm.KindTurnStarted: true, fsm.KindTurnCompleted: true,
	fsm.KindOutput: true, fsm.KindToolCall: true, fsm.KindToolResult: true,
}

// catchUp reads the context up to the local replica's head.
func (rt *runtime) catchUp(ctx context.Context) error {
	for {
		evs, err := rt.journal.Events(rt.next, 1000)
		if err != nil {
			return fmt.Errorf("read context: %w", err)
		}
		if len(evs) == 0 {
			return nil
		}
		for _, ev := range evs {
			if contextKinds[ev.Kind] {
				rt.events = append(rt.events, ev)
			}
		}
		rt.next = evs[len(evs)-1].Seq + 1
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// contextFor is the context of the turn serving in: the events before the
// turn started, then its turn.started. The local replica may not have
// applied turn.started yet (the runner wrote it through the leader), so
// the runtime writes its own; only input_seq of it is read. Later events
// (inputs queued meanwhile) are left out whether read or not: they are
// not sent before a turn starts on them.
func (rt *runtime) contextFor(in *fsmpb.Event) []*fsmpb.Event {
	out := make([]*fsmpb.Event, 0, len(rt.events)+2)
	found := false
	for _, ev := range rt.events {
		if ev.Kind == fsm.KindTurnStarted && startedInput(ev) == in.Seq {
			break
		}
		found = found || ev.Seq == in.Seq
		out = append(out, ev)
	}
	if !found {
		out = append(out, in)
	}
	return append(out, &fsmpb.Event{Kind: fsm.KindTurnStarted, Data: mustJSON(startedData{InputSeq: in.Seq})})
}

func startedInput(ev *fsmpb.Event) uint64 {
	var d startedData
	_ = json.Unmarshal(ev.Data, &d)
	return d.InputSeq
}

// service is a Chat Completions client for one turn. It is built from
// this runtime's options only: the SDK's own defaults read OPENAI_API_KEY
// and other variables of the node's environment, which must not reach a
// configured endpoint. Retries are the runtime's (bounded, Retry-After).
func (rt *runtime) service() (openai.ChatCompletionService, error) {
	opts := []option.RequestOption{
		option.WithBaseURL(rt.o.Endpoint),
		option.WithHTTPClient(rt.o.HTTPClient),
		option.WithMaxRetries(0),
	}
	if g := rt.o.Gateway; g != nil {
		opts = append(opts, option.WithAPIKey(g.Key), option.WithHeader("X-Trace-Id", rt.ep.SessionID))
		if g.Account != "" {
			opts = append(opts, option.WithHeader("X-Fak-Account", g.Account))
		}
		return openai.NewChatCompletionService(opts...), nil
	}
	if rt.o.ResolveKey != nil && rt.account != "" {
		key, err := rt.o.ResolveKey(rt.account)
		if err != nil {
			return openai.ChatCompletionService{}, runner.Failf(ReasonAccountUnresolved, "account %q: %v", rt.account, err)
		}
		if key != "" {
			opts = append(opts, option.WithAPIKey(key))
		}
	}
	return openai.NewChatCompletionService(opts...), nil
}

// MeteredByGateway: through the gateway, the calls are charged there.
func (rt *runtime) MeteredByGateway() bool { return rt.o.Gateway != nil }

// MeteredByGateway: the adapter's runtimes are.
func (a *adapter) MeteredByGateway() bool { return a.o.Gateway != nil }

// SafePoint has nothing to do: the context is the journal.
func (rt *runtime) SafePoint(context.Context) error { return nil }

func (rt *runtime) Stop() error { return nil }
