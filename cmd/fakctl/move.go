package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/client/journal"
)

// Moving a session (DESIGN.md §8): session move asks for the move and then
// follows the session's journal, printing each move.* transition as it
// commits; session move-status reads the move back.

// Move states, as the fleet names them (fsm.Move*).
const (
	moveSafePointRequested = "SAFE_POINT_REQUESTED"
	moveCheckpointed       = "CHECKPOINTED"
	moveAdmitted           = "DESTINATION_ADMITTED"
	moveRestored           = "RESTORED"
	moveCutoverCommitted   = "CUTOVER_COMMITTED"
	moveFailed             = "MOVE_FAILED"
	moveUnsafe             = "MOVE_UNSAFE"
)

// defaultSafePointTimeout is the fleet's default (fsm.DefaultSafePointTimeout).
const defaultSafePointTimeout = 30 * time.Second

// moveWaitSlack is how long session move waits past the safe-point timeout
// for the rest of the move when --timeout is not given.
const moveWaitSlack = 5 * time.Minute

// moveEnded reports whether a move state is terminal.
func moveEnded(state string) bool {
	return state == moveCutoverCommitted || state == moveFailed || state == moveUnsafe
}

// moveError is a move that ended without a cutover: "MOVE_FAILED: reason
// (in CHECKPOINTED)".
type moveError struct{ state, reason, phase string }

func (e *moveError) Error() string {
	s := e.state
	if e.reason != "" {
		s += ": " + e.reason
	}
	if e.phase != "" {
		s += " (in " + e.phase + ")"
	}
	return s
}

// errMoveDone ends the watch of a move once it has ended.
var errMoveDone = errors.New("move ended")

func sessionMoveCommand(fs *flag.FlagSet) runFunc {
	to := fs.String("to", "", "destination `NODE` (default: the least loaded node the fleet admits)")
	model := fs.String("model", "", "run the new epoch with `MODEL` (needs --accept-degradation)")
	provider := fs.String("provider", "", "run the new epoch with `PROVIDER` (needs --accept-degradation)")
	adapter := fs.String("adapter", "", "run the new epoch with runtime `ADAPTER` (default: the session's)")
	accountRef := fs.String("account-ref", "", "resolve account `NAME` on the destination (default: the session's)")
	accept := fs.Bool("accept-degradation", false, "accept what a model or provider change costs (tools, context size, a cold cache)")
	interrupt := fs.Bool("interrupt", false, "interrupt the turn in flight instead of waiting for it to finish (the safe point comes at once)")
	safePoint := fs.Duration("safe-point-timeout", defaultSafePointTimeout, "`DURATION` the source may take to finish its turn in flight; past it the move is MOVE_UNSAFE")
	timeout := fs.Duration("timeout", 0, "stop waiting after `DURATION` (the move goes on; default: the safe-point timeout + 5m)")
	requestID := fs.String("request-id", "", "idempotency `KEY`: a retry with the same key follows the same move")
	return func(ctx context.Context, c *cli, args []string) error {
		if *safePoint <= 0 || *safePoint%time.Millisecond != 0 {
			return usageErrorf("--safe-point-timeout must be a positive number of milliseconds")
		}
		wait := *timeout
		if wait <= 0 {
			wait = *safePoint + moveWaitSlack
		}
		id := args[0]
		client := c.sessionClient()

		// The journal head before the request: the move's events come after it.
		callCtx, cancel := unaryContext(ctx)
		d, err := client.DescribeSession(callCtx, connect.NewRequest(&fakv1.DescribeSessionRequest{SessionId: id}))
		cancel()
		if err != nil {
			return err
		}
		after := d.Msg.GetSession().GetHeadSeq()
		if *requestID != "" {
			after = 0 // a retry's events may precede the head: read them all
		}

		start := time.Now()
		callCtx, cancel = unaryContext(ctx)
		resp, err := client.MoveSession(callCtx, connect.NewRequest(&fakv1.MoveSessionRequest{
			SessionId: id, ToNode: *to, Model: *model, Provider: *provider, RuntimeAdapter: *adapter, AccountRef: *accountRef,
			SafePointTimeoutMs: safePoint.Milliseconds(), AcceptDegradation: *accept, RequestId: *requestID, Interrupt: *interrupt,
		}))
		cancel()
		if err != nil {
			return err
		}
		rtt := time.Since(start)
		mv := resp.Msg.GetMove()
		if !c.jsonOutput() {
			fmt.Fprintln(c.stdout, moveHeadline(mv))
		}

		// Each transition's time is the request's round trip plus the
		// fleet's commit time of the transition since it committed the
		// request (one clock, the leader's, for every transition).
		w := &moveWatch{moveID: mv.GetMoveId(), final: mv}
		emit := func(ev *fakv1.Event) error {
			line, done, ok := w.apply(ev)
			if !ok {
				return nil
			}
			if !c.jsonOutput() {
				elapsed := rtt + time.Duration(ev.GetTimeUnixNano()-mv.GetRequestedUnixNano())
				fmt.Fprintf(c.stdout, "%6dms  %s\n", max(elapsed, 0).Milliseconds(), escapeText(line))
			}
			if done {
				return errMoveDone
			}
			return nil
		}
		waitCtx, cancelWait := context.WithTimeout(ctx, wait)
		defer cancelWait()
		if !moveEnded(mv.GetState()) {
			err = followEvents(waitCtx, client, id, after, emit, c.stderr)
			// The wait's own deadline may end the stream as a clean end or
			// as deadline_exceeded — from the server, which got the
			// deadline in the Connect-Timeout-Ms header and may reach it a
			// moment before this process does: all mean "still going".
			switch {
			case errors.Is(err, errMoveDone):
			case ctx.Err() != nil:
				return fmt.Errorf("interrupted while move %s is %s; it goes on: fakctl session move-status %s", w.moveID, w.final.GetState(), id)
			case err != nil && waitCtx.Err() == nil && connect.CodeOf(err) != connect.CodeDeadlineExceeded:
				return err
			default:
				return fmt.Errorf("move %s is still %s after %s; it goes on: fakctl session move-status %s", w.moveID, w.final.GetState(), wait, id)
			}
		}
		final := w.final
		callCtx, cancel = unaryContext(ctx)
		if got, err := client.GetMove(callCtx, connect.NewRequest(&fakv1.GetMoveRequest{SessionId: id})); err == nil && got.Msg.GetMove().GetMoveId() == w.moveID {
			final = got.Msg.GetMove()
		}
		cancel()
		if c.jsonOutput() {
			if err := printMessage(c.stdout, final); err != nil {
				return err
			}
		}
		if st := final.GetState(); st != moveCutoverCommitted {
			return &moveError{state: st, reason: final.GetReason(), phase: final.GetPhase()}
		}
		return nil
	}
}

// moveHeadline names the move: "Move mov_… of ses_…: n1 (epoch 2) → n2".
func moveHeadline(m *fakv1.Move) string {
	s := fmt.Sprintf("Move %s of %s: %s (epoch %d) → %s", m.GetMoveId(), m.GetSessionId(), m.GetSourceNode(), m.GetSourceEpoch(), formatTarget(m.GetTarget()))
	if m.GetCause() != "" && m.GetCause() != "operator" {
		s += " (" + m.GetCause() + ")"
	}
	return s
}

// moveWatch follows one move through the journal.
type moveWatch struct {
	moveID string
	final  *fakv1.Move // the move as the events built it
}

// apply reads one event: ok when it is a transition of the watched move,
// with the line to print and whether the move ended.
func (w *moveWatch) apply(ev *fakv1.Event) (line string, done, ok bool) {
	if !journal.IsMove(ev.GetKind()) {
		return "", false, false
	}
	fact, err := journal.Decode(ev)
	f, ok := fact.(journal.Move)
	if err != nil || !ok || f.MoveID != w.moveID || f.State == "" {
		return "", false, false
	}
	m := w.final
	m.State = f.State
	switch f.State {
	case moveCheckpointed:
		m.CheckpointSeq, m.Digest = f.CheckpointSeq, f.Digest
	case moveAdmitted:
		m.Checks, m.Degradation = f.Checks, f.Degradation
		if f.Placement != nil {
			m.Admitted = f.Placement.API()
		}
	case moveRestored:
		m.NewEpoch = f.NewEpoch
	case moveFailed, moveUnsafe:
		m.Reason, m.Phase = f.Reason, f.Phase
	}
	return moveTransition(f, m.GetSourceNode()), moveEnded(f.State), true
}

// moveTransition renders one transition for session move: its state and
// what it fixed.
func moveTransition(f journal.Move, source string) string {
	switch f.State {
	case moveCheckpointed:
		s := fmt.Sprintf("%s at #%d", f.State, f.CheckpointSeq)
		if w := f.Workspace; w != nil && w.Bytes > 0 {
			s += fmt.Sprintf(", workspace %s in %d chunks", journal.FormatBytes(w.Bytes), w.Chunks)
		}
		return s
	case moveAdmitted:
		s := joinNonEmpty(f.State, f.To)
		if len(f.Checks) > 0 {
			s += " (" + strings.Join(f.Checks, ", ") + ")"
		}
		if len(f.Degradation) > 0 {
			s += "; degradation accepted: " + strings.Join(f.Degradation, "; ")
		}
		return s
	case moveRestored:
		s := fmt.Sprintf("%s epoch %d", f.State, f.NewEpoch)
		if f.To != "" {
			s += " on " + f.To
		}
		if t := f.Transfer; t != nil && t.BytesSent+t.BytesPresent > 0 {
			s += "; " + journal.TransferText(t)
		}
		if c := f.Cache; c != nil {
			s += "; " + journal.CacheText(c)
		}
		return s
	case moveCutoverCommitted:
		from := f.From
		if from == "" {
			from = source
		}
		return fmt.Sprintf("%s %s → %s", f.State, from, f.To)
	case moveFailed, moveUnsafe:
		s := f.State
		if f.Phase != "" {
			s += " in " + f.Phase
		}
		if f.Reason != "" {
			s += ": " + f.Reason
		}
		return s
	}
	return f.State
}

func sessionMoveStatusCommand(fs *flag.FlagSet) runFunc {
	return func(ctx context.Context, c *cli, args []string) error {
		ctx, cancel := unaryContext(ctx)
		defer cancel()
		resp, err := c.sessionClient().GetMove(ctx, connect.NewRequest(&fakv1.GetMoveRequest{SessionId: args[0]}))
		if err != nil {
			return err
		}
		if c.jsonOutput() {
			return printMessage(c.stdout, resp.Msg)
		}
		return writeMove(c.stdout, args[0], resp.Msg.GetMove())
	}
}

// writeMove prints a move's fields: where from and to, what each step fixed,
// how it ended.
func writeMove(w io.Writer, sessionID string, m *fakv1.Move) error {
	if m == nil {
		_, err := fmt.Fprintf(w, "Move: none (session %s has not been moved)\n", sessionID)
		return err
	}
	state := m.GetState()
	if !moveEnded(state) {
		state += " (in progress)"
	}
	fields := [][2]string{
		{"Move", m.GetMoveId()},
		{"Session", m.GetSessionId()},
		{"State", state},
		{"Cause", m.GetCause()},
		{"From", fmt.Sprintf("%s (epoch %d)", m.GetSourceNode(), m.GetSourceEpoch())},
		{"Requested", formatTarget(m.GetTarget())},
	}
	if m.GetCheckpointSeq() != 0 {
		fields = append(fields, [2]string{"Checkpoint", fmt.Sprintf("at seq %d (digest %s)", m.GetCheckpointSeq(), shortDigest(m.GetDigest()))})
	}
	if d := m.GetWorkspaceDigest(); d != "" {
		fields = append(fields, [2]string{"Workspace", fmt.Sprintf("%s in %d chunks (%s), snapshot %dms",
			journal.FormatBytes(m.GetWorkspaceBytes()), m.GetWorkspaceChunks(), d, m.GetWorkspaceSnapshotMs())})
	}
	if t := m.GetWorkspaceTransfer(); t != nil {
		fields = append(fields, [2]string{"Transfer", journal.TransferText(&journal.Transfer{
			BytesSent: t.BytesSent, BytesPresent: t.BytesPresent, ChunksSent: t.ChunksSent, ChunksPresent: t.ChunksPresent,
			FetchNanos: t.FetchMs * 1e6, RestoreNanos: t.RestoreMs * 1e6})})
	}
	if a := m.GetAdmitted(); a != nil {
		fields = append(fields, [2]string{"Admitted", journal.FormatPlacement(a)})
	}
	if l := m.GetCacheLineage(); l != nil {
		fields = append(fields, [2]string{"Cache", journal.CacheText(&journal.Cache{ProviderThread: l.ProviderThread, Cache: l.Cache, Why: l.Why})})
	}
	if m.GetState() == moveCutoverCommitted {
		warmup := "waiting for the first turn after the cutover"
		if n := m.GetWarmupNanos(); n > 0 {
			warmup = "the first turn after the cutover took " + time.Duration(n).Round(time.Millisecond).String()
		}
		fields = append(fields, [2]string{"Warm-up", warmup})
	}
	if len(m.GetChecks()) > 0 {
		fields = append(fields, [2]string{"Checks passed", strings.Join(m.GetChecks(), ", ")})
	}
	degradation := "none"
	if len(m.GetDegradation()) > 0 {
		degradation = strings.Join(m.GetDegradation(), "; ")
	}
	if m.GetAcceptDegradation() {
		degradation += " (accepted)"
	}
	fields = append(fields, [2]string{"Degradation", degradation})
	if e := m.GetNewEpoch(); e != 0 {
		fields = append(fields, [2]string{"New epoch", formatUint(e)})
	}
	if r := m.GetReason(); r != "" || m.GetPhase() != "" {
		fields = append(fields, [2]string{"Reason", r}, [2]string{"Failed in", m.GetPhase()})
	}
	fields = append(fields, [2]string{"Requested at", formatTime(m.GetRequestedUnixNano())})
	if t := m.GetStateUnixNano(); t != 0 && m.GetRequestedUnixNano() != 0 {
		fields = append(fields, [2]string{"Last transition", fmt.Sprintf("%s (%dms after the request)", formatTime(t),
			time.Duration(t-m.GetRequestedUnixNano()).Milliseconds())})
	}
	return writeFields(w, fields)
}

// formatTarget renders a requested placement: its node ("any admitted
// node" when none) and what it changes: "n2, model m2".
func formatTarget(p *fakv1.Placement) string {
	s := p.GetNode()
	if s == "" {
		s = "any admitted node"
	}
	for _, ch := range [][2]string{{"adapter", p.GetRuntimeAdapter()}, {"model", p.GetModel()},
		{"provider", p.GetProvider()}, {"account", p.GetAccountRef()}} {
		if ch[1] != "" {
			s += ", " + ch[0] + " " + ch[1]
		}
	}
	return s
}

// shortDigest keeps the first 12 hex digits of a SHA-256.
func shortDigest(d string) string {
	if len(d) > 12 {
		return d[:12] + "…"
	}
	return d
}

// formatMove is the one-line move of session describe: "mov_… CUTOVER_COMMITTED
// n1 → n2 (operator)".
func formatMove(m *fakv1.Move, completed uint64) string {
	if m == nil {
		return ""
	}
	to := m.GetAdmitted().GetNode()
	if to == "" {
		to = m.GetTarget().GetNode()
	}
	if to == "" {
		to = "any admitted node"
	}
	s := fmt.Sprintf("%s %s %s → %s (%s)", m.GetMoveId(), m.GetState(), m.GetSourceNode(), to, m.GetCause())
	if r := m.GetReason(); r != "" {
		s += ": " + r
	}
	if completed > 0 {
		s += fmt.Sprintf("; %s completed", journal.Plural(completed, "move"))
	}
	return s
}
