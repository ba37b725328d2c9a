package runner

import (
	"context"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Event is one event a runtime writes during a turn: output, tool.call,
// tool.result or approval.requested. Data is JSON by convention.
type Event struct {
	Kind string
	Text string
	Data []byte
}

// Epoch identifies the execution epoch a runtime serves.
type Epoch struct {
	SessionID string
	Epoch     uint64
	Placement *fsmpb.Placement
}

// Journal reads the session's journal from the node's local replica: up to
// limit events with seq >= from, in order (none past the head).
type Journal interface {
	Events(from uint64, limit int) ([]*fsmpb.Event, error)
}

// Adapter is the runtime adapter seam: one kind of agent (echo, exec, a
// provider harness) behind the same four steps: start from the journal, run
// a turn per input, reach a safe point, stop. A session's placement names
// its adapter; the runner looks it up by Name.
type Adapter interface {
	Name() string
	// Start prepares a runtime for one epoch, rebuilding whatever state the
	// agent needs from the journal (the model context is the journal; the
	// runtime keeps nothing the journal does not have). It is called
	// lazily, when the epoch first has a turn to run.
	Start(ctx context.Context, ep Epoch, journal Journal) (Runtime, error)
}

// Runtime is an adapter running one epoch of one session. The runner calls
// it from one goroutine at a time: never two turns at once.
type Runtime interface {
	// Turn runs one turn for an input event, writing what happens through
	// t as it happens. It returns a short summary for turn.completed (the
	// runner writes turn.started and turn.completed), or an error: a
	// write error from t (the turn cannot continue) or the agent's own
	// failure (the runner closes the turn as failed).
	Turn(ctx context.Context, input *fsmpb.Event, t Turn) (summary string, err error)
	// SafePoint is called between turns when the epoch is about to be
	// retired (moved, stopped) or checkpointed: the runtime makes sure the
	// journal holds everything a successor needs to continue from it.
	SafePoint(ctx context.Context) error
	// Stop releases the runtime. It is called once, never during a turn.
	Stop() error
}

// Turn is what a runtime can do inside a turn. Every write is fenced by
// the epoch the turn began in and retried under its request id.
type Turn interface {
	// Emit appends events to the journal and returns the seq of the last.
	Emit(ctx context.Context, events ...Event) (lastSeq uint64, err error)
	// AwaitApproval blocks until the approval.requested event at seq is
	// answered and returns the answer.
	AwaitApproval(ctx context.Context, seq uint64) (approved bool, err error)
}
