package main

import (
	"bufio"
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
		if *follow {
			return followEvents(ctx, c.sessionClient(), args[0], *from-1, c.eventPrinter(c.stdout), c.stderr)
		}
		// A page is printed in one write: a million events are not a
		// million system calls.
		out := bufio.NewWriterSize(c.stdout, 64<<10)
		emit := c.eventPrinter(out)
		page := func(events []*fakv1.Event) error {
			for _, ev := range events {
				if err := emit(ev); err != nil {
					return err
				}
			}
			return out.Flush()
		}
		return readEventPages(ctx, c.sessionClient(), args[0], *from, readConsistency(*stale), page)
	}
}

// eventPrinter prints one event per line to w: "SEQ  TIME  KIND  SUMMARY"
// (the summary every client prints for the event, journal.Summary), or
// with -o json the event as JSON.
func (c *cli) eventPrinter(w io.Writer) func(*fakv1.Event) error {
	if c.jsonOutput() {
		return func(ev *fakv1.Event) error { return printMessageLine(w, ev) }
	}
	return func(ev *fakv1.Event) error {
		_, err := fmt.Fprintf(w, "%d  %s  %s  %s\n",
			ev.GetSeq(),
			formatClock(ev.GetTimeUnixNano()),
			ev.GetKind(),
			escapeText(journal.Summary(ev)))
		return err
	}
}

// readEvents prints the events from seq from up to the journal head as the
// last page reported it.
func readEvents(ctx context.Context, client fakv1connect.SessionServiceClient, sessionID string,
	from uint64, consistency fakv1.ReadConsistency, emit func(*fakv1.Event) error,
) error {
	return readEventPages(ctx, client, sessionID, from, consistency, func(events []*fakv1.Event) error {
		for _, ev := range events {
			if err := emit(ev); err != nil {
				return err
			}
		}
		return nil
	})
}

// readEventPages hands page the events from seq from up to the journal
// head as the last page reported it, a page at a time. The next page is
// asked for as soon as a page arrives, so the node reads it while this
// one is printed.
func readEventPages(ctx context.Context, client fakv1connect.SessionServiceClient, sessionID string,
	from uint64, consistency fakv1.ReadConsistency, page func([]*fakv1.Event) error,
) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // abandons a page asked for ahead
	next := readPageAsync(ctx, client, sessionID, from, consistency)
	for {
		resp := <-next
		if resp.err != nil {
			return resp.err
		}
		events := resp.msg.GetEvents()
		// An empty page ends the read even below the head, so a server that
		// skips sequence numbers cannot make us loop forever.
		if len(events) == 0 {
			return nil
		}
		last := events[len(events)-1].GetSeq()
		done := last >= resp.msg.GetHeadSeq()
		if !done {
			next = readPageAsync(ctx, client, sessionID, last+1, consistency)
		}
		if err := page(events); err != nil {
			return err
		}
		if done {
			return nil
		}
	}
}

// pageResult is one ReadEvents answer.
type pageResult struct {
	msg *fakv1.ReadEventsResponse
	err error
}

// readPageAsync asks for the page of events from seq from; the answer
// arrives on the returned channel.
func readPageAsync(ctx context.Context, client fakv1connect.SessionServiceClient, sessionID string,
	from uint64, consistency fakv1.ReadConsistency,
) <-chan pageResult {
	ch := make(chan pageResult, 1)
	go func() {
		callCtx, cancel := unaryContext(ctx)
		defer cancel()
		resp, err := client.ReadEvents(callCtx, connect.NewRequest(&fakv1.ReadEventsRequest{
			SessionId:   sessionID,
			FromSeq:     from,
			Limit:       readPageSize,
			Consistency: consistency,
		}))
		if err != nil {
			ch <- pageResult{err: err}
			return
		}
		ch <- pageResult{msg: resp.Msg}
	}()
	return ch
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
