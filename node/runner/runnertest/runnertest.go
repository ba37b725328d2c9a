// Package runnertest holds fakes of the runner's seams for adapter tests:
// a Turn that records what a runtime emits and charges, and a Journal over
// a fixed list of events.
package runnertest

import (
	"context"
	"sync"

	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/runner"
)

// Turn records a turn's events and charges. Approve answers approvals
// (nil: approve all); Refuse, when set, refuses charges with its error.
type Turn struct {
	Input   uint64
	Approve func(seq uint64) (bool, error)
	Refuse  error

	mu      sync.Mutex
	events  []runner.Event
	charges []*fsmpb.Budget
	binding runner.Binding
}

func (t *Turn) Bind(provider, threadID string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.binding = runner.Binding{Provider: provider, ThreadID: threadID}
}

// Binding is the provider thread the runtime bound (zero: none).
func (t *Turn) Binding() runner.Binding {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.binding
}

func (t *Turn) Emit(_ context.Context, evs ...runner.Event) (uint64, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.events = append(t.events, evs...)
	return uint64(len(t.events)), nil
}

// Run runs one turn of rt on t (a Turn, or a wrapper of one) as the runner
// does: the result's Tail,
// text the runtime left for the runner to write with turn.completed, is
// emitted as output once the turn succeeded.
func Run(ctx context.Context, rt runner.Runtime, in *fsmpb.Event, t runner.Turn) (runner.TurnResult, error) {
	res, err := rt.Turn(ctx, in, t)
	if err == nil && res.Tail != "" {
		_, err = t.Emit(ctx, runner.Event{Kind: fsm.KindOutput, Text: res.Tail})
	}
	return res, err
}

func (t *Turn) AwaitApproval(ctx context.Context, seq uint64) (bool, error) {
	if t.Approve == nil {
		return true, ctx.Err()
	}
	return t.Approve(seq)
}

func (t *Turn) Charge(_ context.Context, u *fsmpb.Budget) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.Refuse != nil {
		return t.Refuse
	}
	t.charges = append(t.charges, u)
	return nil
}

func (t *Turn) InputSeq() uint64 { return t.Input }

// Events returns a copy of the events emitted so far.
func (t *Turn) Events() []runner.Event {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]runner.Event(nil), t.events...)
}

// Charges returns a copy of the charges made so far.
func (t *Turn) Charges() []*fsmpb.Budget {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]*fsmpb.Budget(nil), t.charges...)
}

// Output concatenates the text of the output events.
func (t *Turn) Output() string {
	var s string
	for _, e := range t.Events() {
		if e.Kind == fsm.KindOutput {
			s += e.Text
		}
	}
	return s
}

// Journal serves a fixed list of events, ascending by seq.
type Journal []*fsmpb.Event

func (j Journal) Events(from uint64, limit int) ([]*fsmpb.Event, error) {
	var out []*fsmpb.Event
	for _, e := range j {
		if e.Seq >= from && len(out) < limit {
			out = append(out, e)
		}
	}
	return out, nil
}
