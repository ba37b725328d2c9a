package term

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/client/journal"
)

// ledger runs a typed ledger command (/fresh, /reset, /clear, /new,
// /fork [SEQ]) on the current session. A refusal is a notice; the error it
// returns (following the child failed) ends the client.
func (o *opener) ledger(ctx context.Context, words []string) error {
	verb := strings.TrimPrefix(words[0], "/")
	var at uint64
	if verb == "fork" && len(words) > 1 {
		n, err := strconv.ParseUint(strings.TrimPrefix(words[1], "#"), 10, 64)
		if err != nil || n == 0 || len(words) > 2 {
			o.out.notice("usage: /fork [SEQ] (fork at address SEQ, default the head)")
			return nil
		}
		at = n
	}
	if !o.allowed(ctx, "session."+verb, "not done: "+strings.Join(words, " ")) {
		return nil
	}
	id, rid := o.conn.sessionID, newRequestID()
	var b *fakv1.Boundary
	err := o.conn.call(ctx, func(ctx context.Context, cl fakv1connect.SessionServiceClient) error {
		var err error
		switch verb {
		case "fresh":
			var r *connect.Response[fakv1.FreshSessionResponse]
			if r, err = cl.FreshSession(ctx, connect.NewRequest(&fakv1.FreshSessionRequest{SessionId: id, RequestId: rid})); err == nil {
				b = r.Msg.GetBoundary()
			}
		case "reset":
			var r *connect.Response[fakv1.ResetSessionResponse]
			if r, err = cl.ResetSession(ctx, connect.NewRequest(&fakv1.ResetSessionRequest{SessionId: id, RequestId: rid})); err == nil {
				b = r.Msg.GetBoundary()
			}
		case "clear":
			var r *connect.Response[fakv1.ClearSessionResponse]
			if r, err = cl.ClearSession(ctx, connect.NewRequest(&fakv1.ClearSessionRequest{SessionId: id, RequestId: rid})); err == nil {
				b = r.Msg.GetBoundary()
			}
		case "new":
			var r *connect.Response[fakv1.NewSessionResponse]
			if r, err = cl.NewSession(ctx, connect.NewRequest(&fakv1.NewSessionRequest{SessionId: id, RequestId: rid})); err == nil {
				b = r.Msg.GetBoundary()
			}
		case "fork":
			var r *connect.Response[fakv1.ForkSessionResponse]
			if r, err = cl.ForkSession(ctx, connect.NewRequest(&fakv1.ForkSessionRequest{SessionId: id, AtSeq: at, RequestId: rid})); err == nil {
				b = r.Msg.GetBoundary()
			}
		}
		return err
	})
	if err != nil {
		o.out.notice("not done: /%s: %s", verb, ErrorLine(err))
		return nil
	}
	s := b.GetSession()
	switch verb {
	case "fresh":
		o.tr.epoch = max(o.tr.epoch, s.GetEpoch())
		o.out.notice("fresh: epoch %d, provider session %s, %s pruned (0 is normal)", s.GetEpoch(), s.GetProviderSessionId(), journal.Plural(uint64(b.GetPruned()), "cached provider entry"))
		return nil
	case "reset":
		o.out.notice("context reset at #%d: the agent starts from a fresh context; the history above stays", s.GetResetSeq())
		return nil
	}
	how := verb + " of " + id
	if verb == "fork" {
		how += fmt.Sprintf(" at #%d", s.GetForkAddress())
	}
	return o.follow(ctx, s.GetSessionId(), how)
}

// move asks the fleet to move the session's execution to a node (the
// least loaded admitted one when none is named). The client stays
// attached: the move.* events show the progress, and the epoch.changed of
// the cutover sets the epoch the next input is sent against.
func (o *opener) move(ctx context.Context, args []string) {
	if len(args) > 1 {
		o.out.notice("usage: /move [NODE] (default: the least loaded node the fleet admits)")
		return
	}
	to := ""
	if len(args) == 1 {
		to = args[0]
	}
	if !o.allowed(ctx, "session.move", "not done: "+strings.Join(append([]string{"/move"}, args...), " ")) {
		return
	}
	id, rid := o.conn.sessionID, newRequestID()
	var mv *fakv1.Move
	err := o.conn.call(ctx, func(ctx context.Context, cl fakv1connect.SessionServiceClient) error {
		r, err := cl.MoveSession(ctx, connect.NewRequest(&fakv1.MoveSessionRequest{SessionId: id, ToNode: to, RequestId: rid}))
		if err == nil {
			mv = r.Msg.GetMove()
		}
		return err
	})
	if err != nil {
		o.out.notice("not done: /move %s: %s", to, ErrorLine(err))
		return
	}
	if to == "" {
		to = "the least loaded node the fleet admits"
	}
	o.out.notice("moving to %s (move %s); keep typing: input waits in the journal for whichever epoch is current", to, mv.GetMoveId())
}

// stop stops the session (/stop [REASON]); the session.stopped event that
// follows ends the client, as a stop by any other client does.
func (o *opener) stop(ctx context.Context, reason string) {
	if !o.allowed(ctx, "session.stop", "not done: /stop") {
		return
	}
	if reason == "" {
		reason = "stopped from the terminal by " + o.cfg.Name
	}
	id, rid := o.conn.sessionID, newRequestID()
	err := o.conn.call(ctx, func(ctx context.Context, cl fakv1connect.SessionServiceClient) error {
		_, err := cl.StopSession(ctx, connect.NewRequest(&fakv1.StopSessionRequest{SessionId: id, Reason: reason, RequestId: rid}))
		return err
	})
	if err != nil {
		o.out.notice("not done: /stop: %s", ErrorLine(err))
	}
}

// follow moves the client to another session (the child of a clear, new
// or fork): it leaves the current one, prints what happened there since
// the last event shown, then describes the child, replays it, attaches,
// takes its input lease and watches it.
func (o *opener) follow(ctx context.Context, child, how string) error {
	o.leave()
	if err := o.printTail(ctx); err != nil {
		o.out.notice("could not read the end of %s: %s", o.conn.sessionID, ErrorLine(err))
	}
	o.out.notice("now in %s (%s)", child, how)
	o.conn = o.conn.forSession(child)
	o.mine = make(map[uint64]bool)
	d, err := o.conn.describe(ctx, "")
	if err != nil {
		return fmt.Errorf("describe %s: %w", child, err)
	}
	now := time.Now()
	o.tr = tracker{}
	o.tr.init(d, now)
	o.out.raw(header(d, now))
	head := d.GetSession().GetHeadSeq()
	// A fork's history up to the fork address is the source's, at the same
	// addresses, already on screen.
	from := max(d.GetSession().GetForkAddress()+1, 1)
	if head >= DefaultReplay && head-DefaultReplay+1 > from {
		from = head - DefaultReplay + 1
	}
	if from <= head {
		o.out.notice("replay #%d..#%d", from, head)
		if err := o.replay(ctx, from, head); err != nil {
			return fmt.Errorf("replay %s: %w", child, err)
		}
	}
	return o.join(ctx, d, head, false)
}

// printTail prints the events of the current session after the last one
// shown, up to its head: after a clear, its stop and this client's leaving.
func (o *opener) printTail(ctx context.Context) error {
	d, err := o.conn.describe(ctx, "")
	if err != nil {
		return err
	}
	if head := d.GetSession().GetHeadSeq(); head > o.shown {
		return o.replay(ctx, o.shown+1, head)
	}
	return nil
}

// replay prints the events from..to (the head the descriptor reported).
func (o *opener) replay(ctx context.Context, from, to uint64) error {
	for from <= to {
		var events []*fakv1.Event
		err := o.conn.call(ctx, func(ctx context.Context, cl fakv1connect.SessionServiceClient) error {
			r, err := cl.ReadEvents(ctx, connect.NewRequest(&fakv1.ReadEventsRequest{
				SessionId: o.conn.sessionID, FromSeq: from, Limit: uint32(min(to-from+1, replayPage)),
			}))
			if err == nil {
				events = r.Msg.GetEvents()
			}
			return err
		})
		if err != nil {
			return err
		}
		if len(events) == 0 {
			return nil
		}
		for _, ev := range events {
			if ev.GetSeq() > to {
				return nil
			}
			o.out.event(ev)
			o.tr.replayed(ev)
		}
		from = events[len(events)-1].GetSeq() + 1
	}
	return nil
}
