package term

import (
	"context"
	"sync/atomic"
	"time"
)

// Interrupting the running turn (DESIGN.md §7): /interrupt, or Ctrl-C while
// a turn runs. The fleet closes the turn (turn.completed, interrupted by
// this client) and the runner stops it. A second Ctrl-C within
// doubleCtrlC, or Ctrl-C with no turn running, detaches, as Ctrl-C always
// has.

// doubleCtrlC is how soon a second Ctrl-C detaches instead.
const doubleCtrlC = 2 * time.Second

// reasonNoTurnRunning: the turn ended before the interrupt arrived.
const reasonNoTurnRunning = "NO_TURN_RUNNING"

// watchInterrupts routes Config.Interrupts: to the interactive loop once
// it runs (o.ctrlC), else to the end of the run (the returned context is
// canceled), so Ctrl-C while the client connects or replays still stops
// it. stop ends the routing.
func (o *opener) watchInterrupts(ctx context.Context) (context.Context, func()) {
	o.ctrlC = make(chan struct{}, 1)
	if o.cfg.Interrupts == nil {
		return ctx, func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var interactive atomic.Bool
	o.interactiveOn = func() { interactive.Store(true) }
	go func() {
		for {
			select {
			case <-done:
				return
			case _, ok := <-o.cfg.Interrupts:
				switch {
				case !ok:
					return
				case !interactive.Load():
					cancel()
				default:
					select {
					case o.ctrlC <- struct{}{}:
					default: // one is pending already
					}
				}
			}
		}
	}()
	return ctx, func() { close(done); cancel() }
}

// onCtrlC acts on a Ctrl-C in the interactive loop and reports whether to
// detach: with a turn running, the first interrupts it; a second within
// doubleCtrlC, or one with no turn running, detaches.
func (o *opener) onCtrlC(ctx context.Context, now time.Time) (detach bool) {
	if o.tr.turn == 0 || (!o.lastCtrlC.IsZero() && now.Sub(o.lastCtrlC) < doubleCtrlC) {
		return true
	}
	o.lastCtrlC = now
	o.interruptTurn(ctx, "Ctrl-C")
	o.out.notice("Ctrl-C again within %s detaches", doubleCtrlC)
	return false
}

// interruptTurn interrupts the running turn (/interrupt, Ctrl-C) when the
// capability set offers it; what names the trigger in a refusal.
func (o *opener) interruptTurn(ctx context.Context, what string) {
	if !o.allowed(ctx, "turn.interrupt", "not done: "+what) {
		return
	}
	turn := o.tr.turn
	_, err := o.conn.interrupt(ctx, o.tr.epoch, newRequestID())
	if reasonOf(err) == reasonStaleEpoch {
		if d, derr := o.conn.describe(ctx, o.conn.attachment()); derr == nil {
			o.tr.epoch = max(o.tr.epoch, d.GetSession().GetEpoch())
			_, err = o.conn.interrupt(ctx, o.tr.epoch, newRequestID())
		}
	}
	switch {
	case err == nil && turn != 0:
		o.out.notice("interrupted the turn of input #%d", turn)
	case err == nil:
		o.out.notice("interrupted the running turn")
	case reasonOf(err) == reasonNoTurnRunning:
		o.out.notice("not done: %s: no turn is running (it ended)", what)
	default:
		o.out.notice("not done: %s: %s", what, ErrorLine(err))
	}
}
