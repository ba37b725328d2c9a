package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/api/gen/fak/v1/fakv1connect"
)

type benchConfig struct {
	sessions int
	clients  int
	total    int64 // events
	size     int   // bytes of text per event
	batch    int   // events per call
	baseURLs []string
}

func benchAppendCommand(fs *flag.FlagSet) runFunc {
	sessions := fs.Int("sessions", 100, "`N` sessions to create and append to")
	clients := fs.Int("clients", 64, "`N` concurrent clients")
	total := fs.Int64("total", 100000, "`N` events to append in all")
	size := fs.Int("size", 256, "`BYTES` of text per event")
	batch := fs.Int("batch", 1, "`N` events per AppendEvents call")
	addrs := fs.String("addrs", "", "comma-separated node `ADDRS` to spread the clients across (default: --addr)")
	return func(ctx context.Context, c *cli, _ []string) error {
		cfg := benchConfig{
			sessions: *sessions, clients: *clients, total: *total, size: *size, batch: *batch,
			baseURLs: []string{c.baseURL},
		}
		switch {
		case cfg.sessions < 1, cfg.clients < 1, cfg.total < 1, cfg.batch < 1:
			return usageErrorf("--sessions, --clients, --total and --batch must be at least 1")
		case cfg.size < 0:
			return usageErrorf("--size must not be negative")
		}
		if *addrs != "" {
			baseURLs, err := parseAddrList(*addrs)
			if err != nil {
				return err
			}
			cfg.baseURLs = baseURLs
		}
		return runAppendBench(ctx, c, cfg)
	}
}

func parseAddrList(list string) ([]string, error) {
	var baseURLs []string
	for addr := range strings.SplitSeq(list, ",") {
		if strings.TrimSpace(addr) == "" {
			continue
		}
		baseURL, err := normalizeAddr(addr)
		if err != nil {
			return nil, err
		}
		baseURLs = append(baseURLs, baseURL)
	}
	if len(baseURLs) == 0 {
		return nil, usageErrorf("--addrs lists no address")
	}
	return baseURLs, nil
}

// appendBench is one run of "bench append". Workers claim events from a
// shared budget, so the run appends exactly cfg.total events (fewer if calls
// fail) whatever the number of clients.
type appendBench struct {
	cfg        benchConfig
	sessionIDs []string
	payload    string

	claimed  atomic.Int64 // events claimed by workers, successful or not
	appended atomic.Int64
	calls    atomic.Int64
	failed   atomic.Int64
	errors   errorSamples

	// latencies[i] is the latency of call i, where call i carries events
	// [i*batch, (i+1)*batch); zero for calls that failed or never ran.
	latencies []time.Duration
}

func runAppendBench(ctx context.Context, c *cli, cfg benchConfig) error {
	// A load generator should not spend its CPU on the collector: on a
	// shared 2-core host that CPU comes out of the fleet under test.
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(400))
	}
	// One RPC client per node, all sharing c's HTTP client and connections.
	clients := make([]fakv1connect.SessionServiceClient, len(cfg.baseURLs))
	for i, baseURL := range cfg.baseURLs {
		clients[i] = c.sessionClientAt(baseURL)
	}

	created := time.Now()
	sessionIDs, err := createBenchSessions(ctx, clients, cfg)
	if err != nil {
		return fmt.Errorf("create sessions: %w", err)
	}
	fmt.Fprintf(c.stderr, "Created %d sessions in %s\n", len(sessionIDs), time.Since(created).Round(time.Millisecond))

	numCalls := (cfg.total + int64(cfg.batch) - 1) / int64(cfg.batch)
	b := &appendBench{
		cfg:        cfg,
		sessionIDs: sessionIDs,
		payload:    randomText(cfg.size),
		latencies:  make([]time.Duration, numCalls),
	}
	start := time.Now()
	stopProgress := b.reportProgress(c.stderr, start)
	var workers sync.WaitGroup
	for i := range cfg.clients {
		client := clients[i%len(clients)]
		workers.Go(func() { b.work(ctx, client) })
	}
	workers.Wait()
	elapsed := time.Since(start)
	stopProgress()

	summary := b.summarize(elapsed)
	summary.Interrupted = ctx.Err() != nil
	if c.jsonOutput() {
		err = writeJSON(c.stdout, summary)
	} else {
		err = writeFields(c.stdout, summary.fields())
	}
	if err != nil {
		return err
	}
	if summary.Errors > 0 {
		fmt.Fprintf(c.stderr, "First distinct errors (count, message):\n")
		for _, sample := range b.errors.samples() {
			fmt.Fprintf(c.stderr, "  %d  %s\n", sample.count, sample.message)
		}
		return fmt.Errorf("%d of %d calls failed", summary.Errors, summary.Calls)
	}
	if summary.Interrupted {
		return errors.New("interrupted")
	}
	return nil
}

// createBenchSessions creates cfg.sessions sessions, cfg.clients at a time.
func createBenchSessions(ctx context.Context, clients []fakv1connect.SessionServiceClient, cfg benchConfig) ([]string, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	runID := time.Now().Format("20060102-150405")
	ids := make([]string, cfg.sessions)
	var next atomic.Int64
	var workers sync.WaitGroup
	for w := range min(cfg.clients, cfg.sessions) {
		client := clients[w%len(clients)]
		workers.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= cfg.sessions {
					return
				}
				callCtx, cancelCall := unaryContext(ctx)
				resp, err := client.CreateSession(callCtx, connect.NewRequest(&fakv1.CreateSessionRequest{
					Title:     fmt.Sprintf("bench %s #%d", runID, i),
					Objective: "fakctl bench append",
				}))
				cancelCall()
				if err != nil {
					cancel(err)
					return
				}
				ids[i] = resp.Msg.GetSession().GetSessionId()
			}
		})
	}
	workers.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	return ids, nil
}

// benchEventKind is the kind of the events bench append writes.
const benchEventKind = "note"

// work issues AppendEvents calls until the event budget is spent or ctx is
// cancelled.
func (b *appendBench) work(ctx context.Context, client fakv1connect.SessionServiceClient) {
	// The request is marshaled before the call returns, so one set of event
	// inputs can be reused for every call.
	// Notes are the kind any client may append (input goes through Act,
	// output is the runner's), and no runner reacts to them.
	events := make([]*fakv1.EventInput, b.cfg.batch)
	for i := range events {
		events[i] = &fakv1.EventInput{Kind: benchEventKind, Text: b.payload}
	}
	batch := int64(b.cfg.batch)
	for ctx.Err() == nil {
		first := b.claimed.Add(batch) - batch
		if first >= b.cfg.total {
			return
		}
		count := min(batch, b.cfg.total-first)
		call := first / batch
		req := &fakv1.AppendEventsRequest{
			SessionId: b.sessionIDs[call%int64(len(b.sessionIDs))],
			Events:    events[:count],
		}

		callCtx, cancel := unaryContext(ctx)
		started := time.Now()
		_, err := client.AppendEvents(callCtx, connect.NewRequest(req))
		latency := time.Since(started)
		cancel()

		if err != nil && ctx.Err() != nil {
			return // interrupted: not a failure of the fleet
		}
		b.calls.Add(1)
		if err != nil {
			b.failed.Add(1)
			b.errors.add(errorMessage(err))
			continue
		}
		b.latencies[call] = latency
		b.appended.Add(count)
	}
}

// randomText returns n printable bytes, so payloads are not trivially
// compressible.
func randomText(n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	text := make([]byte, n)
	for i := range text {
		text[i] = alphabet[rand.N(len(alphabet))]
	}
	return string(text)
}
