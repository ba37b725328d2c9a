package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/chaos/checker"
	"github.com/fak-dev/fak/chaos/history"
)

// chaosKind is the event kind the workload appends; other kinds in a
// journal (session.created) are not the workload's and are skipped.
const chaosKind = "note"

// WorkloadConfig shapes the client load.
type WorkloadConfig struct {
	Workers        int           // concurrent clients (default 12)
	ActiveSessions int           // sessions written at once (default 6)
	OpsPerSession  int           // ops before a session is retired (default 120)
	AttemptTimeout time.Duration // one RPC (default 2s)
	OpTimeout      time.Duration // one logical op incl. retries (default 6s)
}

func (c *WorkloadConfig) defaults() {
	if c.Workers == 0 {
		c.Workers = 12
	}
	if c.ActiveSessions == 0 {
		c.ActiveSessions = 6
	}
	if c.OpsPerSession == 0 {
		c.OpsPerSession = 120
	}
	if c.AttemptTimeout == 0 {
		c.AttemptTimeout = 2 * time.Second
	}
	if c.OpTimeout == 0 {
		c.OpTimeout = 6 * time.Second
	}
}

type sessionSlot struct {
	id   string
	base uint64 // head seq right after creation: workload seqs count from here
	ops  atomic.Int64
}

// workload appends to and reads many sessions through random nodes and
// records every operation.
type workload struct {
	cfg     WorkloadConfig
	rec     *history.Recorder
	clients map[string]*nodeClient
	nodes   []string
	seed    int64
	logf    func(string, ...any)

	nextClient atomic.Int64
	mu         sync.Mutex
	active     []*sessionSlot
	all        []*sessionSlot
	creating   int
}

func newWorkload(cfg WorkloadConfig, rec *history.Recorder, clients map[string]*nodeClient, nodes []string, seed int64, logf func(string, ...any)) *workload {
	cfg.defaults()
	return &workload{cfg: cfg, rec: rec, clients: clients, nodes: nodes, seed: seed, logf: logf}
}

// Sessions returns every session the workload created, with its base seq.
func (w *workload) Sessions() map[string]uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]uint64, len(w.all))
	for _, s := range w.all {
		out[s.id] = s.base
	}
	return out
}

// run drives the load until ctx is done.
func (w *workload) run(ctx context.Context) {
	var wg sync.WaitGroup
	for i := range w.cfg.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.worker(ctx, i)
		}()
	}
	wg.Wait()
}

func (w *workload) worker(ctx context.Context, id int) {
	r := rand.New(rand.NewPCG(uint64(w.seed), uint64(id)))
	client := int(w.nextClient.Add(1))
	heads := map[string]uint64{} // last head this worker saw, per session
	counter := 0
	var retryCAS *sessionSlot // after a lost compare, compare again at the observed head
	for ctx.Err() == nil {
		slot, retrying := retryCAS, retryCAS != nil
		retryCAS = nil
		if retrying {
			w.countOp(slot) // a retry finishes its compare even past the session's share
		} else {
			slot = w.pick(ctx, r)
		}
		if slot == nil {
			continue
		}
		counter++
		op := history.Op{Client: client, Session: slot.id}
		x := r.IntN(100)
		if retrying {
			x = 99 // a compare-and-append
		}
		switch {
		case x < 35:
			op.Kind = history.Read
			w.read(ctx, r, slot, &op)
		default:
			op.Kind = history.Append
			op.Value = fmt.Sprintf("w%d-%d", id, counter)
			op.RequestID = fmt.Sprintf("req_chaos_%d_%d_%d", w.seed, id, counter)
			if x >= 65 {
				op.CAS = true
				op.ExpectedSeq = heads[slot.id]
			}
			w.append(ctx, r, slot, &op)
		}
		if ctx.Err() != nil && op.Outcome != history.OK {
			// Interrupted by the end of the run: keep appends as Info
			// (they may have landed), drop reads.
			if op.Kind == history.Read {
				continue
			}
			op.Outcome = history.Info
		}
		w.rec.Add(op)
		switch {
		case op.Outcome == history.Info:
			client = int(w.nextClient.Add(1)) // the old client may still be "running" that op
		case op.Kind == history.Read && op.Outcome == history.OK:
			heads[slot.id] = op.HeadSeq
		case op.Outcome == history.OK:
			heads[slot.id] = op.Seq
		case op.Mismatch:
			heads[slot.id] = op.HeadSeq
			retryCAS = slot
		}
	}
}

// pick returns an active session, creating replacements for retired ones.
func (w *workload) pick(ctx context.Context, r *rand.Rand) *sessionSlot {
	w.mu.Lock()
	need := w.cfg.ActiveSessions - len(w.active) - w.creating
	if need > 0 {
		w.creating++
	}
	var slot *sessionSlot
	if len(w.active) > 0 {
		slot = w.active[r.IntN(len(w.active))]
	}
	w.mu.Unlock()
	if need > 0 {
		s := w.create(ctx, r)
		w.mu.Lock()
		w.creating--
		if s != nil {
			w.active = append(w.active, s)
			w.all = append(w.all, s)
		}
		w.mu.Unlock()
		return nil
	}
	if slot == nil {
		sleepCtx(ctx, 20*time.Millisecond)
		return nil
	}
	if !w.countOp(slot) {
		return nil
	}
	return slot
}

// countOp counts an operation on slot and retires the session when it
// reaches its share; it reports whether the operation may still go ahead.
func (w *workload) countOp(slot *sessionSlot) bool {
	n := slot.ops.Add(1)
	if n >= int64(w.cfg.OpsPerSession) {
		w.mu.Lock()
		w.active = slices.DeleteFunc(w.active, func(s *sessionSlot) bool { return s == slot })
		w.mu.Unlock()
	}
	return n <= int64(w.cfg.OpsPerSession)
}

// create makes a session, retrying the same request through other nodes
// until it is acknowledged.
func (w *workload) create(ctx context.Context, r *rand.Rand) *sessionSlot {
	reqID := fmt.Sprintf("req_chaos_create_%d_%d", w.seed, r.Uint64())
	for ctx.Err() == nil {
		c := w.clients[w.nodes[r.IntN(len(w.nodes))]]
		actx, cancel := context.WithTimeout(ctx, w.cfg.AttemptTimeout)
		resp, err := c.session.CreateSession(actx, connect.NewRequest(&fakv1.CreateSessionRequest{
			Title: "chaos", Objective: "journal under faults", RequestId: reqID,
		}))
		cancel()
		if err == nil {
			s := resp.Msg.GetSession()
			return &sessionSlot{id: s.GetSessionId(), base: s.GetHeadSeq()}
		}
		sleepCtx(ctx, time.Duration(50+r.IntN(150))*time.Millisecond)
	}
	return nil
}

func (w *workload) append(ctx context.Context, r *rand.Rand, slot *sessionSlot, op *history.Op) {
	op.Call = w.rec.Now()
	deadline := time.Now().Add(w.cfg.OpTimeout)
	req := &fakv1.AppendEventsRequest{
		SessionId: slot.id,
		Events:    []*fakv1.EventInput{{Kind: chaosKind, Text: op.Value}},
		RequestId: op.RequestID,
	}
	if op.CAS {
		expected := slot.base + op.ExpectedSeq
		req.ExpectedSeq = &expected
	}
	for attempt := 0; ; attempt++ {
		// A retry goes to another node: the last one may be down or cut off.
		i := r.IntN(len(w.nodes))
		if attempt > 0 && w.nodes[i] == op.Node {
			i = (i + 1) % len(w.nodes)
		}
		node := w.nodes[i]
		op.Node = node
		actx, cancel := context.WithTimeout(ctx, min(w.cfg.AttemptTimeout, time.Until(deadline)))
		resp, err := w.clients[node].session.AppendEvents(actx, connect.NewRequest(req))
		cancel()
		if err == nil {
			op.Return = w.rec.Now()
			op.Outcome = history.OK
			op.Seq = resp.Msg.GetFirstSeq() - slot.base
			return
		}
		class, info := classify(err)
		op.Error = err.Error()
		switch class {
		case classMismatch:
			op.Return = w.rec.Now()
			op.Outcome = history.Fail
			op.Mismatch = true
			op.HeadSeq = info.GetHeadSeq() - slot.base
			return
		case classRejected:
			op.Return = w.rec.Now()
			op.Outcome = history.Fail
			return
		}
		if time.Until(deadline) < 100*time.Millisecond || ctx.Err() != nil {
			op.Return = w.rec.Now()
			op.Outcome = history.Info
			return
		}
		sleepCtx(ctx, time.Duration(20+r.IntN(80))*time.Millisecond)
	}
}

func (w *workload) read(ctx context.Context, r *rand.Rand, slot *sessionSlot, op *history.Op) {
	node := w.nodes[r.IntN(len(w.nodes))]
	op.Node = node
	op.Call = w.rec.Now()
	actx, cancel := context.WithTimeout(ctx, w.cfg.AttemptTimeout)
	defer cancel()
	evs, err := readEvents(actx, w.clients[node], slot.id, fakv1.ReadConsistency_READ_CONSISTENCY_LINEARIZABLE)
	op.Return = w.rec.Now()
	if err != nil {
		op.Outcome = history.Fail
		op.Error = err.Error()
		return
	}
	j := journalOf(evs, slot.base)
	op.Outcome = history.OK
	op.Values = j.Values()
	for _, e := range j.Events {
		if e.Value {
			op.Seqs = append(op.Seqs, e.Seq)
		}
	}
	op.FromSeq, op.HeadSeq, op.Digest = 1, j.Len(), checker.RangeDigest(j.Events)
}
