package term

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
)

// watchResult is what the watch goroutine hands the input loop: a batch of
// events in journal order, or the error that ended the watch for good.
type watchResult struct {
	events []*fakv1.Event
	err    error
}

// watch streams the events after after, with this client's attachment,
// until ctx ends. When the stream breaks it reconnects, through another
// node when it can, resuming after the last event it delivered: nothing is
// skipped and nothing is delivered twice.
func (c *sessionConn) watch(ctx context.Context, after uint64, out chan<- watchResult) {
	failures := 0
	for {
		id := c.attachment()
		progressed, err := c.watchOnce(ctx, id, &after, out)
		if ctx.Err() != nil {
			return
		}
		if progressed {
			failures = 0
		}
		switch {
		case err == nil:
			// The server ended the stream (a node shutting down): resume.
		case reasonOf(err) == reasonAttachmentNotFound:
			if rerr := c.reattach(ctx, id); rerr != nil && !transient(rerr) {
				sendResult(ctx, out, watchResult{err: rerr})
				return
			}
		case !transient(err):
			sendResult(ctx, out, watchResult{err: err})
			return
		}
		failures++
		if failures > maxWatchFailures {
			sendResult(ctx, out, watchResult{err: fmt.Errorf("gave up watching after %d failed reconnects: %w", maxWatchFailures, err)})
			return
		}
		reason := "stream ended"
		if err != nil {
			reason = ErrorLine(err)
		}
		if !sleepCtx(ctx, retryDelay(failures)) {
			return
		}
		if failures > 1 || err != nil {
			c.rotate()
		}
		if derr := c.discover(ctx); derr != nil && ctx.Err() == nil {
			c.rotate()
		}
		c.notices("watch interrupted (%s); resuming after #%d via %s", reason, after, c.current())
	}
}

func (c *sessionConn) watchOnce(ctx context.Context, attachmentID string, after *uint64, out chan<- watchResult) (progressed bool, err error) {
	stream, err := c.client(c.current()).WatchEvents(ctx, connect.NewRequest(&fakv1.WatchEventsRequest{
		SessionId: c.sessionID, AfterSeq: *after, AttachmentId: attachmentID,
	}))
	if err != nil {
		return false, err
	}
	defer stream.Close()
	for stream.Receive() {
		var batch []*fakv1.Event
		for _, ev := range stream.Msg().GetEvents() {
			if ev.GetSeq() <= *after {
				continue // delivered before a reconnect
			}
			batch = append(batch, ev)
			*after = ev.GetSeq()
		}
		if len(batch) == 0 {
			continue // a heartbeat
		}
		if !sendResult(ctx, out, watchResult{events: batch}) {
			return progressed, nil
		}
		progressed = true
	}
	return progressed, stream.Err()
}

func sendResult(ctx context.Context, out chan<- watchResult, r watchResult) bool {
	select {
	case out <- r:
		return true
	case <-ctx.Done():
		return false
	}
}

// retryDelay is the exponential backoff, with jitter, before attempt n.
func retryDelay(n int) time.Duration {
	d := min(firstRetryDelay<<min(n-1, 10), maxRetryDelay)
	return d/2 + rand.N(d/2+1)
}

// sleepCtx waits for d and reports whether ctx is still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
