// Package proctest holds the test helpers of the runtimes whose turns run
// processes through proc (exec, provider): running a turn in the
// background and waiting for it, interrupting it, holding it at an
// approval, and checking that no process of its group outlives it.
package proctest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node/runner"
	"github.com/fak-dev/fak/node/runner/runnertest"
)

// Patience bounds every wait of these tests: far above what a turn takes,
// so only a hang reaches it.
const Patience = 20 * time.Second

// Promptly bounds how long a cancelled turn may take to return: killing a
// group and reaping it takes milliseconds.
const Promptly = 5 * time.Second

// Result is what a Turn returned.
type Result struct {
	Res runner.TurnResult
	Err error
}

// Running is a turn running in the background (Go).
type Running struct {
	cancel context.CancelFunc
	done   chan Result
}

// Go runs a turn in the background. Its context ends with Interrupt or
// the test.
func Go(t testing.TB, rt runner.Runtime, in *fsmpb.Event, tr runner.Turn) *Running {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	r := &Running{cancel: cancel, done: make(chan Result, 1)}
	go func() {
		res, err := runnertest.Run(ctx, rt, in, tr)
		r.done <- Result{res, err}
	}()
	return r
}

// Done yields the turn's result once it has ended.
func (r *Running) Done() <-chan Result { return r.done }

// Await waits for the turn to end, failing the test past within.
func (r *Running) Await(t testing.TB, within time.Duration) Result {
	t.Helper()
	select {
	case res := <-r.done:
		return res
	case <-time.After(within):
		t.Fatalf("the turn did not end within %s", within)
		return Result{}
	}
}

// Interrupt cancels the turn (an interrupt, a retired epoch, shutdown)
// and fails unless it returns ctx's error Promptly.
func (r *Running) Interrupt(t testing.TB) {
	t.Helper()
	r.cancel()
	if res := r.Await(t, Promptly); !errors.Is(res.Err, context.Canceled) {
		t.Fatalf("error %v, want context.Canceled", res.Err)
	}
}

// RunTurn runs a turn to its end, failing the test if it hangs.
func RunTurn(t testing.TB, rt runner.Runtime, in *fsmpb.Event, tr runner.Turn) (runner.TurnResult, error) {
	t.Helper()
	res := Go(t, rt, in, tr).Await(t, Patience)
	return res.Res, res.Err
}

// WantReason fails unless err is a TurnError with reason whose message
// holds every part.
func WantReason(t testing.TB, err error, reason string, parts ...string) {
	t.Helper()
	var te *runner.TurnError
	if !errors.As(err, &te) {
		t.Fatalf("error %v (%T), want a %s TurnError", err, err, reason)
	}
	if te.Reason != reason {
		t.Fatalf("reason %s (%v), want %s", te.Reason, err, reason)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not say %q", err, p)
		}
	}
}

// ApprovalTurn is a fake Turn whose AwaitApproval blocks until the turn
// is cancelled, telling the test once it is waiting.
type ApprovalTurn struct {
	*runnertest.Turn
	waiting chan uint64
}

// NewApprovalTurn is a fake turn of the input at seq.
func NewApprovalTurn(seq uint64) *ApprovalTurn {
	return &ApprovalTurn{Turn: &runnertest.Turn{Input: seq}, waiting: make(chan uint64, 1)}
}

func (a *ApprovalTurn) AwaitApproval(ctx context.Context, seq uint64) (bool, error) {
	select {
	case a.waiting <- seq:
	default:
	}
	<-ctx.Done()
	return false, ctx.Err()
}

// WaitForApproval waits until the turn waits for a person's approval,
// failing the test past Patience.
func (a *ApprovalTurn) WaitForApproval(t testing.TB) {
	t.Helper()
	select {
	case <-a.waiting:
	case <-time.After(Patience):
		t.Fatal("the turn never waited for the approval")
	}
}
