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
)

// modelWorkload types into model sessions: a few sessions at a time, each
// placed on a random node with the model runtime, each with one client
// that attaches, holds the input lease (taking it again, stealing if need
// be, after faults) and submits input at a steady pace through random
// nodes. Errors are tolerated and an unknown outcome is fine: what counts
// is the final journal, where every input must be answered exactly once
// and no turn answered by two epochs (checker.Turns). The move workload
// moves these sessions too, and nodes that die have them recovered.
//
// A session retires after inputsPerSession inputs and a new one takes its
// slot, which keeps the context a turn sends the model short in long runs.
type modelWorkload struct {
	clients          map[string]*nodeClient
	nodes            []string
	seed             int64
	slots            int
	inputsPerSession int
	logf             func(string, ...any)

	sent, acked, refused, unknown atomic.Int64

	mu     sync.Mutex
	active []string
	all    []string
}

func newModelWorkload(clients map[string]*nodeClient, nodes []string, seed int64, logf func(string, ...any)) *modelWorkload {
	return &modelWorkload{clients: clients, nodes: nodes, seed: seed, slots: 3, inputsPerSession: 60, logf: logf}
}

func (m *modelWorkload) run(ctx context.Context) {
	var wg sync.WaitGroup
	for slot := range m.slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(m.seed), 0x30de1+uint64(slot)))
			for gen := 1; ctx.Err() == nil; gen++ {
				id := m.create(ctx, r)
				if id == "" {
					return
				}
				m.mu.Lock()
				m.active = append(m.active, id)
				m.all = append(m.all, id)
				m.mu.Unlock()
				m.client(ctx, r, fmt.Sprintf("m%d-%d.%d", m.seed, slot, gen), id)
				m.mu.Lock()
				m.active = slices.DeleteFunc(m.active, func(s string) bool { return s == id })
				m.mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

// create makes a model session on a random node. A transport error is
// retried with the same request id through another node; a refusal (no
// node with the runtime admitted yet, the node down) with a new one.
func (m *modelWorkload) create(ctx context.Context, r *rand.Rand) string {
	reqID := fmt.Sprintf("req_chaos_model_%d_%d", m.seed, r.Uint64())
	for ctx.Err() == nil {
		c := m.clients[m.nodes[r.IntN(len(m.nodes))]]
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := c.session.CreateSession(cctx, connect.NewRequest(&fakv1.CreateSessionRequest{
			Title: "chaos model", Objective: "turns under faults", RequestId: reqID,
			Placement: &fakv1.Placement{RuntimeAdapter: modelRuntime, Node: m.nodes[r.IntN(len(m.nodes))]},
		}))
		cancel()
		if err == nil {
			return resp.Msg.GetSession().GetSessionId()
		}
		if reason(err) != "" {
			reqID = fmt.Sprintf("req_chaos_model_%d_%d", m.seed, r.Uint64())
		}
		sleepCtx(ctx, time.Duration(100+r.IntN(200))*time.Millisecond)
	}
	return ""
}

// client is the one client of a session until it has submitted its share
// of inputs or ctx ends; name makes its request ids unique in the run.
func (m *modelWorkload) client(ctx context.Context, r *rand.Rand, name, session string) {
	var att string
	var epoch uint64
	var leaseAt, keptAt time.Time
	call := func() (*nodeClient, context.Context, context.CancelFunc) {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		return m.clients[m.nodes[r.IntN(len(m.nodes))]], cctx, cancel
	}
	for n := 0; n < m.inputsPerSession && sleepCtx(ctx, time.Duration(250+r.IntN(350))*time.Millisecond); {
		switch {
		case att == "":
			c, cctx, cancel := call()
			resp, err := c.session.Attach(cctx, connect.NewRequest(&fakv1.AttachRequest{
				SessionId: session, ClientKind: "chaos", ClientName: name,
				Capabilities: []string{"input.text", "lease.take", "lease.steal"},
			}))
			cancel()
			if err == nil {
				att, epoch = resp.Msg.AttachmentId, resp.Msg.GetDescriptor_().GetSession().GetEpoch()
				leaseAt, keptAt = time.Time{}, time.Now()
			}
			continue
		case time.Since(leaseAt) > 4*time.Second:
			// Take or renew (a holder's take renews); steal from an
			// attachment of ours that a fault made us forget.
			c, cctx, cancel := call()
			_, err := c.session.TakeLease(cctx, connect.NewRequest(&fakv1.TakeLeaseRequest{SessionId: session, AttachmentId: att, Steal: true}))
			cancel()
			if err == nil {
				leaseAt = time.Now()
			} else if reason(err) == "ATTACHMENT_NOT_FOUND" {
				att = ""
			}
			continue
		case time.Since(keptAt) > 8*time.Second:
			c, cctx, cancel := call()
			_, err := c.session.KeepAlive(cctx, connect.NewRequest(&fakv1.KeepAliveRequest{SessionId: session, AttachmentId: att}))
			cancel()
			if err == nil {
				keptAt = time.Now()
			} else if reason(err) == "ATTACHMENT_NOT_FOUND" {
				att = ""
			}
			continue
		}
		n++
		switch reason(m.act(ctx, r, session, att, epoch, fmt.Sprintf("%s-%d", name, n))) {
		case "ATTACHMENT_NOT_FOUND":
			att = ""
		case "LEASE_NOT_HELD":
			leaseAt = time.Time{}
		case "STALE_EPOCH":
			c, cctx, cancel := call()
			if d, err := c.session.DescribeSession(cctx, connect.NewRequest(&fakv1.DescribeSessionRequest{SessionId: session})); err == nil {
				epoch = d.Msg.GetSession().GetEpoch()
			}
			cancel()
		}
	}
}

// act submits one input, retrying an unknown outcome with the same
// request id through other nodes.
func (m *modelWorkload) act(ctx context.Context, r *rand.Rand, session, att string, epoch uint64, id string) error {
	m.sent.Add(1)
	req := &fakv1.ActRequest{SessionId: session, AttachmentId: att, ExpectedEpoch: epoch,
		Action: &fakv1.ActRequest_Input{Input: &fakv1.InputText{Text: id + ": what comes next?"}}, RequestId: "req_" + id}
	var err error
	for attempt := 0; attempt < 3 && ctx.Err() == nil; attempt++ {
		c := m.clients[m.nodes[r.IntN(len(m.nodes))]]
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err = c.session.Act(cctx, connect.NewRequest(req))
		cancel()
		if err == nil {
			m.acked.Add(1)
			return nil
		}
		if refused(err) {
			m.refused.Add(1)
			return err
		}
	}
	m.unknown.Add(1)
	return err
}

// refused reports whether an Act certainly appended nothing.
func refused(err error) bool {
	if class, _ := classify(err); class != classUnknown {
		return true
	}
	switch reason(err) {
	case "LEASE_NOT_HELD", "STALE_EPOCH", "ATTACHMENT_NOT_FOUND":
		return true
	}
	return false
}

// Sessions is every model session created so far.
func (m *modelWorkload) Sessions() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.all)
}

// Active is the model sessions being typed into now (move candidates).
func (m *modelWorkload) Active() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.active)
}
