package node_test

// Benchmarks of real agents inside sessions (issue 14, "Figures"): what
// fak's runner adds around a model call, how a fast stream is journaled,
// and 50 model sessions at once, each on an in-process three-node fleet
// against the fake OpenAI-compatible server (modeltest), with the echo
// runtime at turn length 0 beside them as the baseline. Run them together:
//
//	go test -run '^$' -bench BenchmarkRunner -benchtime 1x ./node
//
// One op is one whole workload on the benchmark's fleet (built once per
// benchmark); -benchtime Nx repeats the workload N times and pools the
// samples. Times compared are the leader's stamps on events (taken as the
// leader proposes the command, one Raft round before it commits) and the
// fake server's clock: one process, one clock. An event "committed" is
// the moment the leader's replica applied it (commitClock); "proposed" is
// the leader's stamp on it, taken as the leader proposes the command. The
// first turn of every session (its runtime starts, its connection to the
// server opens) is a warm-up and not counted.

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/fsm"
	"github.com/fak-dev/fak/fsm/fsmpb"
	"github.com/fak-dev/fak/node"
	"github.com/fak-dev/fak/node/runner/model/modeltest"
	"github.com/fak-dev/fak/node/testcluster"
)

// benchRuntime is the model runtime of the benchmark fleets: a plain chat
// model, no tools.
const benchRuntime = "gpt"

// runnerBenchFleet is a three-node fleet whose nodes offer the echo
// runtime with turn length 0 and a model runtime on srv, every node record
// committed with both.
func runnerBenchFleet(b *testing.B, srv *modeltest.Server) *testcluster.Cluster {
	b.Helper()
	// Echo with no pause answers as fast as the runner writes. Leases and
	// attachments get the longest lifetime allowed: nothing renews them.
	c := testcluster.New(b, testcluster.Options{
		EchoTurn: -1, LeaseTTL: 10 * time.Minute, AttachmentTTL: 10 * time.Minute,
		Configure: func(_ string, cfg *node.Config) {
			cfg.Runtimes = append(cfg.Runtimes, node.RuntimeConfig{Name: benchRuntime, Adapter: node.AdapterModel, Endpoint: srv.URL, Model: "fake-4"})
		},
	})
	c.WaitFor(30*time.Second, "three node records offering the model runtime", func() bool {
		l := c.Leader()
		if l == nil {
			return false
		}
		recs, err := l.Running().FSM().Nodes()
		if err != nil {
			return false
		}
		n := 0
		for _, r := range recs {
			if slices.Contains(r.RuntimeAdapters, benchRuntime) {
				n++
			}
		}
		return n == len(c.Nodes)
	})
	return c
}

// benchSession is one session with its client: attached through node via,
// holding the lease, watching the journal there.
type benchSession struct {
	c       *testcluster.Cluster
	id, att string
	on, via *testcluster.Node
	// completed gets the input seq of each turn.completed the watch sees.
	completed chan uint64
}

func newBenchSession(b *testing.B, c *testcluster.Cluster, runtime string, on, via *testcluster.Node) *benchSession {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := c.Sessions(via)
	r, err := cl.CreateSession(ctx, connect.NewRequest(&fakv1.CreateSessionRequest{
		Title: "bench " + runtime, Placement: &fakv1.Placement{RuntimeAdapter: runtime, Node: on.Name},
	}))
	if err != nil {
		b.Fatalf("create a %s session on %s: %v", runtime, on.Name, err)
	}
	s := &benchSession{c: c, id: r.Msg.Session.SessionId, on: on, via: via, completed: make(chan uint64, 4096)}
	a, err := cl.Attach(ctx, connect.NewRequest(&fakv1.AttachRequest{
		SessionId: s.id, ClientKind: "terminal", ClientName: "bench", Capabilities: []string{"input.text"},
	}))
	if err != nil {
		b.Fatal(err)
	}
	s.att = a.Msg.AttachmentId
	if _, err := cl.TakeLease(ctx, connect.NewRequest(&fakv1.TakeLeaseRequest{SessionId: s.id, AttachmentId: s.att})); err != nil {
		b.Fatal(err)
	}
	wctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		stream, err := cl.WatchEvents(wctx, connect.NewRequest(&fakv1.WatchEventsRequest{SessionId: s.id, AttachmentId: s.att}))
		if err != nil {
			return
		}
		defer stream.Close()
		for stream.Receive() {
			for _, ev := range stream.Msg().Events {
				if ev.Kind == fsm.KindTurnCompleted {
					s.completed <- inputSeqOf(ev.Data)
				}
			}
		}
	}()
	// Before the fleet's own cleanup (registered earlier, run later).
	b.Cleanup(func() { stop(); <-done })
	return s
}

// turn sends text as input and waits until the client sees its turn
// completed. It returns the input's seq.
func (s *benchSession) turn(text string, timeout time.Duration) (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	r, err := s.c.Sessions(s.via).Act(ctx, connect.NewRequest(&fakv1.ActRequest{
		SessionId: s.id, AttachmentId: s.att, ExpectedEpoch: 1,
		Action: &fakv1.ActRequest_Input{Input: &fakv1.InputText{Text: text}},
	}))
	if err != nil {
		return 0, fmt.Errorf("act %q on %s: %w", text, s.id, err)
	}
	seq := r.Msg.Seq
	for {
		select {
		case got := <-s.completed:
			if got == seq {
				return seq, nil
			}
		case <-ctx.Done():
			return seq, fmt.Errorf("session %s on %s: no turn.completed for input #%d (%q) within %s", s.id, s.on.Name, seq, text, timeout)
		}
	}
}

func inputSeqOf(data []byte) uint64 {
	var f struct {
		InputSeq uint64 `json:"input_seq"`
		Status   string `json:"status"`
	}
	_ = json.Unmarshal(data, &f)
	return f.InputSeq
}

// commitClock notes when the leader's replica applied each event of the
// sessions it watches: the moment the event committed, since a leader
// applies what commits at once. It follows the FSM's change feed, so a
// change costs one session read.
type commitClock struct {
	mu   sync.Mutex
	at   map[string]map[uint64]time.Time // session → seq → applied
	head map[string]uint64
	stop func()
}

// watchCommits starts a clock on the current leader's replica for the
// sessions ids; Stop ends it.
func watchCommits(b *testing.B, c *testcluster.Cluster, ids ...string) *commitClock {
	b.Helper()
	return watchApplied(b, c.Leader(), ids...)
}

// watchApplied is watchCommits on node n's replica: when n applied each
// event.
func watchApplied(b *testing.B, n *testcluster.Node, ids ...string) *commitClock {
	b.Helper()
	f := n.Running().FSM()
	k := &commitClock{at: map[string]map[uint64]time.Time{}, head: map[string]uint64{}}
	for _, id := range ids {
		s, err := f.Session(id)
		if err != nil {
			b.Fatal(err)
		}
		k.at[id], k.head[id] = map[uint64]time.Time{}, s.HeadSeq
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		changed, cursor := f.Changed(), f.ChangeCursor()
		for {
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
			now := time.Now()
			changed = f.Changed()
			changes, next, _ := f.ChangesSince(cursor)
			cursor = next
			k.mu.Lock()
			for _, ch := range changes {
				if _, ok := k.at[ch.SessionID]; !ok {
					continue
				}
				s, err := f.Session(ch.SessionID)
				if err != nil {
					continue
				}
				for seq := k.head[ch.SessionID] + 1; seq <= s.HeadSeq; seq++ {
					k.at[ch.SessionID][seq] = now
				}
				k.head[ch.SessionID] = max(k.head[ch.SessionID], s.HeadSeq)
			}
			k.mu.Unlock()
		}
	}()
	k.stop = func() { cancel(); <-done }
	b.Cleanup(k.Stop)
	return k
}

// Stop ends the clock (idempotent).
func (k *commitClock) Stop() {
	if k.stop != nil {
		k.stop()
		k.stop = nil
	}
}

// committed is when the leader applied event seq of session id (zero:
// not seen).
func (k *commitClock) committed(id string, seq uint64) time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.at[id][seq]
}

// benchTurn is one turn as the journal holds it: the leader's stamps of
// the input, turn.started (the turn's charge travels in the same write),
// its last output and turn.completed, the seqs of the input and of
// turn.completed; and what it said.
type benchTurn struct {
	text                          string
	input, started                time.Time
	lastOutput, completed         time.Time
	inputSeq, startedSeq, doneSeq uint64
	status, output                string
	completions                   int // turn.completed events naming the input
	firstOutput                   int // index of its first output event in the journal read
}

// journalTurns reads a session's journal from the leader's replica and
// gathers its turns by input seq.
func journalTurns(b *testing.B, c *testcluster.Cluster, id string) ([]*fsmpb.Event, map[uint64]*benchTurn) {
	b.Helper()
	evs, _, err := c.Leader().Running().FSM().Events(id, 1, 1<<30)
	if err != nil {
		b.Fatal(err)
	}
	turns := map[uint64]*benchTurn{}
	var cur *benchTurn // the turn running
	for i, ev := range evs {
		at := time.Unix(0, ev.TimeUnixNano)
		switch ev.Kind {
		case fsm.KindInput:
			turns[ev.Seq] = &benchTurn{text: ev.Text, input: at, inputSeq: ev.Seq, firstOutput: -1}
		case fsm.KindTurnStarted:
			cur = turns[inputSeqOf(ev.Data)]
			if cur != nil {
				cur.started, cur.startedSeq = at, ev.Seq
			}
		case fsm.KindOutput:
			if cur != nil {
				if cur.firstOutput < 0 {
					cur.firstOutput = i
				}
				cur.output += ev.Text
				cur.lastOutput = at
			}
		case fsm.KindTurnCompleted:
			if t := turns[inputSeqOf(ev.Data)]; t != nil {
				var f struct {
					Status string `json:"status"`
				}
				_ = json.Unmarshal(ev.Data, &f)
				t.completed, t.doneSeq, t.status = at, ev.Seq, f.Status
				t.completions++
			}
			cur = nil
		}
	}
	return evs, turns
}

// requestsByText indexes the server's requests by their last user text.
func requestsByText(srv *modeltest.Server) map[string]modeltest.Request {
	out := map[string]modeltest.Request{}
	for _, r := range srv.Requests() {
		out[r.LastUserText()] = r
	}
	return out
}

// overhead holds the runner's share of model turns: input committed →
// the model request received (in), and the stream finished →
// turn.completed committed (out); the same from and to the leader's
// stamps instead (in-proposed: from the input's proposal; out-proposed:
// to turn.completed's proposal); and the steps of in: the input committed
// → turn.started proposed (pickup: the input reaches the runner's replica,
// the runner reads the session and proposes the turn's start with its
// charge), → turn.started committed (start), → the request (call: the
// context read, the request built and sent).
type overhead struct {
	in, out, inProposed, outProposed []time.Duration
	pickup, start, call              []time.Duration
}

// add measures the model turn t of session id (answered by reqs) and
// checks that it was answered once, completed, with the fake server's
// echo.
func (o *overhead) add(b *testing.B, k *commitClock, id string, t *benchTurn, reqs map[string]modeltest.Request) {
	b.Helper()
	if t.completions != 1 || t.status != "completed" || t.output != modeltest.EchoPrefix+t.text {
		b.Fatalf("turn of %q: %d turn.completed, status %q, output %q", t.text, t.completions, t.status, t.output)
	}
	r, ok := reqs[t.text]
	if !ok || r.Finished.IsZero() {
		b.Fatalf("turn of %q: no finished request for it (%+v)", t.text, t)
	}
	input, started, done := k.committed(id, t.inputSeq), k.committed(id, t.startedSeq), k.committed(id, t.doneSeq)
	if input.IsZero() || started.IsZero() || done.IsZero() {
		b.Fatalf("turn of %q: the leader's commit times of its events were not all seen", t.text)
	}
	o.in = append(o.in, r.Received.Sub(input))
	o.out = append(o.out, done.Sub(r.Finished))
	o.inProposed = append(o.inProposed, r.Received.Sub(t.input))
	o.outProposed = append(o.outProposed, t.completed.Sub(r.Finished))
	o.pickup = append(o.pickup, t.started.Sub(input))
	o.start = append(o.start, started.Sub(t.started))
	o.call = append(o.call, r.Received.Sub(started))
}

func (o *overhead) report(b *testing.B) {
	reportMs(b, "overhead-in", o.in)
	reportMs(b, "overhead-out", o.out)
	b.ReportMetric(ms(quantile(o.inProposed, 0.5)), "in-proposed-p50-ms")
	b.ReportMetric(ms(quantile(o.outProposed, 0.5)), "out-proposed-p50-ms")
}

// reportSteps reports the p50 of each step of the overhead, prefixed.
func (o *overhead) reportSteps(b *testing.B, prefix string) {
	for _, st := range []struct {
		name string
		ds   []time.Duration
	}{{"in-pickup", o.pickup}, {"in-start", o.start}, {"in-call", o.call}} {
		b.ReportMetric(ms(quantile(st.ds, 0.5)), prefix+st.name+"-p50-ms")
	}
}

// reportMs reports the p50 and p99 of ds in milliseconds as name-p50-ms
// and name-p99-ms.
func reportMs(b *testing.B, name string, ds []time.Duration) {
	b.Helper()
	if len(ds) == 0 {
		b.Fatalf("no samples for %s", name)
	}
	b.ReportMetric(ms(quantile(ds, 0.50)), name+"-p50-ms")
	b.ReportMetric(ms(quantile(ds, 0.99)), name+"-p99-ms")
}

// quantile is the q-quantile of ds (nearest rank); 1 is the maximum.
func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*q))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// BenchmarkRunnerOverhead measures what the runner adds to a model turn,
// one turn at a time: (in) the input committed → the fake server receives
// the model request; (out) the server has written the stream's last chunk
// → turn.completed committed; p50 and p99 over all nodes,
// the p50 of each step of them (steps-*), and the p50 for the session on
// the leader and for those on followers. One model session runs on each
// node, its client attached through the next node; beside each, an echo
// session (turn length 0) measures the runner alone: input → turn.started
// (echo-start) and input → turn.completed (echo-turn). One op is 50
// rounds; a round is one model turn and one echo turn on each node, one
// after another.
func BenchmarkRunnerOverhead(b *testing.B) {
	const rounds = 50
	srv := modeltest.NewServer()
	b.Cleanup(srv.Close)
	c := runnerBenchFleet(b, srv)
	var models, echoes []*benchSession
	for i, n := range c.Nodes {
		via := c.Nodes[(i+1)%len(c.Nodes)]
		models = append(models, newBenchSession(b, c, benchRuntime, n, via))
		echoes = append(echoes, newBenchSession(b, c, "echo", n, via))
	}
	for _, s := range slices.Concat(models, echoes) {
		if _, err := s.turn("warm-up", 30*time.Second); err != nil {
			b.Fatal(err)
		}
	}
	leader := c.Leader().Name
	var ids []string
	for _, s := range slices.Concat(models, echoes) {
		ids = append(ids, s.id)
	}
	clock := watchCommits(b, c, ids...)
	fclocks := map[string]*commitClock{}
	for _, n := range c.Followers() {
		fclocks[n.Name] = watchApplied(b, n, ids...)
	}
	b.ResetTimer()
	for op := 0; op < b.N; op++ {
		for r := 0; r < rounds; r++ {
			for i := range models {
				for _, s := range []*benchSession{models[i], echoes[i]} {
					if _, err := s.turn(fmt.Sprintf("op%d round%d node%d", op, r, i), 30*time.Second); err != nil {
						b.Fatal(err)
					}
				}
			}
		}
	}
	b.StopTimer()
	clock.Stop()
	for _, k := range fclocks {
		k.Stop()
	}
	if now := c.Leader().Name; now != leader {
		b.Logf("the leader changed during the run (%s, then %s): leader/follower figures are mixed", leader, now)
	}

	reqs := requestsByText(srv)
	var all, onLeader, onFollower overhead
	var echoStart, echoTurn []time.Duration
	for _, s := range models {
		_, turns := journalTurns(b, c, s.id)
		for _, t := range turns {
			if t.text == "warm-up" {
				continue
			}
			all.add(b, clock, s.id, t, reqs)
			if s.on.Name == leader {
				onLeader.add(b, clock, s.id, t, reqs)
			} else {
				onFollower.add(b, clock, s.id, t, reqs)
			}
		}
	}
	for _, s := range echoes {
		_, turns := journalTurns(b, c, s.id)
		for _, t := range turns {
			if t.text == "warm-up" {
				continue
			}
			if t.completions != 1 || t.status != "completed" {
				b.Fatalf("echo turn of %q: %d turn.completed, status %q", t.text, t.completions, t.status)
			}
			in := clock.committed(s.id, t.inputSeq)
			echoStart = append(echoStart, clock.committed(s.id, t.startedSeq).Sub(in))
			echoTurn = append(echoTurn, clock.committed(s.id, t.doneSeq).Sub(in))
		}
	}
	if want := b.N * rounds * len(models); len(all.in) != want || len(echoStart) != want {
		b.Fatalf("%d model and %d echo turns measured, want %d each", len(all.in), len(echoStart), want)
	}
	all.report(b)
	all.reportSteps(b, "steps-")
	// How soon the follower hosting a session applied its inputs, after
	// the leader did (the commit nudge's effect; a runner hint lets the
	// turn start before it).
	var applyLag []time.Duration
	for _, s := range models {
		hosted, ok := fclocks[s.on.Name]
		if !ok {
			continue
		}
		_, turns := journalTurns(b, c, s.id)
		for _, t := range turns {
			if at := hosted.committed(s.id, t.inputSeq); t.text != "warm-up" && !at.IsZero() {
				applyLag = append(applyLag, at.Sub(clock.committed(s.id, t.inputSeq)))
			}
		}
	}
	if len(applyLag) > 0 {
		b.ReportMetric(ms(quantile(applyLag, 0.5)), "follower-applied-p50-ms")
	}
	b.ReportMetric(ms(quantile(onLeader.in, 0.5)), "leader-in-p50-ms")
	b.ReportMetric(ms(quantile(onLeader.out, 0.5)), "leader-out-p50-ms")
	b.ReportMetric(ms(quantile(onFollower.in, 0.5)), "follower-in-p50-ms")
	b.ReportMetric(ms(quantile(onFollower.out, 0.5)), "follower-out-p50-ms")
	reportMs(b, "echo-start", echoStart)
	reportMs(b, "echo-turn", echoTurn)
}

// BenchmarkRunnerStreaming streams a reply of 2,000 tokens/s for 4
// seconds (8,000 one-word deltas) into one model session on a follower
// and reports how it is journaled: for each output event, its commit
// stamp minus the time the server sent the last token it holds (lag,
// p50 and max); for each token, the commit stamp of the event holding it
// minus the time it was sent (token-lag: what a reader waits); output
// events per second of stream; and the rate the server achieved.
func BenchmarkRunnerStreaming(b *testing.B) {
	const (
		rate   = 2000
		tokens = 4 * rate
	)
	srv := modeltest.NewServer()
	b.Cleanup(srv.Close)
	c := runnerBenchFleet(b, srv)
	fs := c.Followers()
	s := newBenchSession(b, c, benchRuntime, fs[0], fs[1])
	if _, err := s.turn("warm-up", 30*time.Second); err != nil {
		b.Fatal(err)
	}
	var pieces []string
	for i := range tokens {
		pieces = append(pieces, fmt.Sprintf("t%d ", i))
	}
	reply := strings.Join(pieces, "")
	var lag, tokenLag []time.Duration
	var events int
	var streamed, sentSpan time.Duration
	var sentTokens int
	b.ResetTimer()
	for op := 0; op < b.N; op++ {
		text := fmt.Sprintf("stream %d", op)
		srv.Script(modeltest.Reply{Text: reply, TokensPerSecond: rate})
		if _, err := s.turn(text, 60*time.Second); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		evs, turns := journalTurns(b, c, s.id)
		var t *benchTurn
		for _, tt := range turns {
			if tt.text == text {
				t = tt
			}
		}
		if t == nil || t.status != "completed" || t.output != reply {
			b.Fatalf("the streamed turn was not journaled whole: %+v", t)
		}
		r := requestsByText(srv)[text]
		if len(r.Sent) != tokens || r.Finished.IsZero() {
			b.Fatalf("the server sent %d of %d tokens (finished %v)", len(r.Sent), tokens, r.Finished)
		}
		// ends[j] is the byte offset just past token j.
		ends := make([]int, tokens)
		off := 0
		for j, p := range pieces {
			off += len(p)
			ends[j] = off
		}
		off, tok := 0, 0
		for _, ev := range evs[t.firstOutput:] {
			if ev.Kind == fsm.KindTurnCompleted {
				break
			}
			if ev.Kind != fsm.KindOutput {
				continue
			}
			at := time.Unix(0, ev.TimeUnixNano)
			off += len(ev.Text)
			last := -1
			// Every token whose last byte is in this event.
			for tok < tokens && ends[tok] <= off {
				tokenLag = append(tokenLag, at.Sub(r.Sent[tok]))
				last = tok
				tok++
			}
			if last < 0 { // the event ends inside a token: it holds part of token tok
				last = tok
			}
			lag = append(lag, at.Sub(r.Sent[last]))
			events++
		}
		streamed += r.Finished.Sub(r.Sent[0])
		sentSpan += r.Sent[tokens-1].Sub(r.Sent[0])
		sentTokens += tokens - 1
		b.StartTimer()
	}
	b.StopTimer()
	b.ReportMetric(ms(quantile(lag, 0.5)), "lag-p50-ms")
	b.ReportMetric(ms(quantile(lag, 1)), "lag-max-ms")
	b.ReportMetric(ms(quantile(tokenLag, 0.5)), "token-lag-p50-ms")
	b.ReportMetric(ms(quantile(tokenLag, 1)), "token-lag-max-ms")
	b.ReportMetric(float64(events)/streamed.Seconds(), "events/s")
	b.ReportMetric(float64(events)/float64(b.N), "events/turn")
	b.ReportMetric(float64(sentTokens)/sentSpan.Seconds(), "server-tokens/s")
}

// BenchmarkRunnerConcurrent runs 50 model sessions at once, spread over
// the three nodes, each with its own client (attached through the next
// node, holding the lease) sending 5 inputs one after another, each as
// soon as the previous turn completed. Every turn must be answered
// exactly once with the server's echo, or the benchmark fails. It reports
// the runner's overhead as BenchmarkRunnerOverhead measures it, and the
// turns per second of the whole fleet. Two models: one that answers at
// once, the 50 clients starting together (reply=instant: the fleet is
// saturated, the overhead is mostly waiting for the CPU), and one that
// streams its four words over a second, the clients' first inputs spread
// over that second (reply=1s: 50 sessions busy as with a real model and
// people who do not all press enter in the same millisecond).
func BenchmarkRunnerConcurrent(b *testing.B) {
	b.Run("reply=instant", func(b *testing.B) { benchConcurrent(b, 0, 0) })
	b.Run("reply=1s", func(b *testing.B) { benchConcurrent(b, 4, time.Second) })
}

// benchConcurrent runs BenchmarkRunnerConcurrent with the server's echo
// streamed at tokensPerSecond (0: at once), client i sending its first
// input i/50 of spread after the start.
func benchConcurrent(b *testing.B, tokensPerSecond float64, spread time.Duration) {
	const (
		sessions = 50
		inputs   = 5
	)
	srv := modeltest.NewServer()
	b.Cleanup(srv.Close)
	srv.SetDefault(func(r modeltest.Request) modeltest.Reply {
		reply := modeltest.Echo(r)
		reply.TokensPerSecond = tokensPerSecond
		return reply
	})
	c := runnerBenchFleet(b, srv)
	ss := make([]*benchSession, sessions)
	for i := range ss {
		ss[i] = newBenchSession(b, c, benchRuntime, c.Nodes[i%len(c.Nodes)], c.Nodes[(i+1)%len(c.Nodes)])
	}
	each := func(f func(i int, s *benchSession) error) {
		var wg sync.WaitGroup
		errs := make([]error, len(ss))
		for i, s := range ss {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = f(i, s)
			}()
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	each(func(i int, s *benchSession) error {
		_, err := s.turn("warm-up", 60*time.Second)
		return err
	})
	var ids []string
	for _, s := range ss {
		ids = append(ids, s.id)
	}
	clock := watchCommits(b, c, ids...)
	var elapsed time.Duration
	b.ResetTimer()
	for op := 0; op < b.N; op++ {
		start := time.Now()
		each(func(i int, s *benchSession) error {
			time.Sleep(spread * time.Duration(i) / sessions)
			for k := range inputs {
				if _, err := s.turn(fmt.Sprintf("op%d session%d input%d", op, i, k), 60*time.Second); err != nil {
					return err
				}
			}
			return nil
		})
		elapsed += time.Since(start)
	}
	b.StopTimer()
	clock.Stop()

	reqs := requestsByText(srv)
	var o overhead
	answered := 0
	for _, s := range ss {
		_, turns := journalTurns(b, c, s.id)
		for _, t := range turns {
			if t.text == "warm-up" {
				continue
			}
			o.add(b, clock, s.id, t, reqs) // fails unless answered once, completed, with the echo
			answered++
		}
	}
	if want := b.N * sessions * inputs; answered != want {
		b.Fatalf("%d turns answered, want %d", answered, want)
	}
	o.report(b)
	b.ReportMetric(float64(answered), "turns")
	b.ReportMetric(float64(answered)/elapsed.Seconds(), "turns/s")
}
