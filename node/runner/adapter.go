package runner

import (
	"context"
	"fmt"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Event is one event a runtime writes during a turn: output, tool.call,
// tool.result or approval.requested. Data is JSON by convention.
type Event struct {
	Kind string
	Text string
	Data []byte
}

// Epoch identifies what a runtime serves: one execution epoch of a
// session, from its last reset boundary on. A reset (a new reset_boundary)
// retires the runtime like a new epoch does; the next turn starts another.
type Epoch struct {
	SessionID string
	Epoch     uint64
	Placement *fsmpb.Placement
	// ResetSeq is the seq of the session's last reset_boundary (0: none).
	// The model context is the events after it.
	ResetSeq uint64
	// Workspace is the session's working directory on this node
	// (<data-dir>/workspaces/<session-id>, absolute), created before Start
	// and kept across turns and epochs.
	Workspace string
	// Addr is this node's API address, handed to agent processes as
	// FAK_ADDR (with no token: a runtime gets none).
	Addr string
	// Provider and ThreadID are the session's provider thread when a
	// provider runtime bound one (Turn.Bind): a runtime of that provider
	// resumes ThreadID; empty (a fresh, a reset, another provider's
	// thread): it starts a new thread and binds it.
	Provider, ThreadID string
}

// Journal reads the session's model context from the node's local replica:
// up to limit events with seq >= from, in order, none past the head and
// none at or before the last reset boundary (Epoch.ResetSeq): a read from
// an earlier seq starts just after the boundary. The full history stays
// readable through the API; a runtime never sees what a reset cut off. A
// runtime may keep reading it for its whole life: everything committed
// before the runner hands it a turn is there.
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
	// t as it happens. It returns what turn.completed reports (the runner
	// writes turn.started and turn.completed), or an error: a write error
	// from t (the turn cannot continue) or the agent's own failure (the
	// runner closes the turn as failed).
	Turn(ctx context.Context, input *fsmpb.Event, t Turn) (TurnResult, error)
	// SafePoint is called between turns when the epoch is about to be
	// retired (moved, stopped) or checkpointed: the runtime makes sure the
	// journal holds everything a successor needs to continue from it. A
	// runtime retired by a reset gets none: its successor starts afresh.
	SafePoint(ctx context.Context) error
	// Stop releases the runtime. It is called once, never during a turn.
	Stop() error
}

// TurnResult is a runtime's report of a finished turn.
type TurnResult struct {
	// Summary is turn.completed's text ("completed" when empty).
	Summary string
	// Facts are added to turn.completed's JSON data next to the runner's
	// own keys (status, input_seq, ...), which win a clash. Values must
	// marshal to JSON.
	Facts map[string]any
	// Usage, when set, is charged in the write of turn.completed (a
	// model's last call): no write stands between the agent's end and its
	// turn's. A refusal then is journaled, the turn stays completed.
	// Output tokens in it replace the output words.
	Usage *fsmpb.Budget
	// Tail is output the runtime streamed and has not journaled
	// (Output.Detach): the runner writes it with turn.completed, in the
	// same write.
	Tail string
}

// Turn is what a runtime can do inside a turn. Every write is fenced by
// the epoch the turn began in and retried under its request id.
type Turn interface {
	// Emit appends events to the journal and returns the seq of the last.
	// The words of the output events are the turn's output tokens, which
	// the runner charges to the session's budget envelope when the turn
	// ends.
	Emit(ctx context.Context, events ...Event) (lastSeq uint64, err error)
	// AwaitApproval blocks until the approval.requested event at seq is
	// answered and returns the answer.
	AwaitApproval(ctx context.Context, seq uint64) (approved bool, err error)
	// Charge charges usage the runtime measured (model tokens, spend,
	// tool calls) to the session's budget envelope. A charge past a hard
	// limit is refused with an *fsm.Error of reason BUDGET_EXHAUSTED (the
	// refusal is journaled); the runtime then ends the turn, returning that
	// error. Once a runtime has charged output tokens, the runner does not
	// charge the turn's output words as well.
	Charge(ctx context.Context, usage *fsmpb.Budget) error
	// InputSeq is the seq of the input event the turn serves.
	InputSeq() uint64
	// Bind records the provider thread the turn runs on (a provider
	// runtime's resume id); the runner binds it on the session with the
	// turn's closing write, whatever the turn's outcome, so the next turn,
	// on any node, resumes it (Epoch.ThreadID).
	Bind(provider, threadID string)
}

// Metered is implemented by an adapter (and its runtimes) whose model
// calls are charged elsewhere — through the node's gateway, a query per
// call — so the runner charges a turn without its first query and no
// output words (they would count twice).
type Metered interface {
	MeteredByGateway() bool
}

// TurnError is a runtime's failure with a machine-readable reason
// (RUNTIME_PROTOCOL, UPSTREAM_ERROR, TURN_TIMEOUT, ...): turn.completed's
// data carries it as "reason" next to the message. A Turn error that is
// not one is reported with no reason, or with the fsm.Error reason it
// wraps (BUDGET_EXHAUSTED).
type TurnError struct {
	Reason string
	Err    error
}

func (e *TurnError) Error() string { return e.Reason + ": " + e.Err.Error() }
func (e *TurnError) Unwrap() error { return e.Err }

// Failf returns a TurnError with a formatted message.
func Failf(reason, format string, args ...any) error {
	return &TurnError{Reason: reason, Err: fmt.Errorf(format, args...)}
}
