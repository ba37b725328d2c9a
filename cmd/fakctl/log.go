package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
	"github.com/fak-dev/fak/client/journal"
)

const (
	// readPageSize is the largest page ReadEvents allows.
	readPageSize = 1000
	// maxReconnects bounds consecutive failed attempts to resume a watch.
	maxReconnects = 30
	// Reconnect backoff doubles from the first delay up to the last.
	firstReconnectDelay = 100 * time.Millisecond
	maxReconnectDelay   = 3 * time.Second
)

// eventTimeLayout is how session log prints times of day.
const eventTimeLayout = "15:04:05.000"

func sessionLogCommand(fs *flag.FlagSet) runFunc {
	from := fs.Uint64("from", 1, "`SEQ` of the first event to print")
	follow := fs.Bool("follow", false, "keep printing new events until interrupted")
	stale := fs.Bool("stale", false, staleUsage+"; --follow always streams from the node at --addr")
	return func(ctx context.Context, c *cli, args []string) error {
		if *from == 0 {
			return usageErrorf("--from must be at least 1")
		}
		emit := c.printEvent
		if c.jsonOutput() {
			emit = func(ev *fakv1.Event) error { return printMessageLine(c.stdout, ev) }
		}
		if *follow {
			return followEvents(ctx, c.sessionClient(), args[0], *from-1, emit, c.stderr)
		}
		return readEvents(ctx, c.sessionClient(), args[0], *from, readConsistency(*stale), emit)
	}
}

// printEvent writes "SEQ  TIME  KIND  SUMMARY" on one line; the summary is
// the one every client prints for the event (journal.Summary).
func (c *cli) printEvent(ev *fakv1.Event) error {
	_, err := fmt.Fprintf(c.stdout, "%d  %s  %s  %s\n",
		ev.GetSeq(),
		formatClock(ev.GetTimeUnixNano()),
		ev.GetKind(),
		escapeText(journal.Summary(ev)))
	return err
}

// readEvents prints the events from seq from up to the journal head as the
// last page reported it.
func readEvents(ctx context.Context, client fakv1connect.SessionServiceClient, sessionID string,
	from uint64, consistency fakv1.ReadConsistency, emit func(*fakv1.Event) error,
) error {
	for {
		callCtx, cancel := unaryContext(ctx)
		resp, err := client.ReadEvents(callCtx, connect.NewRequest(&fakv1.ReadEventsRequest{
			SessionId:   sessionID,
			FromSeq:     from,
			Limit:       readPageSize,
			Consistency: consistency,
		}))
		cancel()
		if err != nil {
			return err
		}
		events := resp.Msg.GetEvents()
		for _, ev := range events {
			if err := emit(ev); err != nil {
				return err
			}
		}
		// An empty page ends the read even below the head, so a server that
		// skips sequence numbers cannot make us loop forever.
		if len(events) == 0 {
			return nil
		}
		last := events[len(events)-1].GetSeq()
		if last >= resp.Msg.GetHeadSeq() {
			return nil
		}
		from = last + 1
	}
}

// followEvents prints the events after seq after, then live ones, until ctx
// is cancelled (a clean exit: that is how the user stops following) or the
// server ends the stream because the session stopped. When the stream
// breaks it reconnects after the last printed event, so events are printed
// without gaps or duplicates.
func followEvents(ctx context.Context, client fakv1connect.SessionServiceClient, sessionID string,
	after uint64, emit func(*fakv1.Event) error, notices io.Writer,
) error {
	failures := 0
	for {
		progressed, err := watchOnce(ctx, client, sessionID, &after, emit)
		switch {
		case ctx.Err() != nil:
			return nil
		case err == nil:
			return nil
		case !isRetryable(err):
			return err
		}
		if progressed {
			failures = 0
		}
		failures++
		if failures > maxReconnects {
			return fmt.Errorf("gave up following after %d failed reconnects: %w", maxReconnects, err)
		}
		fmt.Fprintf(notices, "fakctl: stream interrupted (%s); reconnecting after seq %d\n", errorMessage(err), after)
		if !sleepContext(ctx, reconnectDelay(failures)) {
			return nil
		}
	}
}

// watchOnce runs one WatchEvents stream, advancing *after past every event it
// prints, and reports whether it printed any.
func watchOnce(ctx context.Context, client fakv1connect.SessionServiceClient, sessionID string,
	after *uint64, emit func(*fakv1.Event) error,
) (progressed bool, err error) {
	stream, err := client.WatchEvents(ctx, connect.NewRequest(&fakv1.WatchEventsRequest{
		SessionId: sessionID,
		AfterSeq:  *after,
	}))
	if err != nil {
		return false, err
	}
	defer stream.Close()
	for stream.Receive() {
		for _, ev := range stream.Msg().GetEvents() {
			if ev.GetSeq() <= *after {
				continue // already printed before a reconnect
			}
			if err := emit(ev); err != nil {
				return progressed, err
			}
			*after = ev.GetSeq()
			progressed = true
		}
	}
	return progressed, stream.Err()
}

// isRetryable reports whether a broken stream is worth resuming: the node
// went away or the connection failed, as opposed to the call being wrong.
func isRetryable(err error) bool {
	var connectErr *connect.Error
	if !errors.As(err, &connectErr) {
		return false
	}
	switch connectErr.Code() {
	case connect.CodeUnavailable, connect.CodeUnknown, connect.CodeInternal, connect.CodeCanceled:
		return true
	}
	return false
}

// reconnectDelay is the exponential backoff, with jitter, before attempt n.
func reconnectDelay(n int) time.Duration {
	delay := firstReconnectDelay << min(n-1, 10)
	delay = min(delay, maxReconnectDelay)
	return delay/2 + rand.N(delay/2+1)
}

// sleepContext waits for d and reports whether ctx is still live.
func sleepContext(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// formatClock renders a Unix nanosecond time as a local time of day.
func formatClock(unixNano int64) string {
	return time.Unix(0, unixNano).Local().Format(eventTimeLayout)
}
