package runner

import (
	"context"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/fak-dev/fak/fsm"
)

// Output coalescing: streamed text is journaled as it arrives, but at most
// one output event per OutputInterval unless OutputMaxBytes are waiting.
// A model streaming 2,000 tokens/s thus costs about 20 events/s, and a
// reader sees text within OutputInterval plus a commit.
const (
	OutputInterval = 50 * time.Millisecond
	OutputMaxBytes = 4 << 10
)

// Output streams a turn's text into output events, coalesced. Write never
// waits for the cluster (a background writer emits); Flush waits until
// everything written is journaled and must be called before the runtime
// emits any other event, so events keep the order they happened in. Close
// flushes and stops the writer; Detach stops it and returns what is left.
// After a write error, every call returns it.
type Output struct {
	t    Turn
	ctx  context.Context
	kick chan struct{}
	done chan struct{}

	mu       sync.Mutex
	cond     *sync.Cond
	buf      []byte
	inflight bool // the writer is emitting
	flushers int  // Flush calls waiting: the rest is cut short
	err      error
	closed   bool
}

// NewOutput starts an output stream for turn t; ctx bounds its writes.
func NewOutput(ctx context.Context, t Turn) *Output {
	o := &Output{t: t, ctx: ctx, kick: make(chan struct{}, 1), done: make(chan struct{})}
	o.cond = sync.NewCond(&o.mu)
	go o.run()
	return o
}

func (o *Output) poke() {
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

// Write queues text for the journal.
func (o *Output) Write(text string) error {
	o.mu.Lock()
	if o.err != nil || o.closed || text == "" {
		err := o.err
		o.mu.Unlock()
		return err
	}
	o.buf = append(o.buf, text...)
	o.mu.Unlock()
	o.poke()
	return nil
}

// Flush returns once everything written so far is journaled (or failed).
func (o *Output) Flush() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.flushers++
	defer func() { o.flushers-- }()
	for (len(o.buf) > 0 || o.inflight) && o.err == nil && !o.closed {
		o.poke()
		o.cond.Wait()
	}
	return o.err
}

// Err is the first write error, if any.
func (o *Output) Err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err
}

// Close flushes what is left and stops the writer.
func (o *Output) Close() error {
	err := o.Flush()
	o.mu.Lock()
	o.closed = true
	o.cond.Broadcast()
	o.mu.Unlock()
	o.poke()
	<-o.done
	return err
}

// Detach stops the writer without writing what is left, once no write is
// in flight, and returns that text: the runtime hands it to the runner
// (TurnResult.Tail), which journals it with turn.completed in one write.
func (o *Output) Detach() (string, error) {
	o.mu.Lock()
	for o.inflight && o.err == nil {
		o.cond.Wait()
	}
	tail, err := string(o.buf), o.err
	o.buf, o.closed = nil, true
	o.cond.Broadcast()
	o.mu.Unlock()
	o.poke()
	<-o.done
	if err != nil {
		return "", err
	}
	return tail, nil
}

// run emits the buffer whenever it holds text, then rests OutputInterval,
// cut short when OutputMaxBytes wait or a Flush asks.
func (o *Output) run() {
	defer close(o.done)
	rest := time.NewTimer(OutputInterval)
	rest.Stop()
	for {
		<-o.kick
		o.mu.Lock()
		if o.closed {
			o.mu.Unlock()
			return
		}
		text := o.buf
		o.buf = nil
		o.inflight = len(text) > 0
		o.mu.Unlock()
		if len(text) == 0 {
			continue
		}
		var err error
		for _, piece := range splitText(text, outputMaxEvent) {
			if _, err = o.t.Emit(o.ctx, Event{Kind: fsm.KindOutput, Text: piece}); err != nil {
				break
			}
		}
		o.mu.Lock()
		o.inflight = false
		if err != nil && o.err == nil {
			o.err = err
		}
		o.cond.Broadcast()
		o.mu.Unlock()
		if err != nil {
			continue // every later call returns err; drain kicks until closed
		}
		rest.Reset(OutputInterval)
	resting:
		for {
			select {
			case <-rest.C:
				break resting
			case <-o.kick:
				if o.urgent() {
					rest.Stop()
					break resting
				}
			}
		}
		o.poke() // what arrived while resting goes out now
	}
}

// outputMaxEvent bounds one output event: text that piled up while a
// write was in flight goes out in pieces well under the API's event limit.
const outputMaxEvent = 64 << 10

// splitText cuts b into pieces of at most max bytes, never inside a UTF-8
// sequence.
func splitText(b []byte, max int) []string {
	var out []string
	for len(b) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(b[cut]) {
			cut--
		}
		if cut == 0 {
			cut = max
		}
		out = append(out, string(b[:cut]))
		b = b[cut:]
	}
	return append(out, string(b))
}

// urgent: enough text waits, a Flush waits for it, or Close.
func (o *Output) urgent() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.buf) >= OutputMaxBytes || o.flushers > 0 || o.closed
}

// Truncate cuts s to at most n bytes on a rune boundary and marks the cut
// with "…": for a line or a message quoted in an error.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}
