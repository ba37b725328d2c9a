package runner

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"time"

	"github.com/fak-dev/fak/fsm/fsmpb"
)

// Writer is how a runner reaches the cluster. The node implements it with
// the API of its own process, so a follower's runner is forwarded to the
// leader like any other client write.
type Writer interface {
	// AppendRunnerEvents makes one runner write. Domain errors are
	// *fsm.Error; errors worth retrying (no leader, outcome unknown,
	// connection lost) are wrapped with Transient.
	AppendRunnerEvents(ctx context.Context, w Append) (Appended, error)
	// RecordUsage charges usage to the session's budget envelope (the
	// lineage's shared one). A charge that would pass a hard limit is
	// refused with the domain error BUDGET_EXHAUSTED (and the refusal is
	// journaled). requestID makes a retry idempotent.
	RecordUsage(ctx context.Context, sessionID string, usage *fsmpb.Budget, requestID string) error
	// Sync returns once the local replica has applied every write committed
	// before the call (a linearizable read barrier), so what the runner
	// reads next from its replica is at least as new as the cluster.
	Sync(ctx context.Context, sessionID string) error

	// The runner's steps of a move (DESIGN.md §8): the source's checkpoint
	// at a safe point (the journal up to seq, with its digest), the
	// destination's restore as the next epoch after verifying the digest
	// on its own replica, and a report that the move cannot proceed (a
	// digest mismatch). Errors as for AppendRunnerEvents.
	// CommitCheckpoint commits the source's safe point: the journal
	// address and digest, and the workspace snapshot (nil: none carried).
	CommitCheckpoint(ctx context.Context, sessionID, moveID string, sourceEpoch, seq uint64, digest string, ws *fsmpb.Workspace) (head uint64, err error)
	// CommitRestore commits the destination's restore, with what restoring
	// the workspace cost (nil: none carried).
	CommitRestore(ctx context.Context, sessionID, moveID string, newEpoch uint64, digest string, t *fsmpb.WorkspaceTransfer) (head uint64, err error)
	// RecordWorkspaceCopy records that a node holds a copy of the
	// session's workspace, fenced by the host's epoch.
	RecordWorkspaceCopy(ctx context.Context, sessionID string, epoch uint64, cp *fsmpb.WorkspaceCopy) error
	FailMove(ctx context.Context, sessionID, moveID, reason string) (head uint64, err error)
}

// Append is one runner write: events of one epoch, and the budget
// charges that go with them.
type Append struct {
	SessionID string
	Epoch     uint64
	Events    []Event
	// ChargeTurn charges one turn and one query to the session's envelope
	// as the turn starts; Events is then exactly one turn.started. When
	// the envelope refuses, the FSM starts the turn and closes it refused
	// (Appended.TurnRefused).
	ChargeTurn bool
	// Usage is charged after the events (a finished turn's output tokens,
	// a runtime's usage); a refusal is journaled and reported
	// (Appended.UsageRefused), not an error.
	Usage *fsmpb.Budget
	// StartsInput is the input a turn.started in Events serves: the FSM
	// refuses the write (TURN_ORDER) unless it is the oldest queued one.
	StartsInput uint64
	// TurnOnly: ChargeTurn charges the turn without its query (the
	// adapter is Metered: a gateway charges every model call).
	TurnOnly bool
	// Binding is the provider thread the turn ran on (provider runtimes),
	// bound on the session before the events.
	Binding *Binding
	// RequestID makes a retry of the same write idempotent.
	RequestID string
}

// Binding is a provider runtime's thread: the provider and its own id of
// the conversation (claude's session uuid, codex's thread id, gemini's
// session id), which the next turn resumes.
type Binding struct {
	Provider, ThreadID string
}

// Appended is what a runner write committed: the seqs of its events (and
// of the charges journaled with them), and the envelope's refusals.
type Appended struct {
	First, Last               uint64
	TurnRefused, UsageRefused bool
}

type transientError struct{ err error }

func (e transientError) Error() string { return e.err.Error() }
func (e transientError) Unwrap() error { return e.err }

// Transient marks an error after which the same call may be retried.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return transientError{err}
}

// IsTransient reports whether err was marked with Transient.
func IsTransient(err error) bool {
	var t transientError
	return errors.As(err, &t)
}

// Retry bounds: a call is retried with growing pauses for up to
// retryBudget (an election takes a few seconds; longer outages end the
// attempt and the runner comes back to the session later). One attempt may
// take up to attemptTimeout, so a hung connection is retried too.
const (
	retryBudget    = 30 * time.Second
	attemptTimeout = 10 * time.Second
	minBackoff     = 20 * time.Millisecond
	maxBackoff     = time.Second
)

// retry calls fn until it succeeds, fails for good, ctx ends or the budget
// is spent. An attempt that timed out on its own deadline counts as
// transient.
func retry(ctx context.Context, fn func(ctx context.Context) error) error {
	deadline := time.Now().Add(retryBudget)
	backoff := minBackoff
	for {
		actx, cancel := context.WithTimeout(ctx, attemptTimeout)
		err := fn(actx)
		cancel()
		if err == nil || ctx.Err() != nil {
			return err
		}
		if !IsTransient(err) && !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		if time.Now().After(deadline) {
			return err
		}
		if sleep(ctx, backoff) != nil {
			return err
		}
		backoff = min(2*backoff, maxBackoff)
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
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

// newRequestID draws the idempotency key of one write, fixed before its
// first attempt.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "run_" + hex.EncodeToString(b[:])
}

// turnRequestID is the idempotency key of a write made once per input of a
// session (its turn's charges): the same on every pass and every runner,
// so a pass that is repeated (after a fenced write, a failure, a restart)
// charges the input once (within the FSM's dedup window, fsm.DedupWindow).
func turnRequestID(prefix, sessionID string, inputSeq uint64) string {
	h := sha256.Sum256([]byte(sessionID + "\x00" + strconv.FormatUint(inputSeq, 10)))
	return prefix + hex.EncodeToString(h[:16])
}
