package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/chaos/checker"
)

// leaseWorkload exercises the input lease: a few clients attach to the same
// sessions through random nodes and take, steal and release the lease and
// submit input, whether or not they believe they hold it. The journal must
// show one holder at a time and input only from the holder; the clients'
// acknowledgements must match it (checker.Leases).
type leaseWorkload struct {
	clients  map[string]*nodeClient
	nodes    []string
	seed     int64
	workers  int
	sessions int
	logf     func(string, ...any)

	mu   sync.Mutex
	ids  []string
	acts []checker.ActRecord
}

func newLeaseWorkload(clients map[string]*nodeClient, nodes []string, seed int64, logf func(string, ...any)) *leaseWorkload {
	return &leaseWorkload{clients: clients, nodes: nodes, seed: seed, workers: 3, sessions: 2, logf: logf}
}

func (l *leaseWorkload) run(ctx context.Context) {
	r := rand.New(rand.NewPCG(uint64(l.seed), 0x1ea5e))
	w := &workload{cfg: WorkloadConfig{AttemptTimeout: 2 * time.Second}, clients: l.clients, nodes: l.nodes, seed: l.seed}
	for range l.sessions {
		s := w.create(ctx, r)
		if s == nil {
			return
		}
		l.mu.Lock()
		l.ids = append(l.ids, s.id)
		l.mu.Unlock()
	}
	var wg sync.WaitGroup
	for i := range l.workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.worker(ctx, i)
		}()
	}
	wg.Wait()
}

type leaseAttachment struct {
	id       string
	epoch    uint64
	lastSeen time.Time
}

func (l *leaseWorkload) worker(ctx context.Context, id int) {
	r := rand.New(rand.NewPCG(uint64(l.seed), uint64(1000+id)))
	atts := map[string]*leaseAttachment{}
	n := 0
	call := func() (*nodeClient, context.Context, context.CancelFunc) {
		c := l.clients[l.nodes[r.IntN(len(l.nodes))]]
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		return c, cctx, cancel
	}
	for ctx.Err() == nil {
		sleepCtx(ctx, time.Duration(20+r.IntN(80))*time.Millisecond)
		session := l.ids[r.IntN(len(l.ids))]
		at := atts[session]
		if at == nil {
			c, cctx, cancel := call()
			resp, err := c.session.Attach(cctx, connect.NewRequest(&fakv1.AttachRequest{
				SessionId: session, ClientKind: "chaos", ClientName: fmt.Sprintf("worker-%d", id),
				Capabilities: []string{"input.text", "lease.take", "lease.steal", "lease.release"},
			}))
			cancel()
			if err == nil {
				atts[session] = &leaseAttachment{id: resp.Msg.AttachmentId, epoch: resp.Msg.GetDescriptor_().GetSession().GetEpoch(), lastSeen: time.Now()}
			}
			continue
		}
		if time.Since(at.lastSeen) > 5*time.Second {
			c, cctx, cancel := call()
			_, err := c.session.KeepAlive(cctx, connect.NewRequest(&fakv1.KeepAliveRequest{SessionId: session, AttachmentId: at.id}))
			cancel()
			if err == nil {
				at.lastSeen = time.Now()
			} else if reason(err) == "ATTACHMENT_NOT_FOUND" {
				delete(atts, session)
			}
			continue
		}
		var err error
		switch x := r.IntN(100); {
		case x < 30:
			c, cctx, cancel := call()
			_, err = c.session.TakeLease(cctx, connect.NewRequest(&fakv1.TakeLeaseRequest{SessionId: session, AttachmentId: at.id, Steal: r.IntN(4) == 0}))
			cancel()
		case x < 85:
			n++
			err = l.act(ctx, r, session, at, fmt.Sprintf("L%d-%d-%d", l.seed, id, n))
		default:
			c, cctx, cancel := call()
			_, err = c.session.ReleaseLease(cctx, connect.NewRequest(&fakv1.ReleaseLeaseRequest{SessionId: session, AttachmentId: at.id}))
			cancel()
		}
		switch reason(err) {
		case "ATTACHMENT_NOT_FOUND":
			delete(atts, session)
		case "STALE_EPOCH":
			// The session moved: learn its current epoch, as a client would.
			c, cctx, cancel := call()
			if d, derr := c.session.DescribeSession(cctx, connect.NewRequest(&fakv1.DescribeSessionRequest{SessionId: session})); derr == nil {
				at.epoch = d.Msg.GetSession().GetEpoch()
			}
			cancel()
		}
	}
}

// act submits one input, retrying an unknown outcome with the same request
// id through other nodes, and records what the client was told.
func (l *leaseWorkload) act(ctx context.Context, r *rand.Rand, session string, at *leaseAttachment, text string) error {
	rec := checker.ActRecord{Session: session, AttachmentID: at.id, Text: text, Outcome: "info"}
	req := &fakv1.ActRequest{SessionId: session, AttachmentId: at.id, ExpectedEpoch: at.epoch,
		Action: &fakv1.ActRequest_Input{Input: &fakv1.InputText{Text: text}}, RequestId: "req_" + text}
	var err error
	for attempt := 0; attempt < 3 && ctx.Err() == nil; attempt++ {
		c := l.clients[l.nodes[r.IntN(len(l.nodes))]]
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		var resp *connect.Response[fakv1.ActResponse]
		resp, err = c.session.Act(cctx, connect.NewRequest(req))
		cancel()
		if err == nil {
			rec.Outcome, rec.Seq = "ok", resp.Msg.Seq
			break
		}
		if class, info := classify(err); class != classUnknown {
			rec.Outcome, rec.Reason = "fail", info.GetReason()
			break
		}
		if reason := reason(err); reason == "LEASE_NOT_HELD" || reason == "STALE_EPOCH" || reason == "ATTACHMENT_NOT_FOUND" {
			rec.Outcome, rec.Reason = "fail", reason
			break
		}
	}
	l.mu.Lock()
	l.acts = append(l.acts, rec)
	l.mu.Unlock()
	return err
}

func reason(err error) string {
	if err == nil {
		return ""
	}
	_, info := classify(err)
	return info.GetReason()
}

// journals reads the lease sessions' journals after the final restart.
func (l *leaseWorkload) journals(ctx context.Context) (map[string][]checker.LeaseEvent, error) {
	out := map[string][]checker.LeaseEvent{}
	for i, id := range l.Sessions() {
		events, err := readJournal(ctx, l.clients[l.nodes[i%len(l.nodes)]], id)
		if err != nil {
			return nil, err
		}
		var evs []checker.LeaseEvent
		for _, e := range events {
			switch e.Kind {
			case "lease.taken", "lease.released", "input":
				var d struct {
					AttachmentID string `json:"attachment_id"`
					StolenFrom   string `json:"stolen_from"`
					Expires      int64  `json:"expires_unix_nano"`
				}
				_ = json.Unmarshal(e.Data, &d)
				evs = append(evs, checker.LeaseEvent{Seq: e.Seq, Kind: e.Kind, TimeUnixNano: e.TimeUnixNano,
					AttachmentID: d.AttachmentID, StolenFrom: d.StolenFrom, ExpiresUnixNano: d.Expires, Text: e.Text})
			}
		}
		out[id] = evs
	}
	return out, nil
}

// Sessions returns the lease sessions (once created).
func (l *leaseWorkload) Sessions() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.ids...)
}

// Acts returns what clients were told about their inputs.
func (l *leaseWorkload) Acts() []checker.ActRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]checker.ActRecord(nil), l.acts...)
}
