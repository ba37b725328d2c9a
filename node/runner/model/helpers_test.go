package model

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/runner"
	"github.com/fak-dev/fak/node/runner/model/modeltest"
	"github.com/fak-dev/fak/node/runner/runnertest"
)

// journal is a session's journal as a runner's replica serves it: reads
// start after the reset boundary at after.
type journal struct {
	mu    sync.Mutex
	evs   []*fsmpb.Event
	after uint64
}

func (j *journal) Events(from uint64, limit int) ([]*fsmpb.Event, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	from = max(from, j.after+1)
	var out []*fsmpb.Event
	for _, ev := range j.evs {
		if ev.Seq >= from && len(out) < limit {
			out = append(out, ev)
		}
	}
	return out, nil
}

// add appends an event; data is raw JSON ([]byte) or a value to marshal.
func (j *journal) add(kind, text string, data any) *fsmpb.Event {
	j.mu.Lock()
	defer j.mu.Unlock()
	var raw []byte
	switch d := data.(type) {
	case nil:
	case []byte:
		raw = d
	default:
		raw, _ = json.Marshal(d)
	}
	ev := &fsmpb.Event{Seq: uint64(len(j.evs) + 1), Kind: kind, Text: text, Data: raw}
	j.evs = append(j.evs, ev)
	return ev
}

// context is what the runtime may see: the events after the boundary.
func (j *journal) context() []*fsmpb.Event {
	evs, _ := j.Events(0, 1<<30)
	return evs
}

// reset appends a reset boundary and moves the view past it.
func (j *journal) reset() {
	b := j.add(fsm.KindResetBoundary, "", nil)
	j.mu.Lock()
	j.after = b.Seq
	j.mu.Unlock()
}

// input appends an input and the turn.started that serves it, as the FSM
// and the runner do before a runtime gets the turn.
func (j *journal) input(text string) *fsmpb.Event {
	in := j.add(fsm.KindInput, text, nil)
	j.add(fsm.KindTurnStarted, "", map[string]any{"input_seq": in.Seq, "node": "n1", "adapter": "gpt"})
	return in
}

// record appends what a turn emitted, then its turn.completed.
func (j *journal) record(tr *runnertest.Turn) {
	for _, ev := range tr.Events() {
		j.add(ev.Kind, ev.Text, ev.Data)
	}
	j.add(fsm.KindTurnCompleted, "completed", map[string]any{"status": "completed"})
}

// fixture is a fake endpoint, a workspace and the options of a runtime
// using them.
type fixture struct {
	t   testing.TB
	srv *modeltest.Server
	ws  string
	o   Options
}

func newFixture(t testing.TB, tools ...string) *fixture {
	t.Helper()
	srv := modeltest.NewServer()
	t.Cleanup(srv.Close)
	f := &fixture{t: t, srv: srv, ws: t.TempDir()}
	f.o = Options{
		Name: "gpt", Endpoint: srv.URL, Model: "gpt-test", Tools: tools,
		Price: Price{InputPerMTok: 2, OutputPerMTok: 8},
	}
	return f
}

// start starts a runtime for the session on f's options.
func (f *fixture) start(j *journal, placement *fsmpb.Placement) runner.Runtime {
	f.t.Helper()
	a, err := New(f.o)
	if err != nil {
		f.t.Fatal(err)
	}
	rt, err := a.Start(context.Background(), runner.Epoch{
		SessionID: "s1", Epoch: 1, Placement: placement, ResetSeq: j.after, Workspace: f.ws,
	}, j)
	if err != nil {
		f.t.Fatal(err)
	}
	return rt
}

// turn serves text as the next input and records the turn in j.
func (f *fixture) turn(rt runner.Runtime, j *journal, text string, tr *runnertest.Turn) (runner.TurnResult, error) {
	f.t.Helper()
	in := j.input(text)
	tr.Input = in.Seq
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := runnertest.Run(ctx, rt, in, tr)
	j.record(tr)
	return res, err
}

// body is the nth request's body (0-based).
func (f *fixture) body(n int) []byte {
	f.t.Helper()
	reqs := f.srv.Requests()
	if len(reqs) <= n {
		f.t.Fatalf("the server got %d requests, want more than %d", len(reqs), n)
	}
	return reqs[n].Body
}

// wantBody fails unless the nth request carried exactly RequestBody of
// events.
func (f *fixture) wantBody(n int, model string, events []*fsmpb.Event) {
	f.t.Helper()
	want, err := RequestBody(f.o, model, events)
	if err != nil {
		f.t.Fatal(err)
	}
	if got := f.body(n); string(got) != string(want) {
		f.t.Fatalf("request %d differs from RequestBody:\n got %s\nwant %s", n, got, want)
	}
}

// kinds lists the kinds of events, a run of output events as one (how
// streamed text is coalesced into events is Output's business).
func kinds(evs []runner.Event) string {
	var k []string
	for _, ev := range evs {
		if ev.Kind == fsm.KindOutput && len(k) > 0 && k[len(k)-1] == fsm.KindOutput {
			continue
		}
		k = append(k, ev.Kind)
	}
	return strings.Join(k, " ")
}

// only returns the events of one kind.
func only(evs []runner.Event, kind string) []runner.Event {
	var out []runner.Event
	for _, ev := range evs {
		if ev.Kind == kind {
			out = append(out, ev)
		}
	}
	return out
}

func decode[T any](t *testing.T, data []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("decode %s: %v", data, err)
	}
	return v
}

// wantReason fails unless err is a TurnError of reason whose message
// holds every one of parts.
func wantReason(t *testing.T, err error, reason string, parts ...string) {
	t.Helper()
	var te *runner.TurnError
	if !errors.As(err, &te) || te.Reason != reason {
		t.Fatalf("error %v, want reason %s", err, reason)
	}
	for _, p := range parts {
		if !strings.Contains(te.Error(), p) {
			t.Fatalf("error %q does not say %q", te.Error(), p)
		}
	}
}
