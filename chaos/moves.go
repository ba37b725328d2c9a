package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/chaos/checker"
)

// moveWorkload moves the lease workload's sessions — the ones with clients
// typing and a runner answering — between nodes while everything else goes
// on, so the epoch invariants (checker.Epochs) are checked under faults.
type moveWorkload struct {
	clients   map[string]*nodeClient
	nodes     []string
	seed      int64
	sessions  func() []string
	requested atomic.Int64
	refused   atomic.Int64
}

func newMoveWorkload(clients map[string]*nodeClient, nodes []string, seed int64, sessions func() []string) *moveWorkload {
	return &moveWorkload{clients: clients, nodes: nodes, seed: seed, sessions: sessions}
}

func (m *moveWorkload) run(ctx context.Context) {
	r := rand.New(rand.NewPCG(uint64(m.seed), 0x30fe))
	for sleepCtx(ctx, time.Duration(1500+r.IntN(2500))*time.Millisecond) {
		ids := m.sessions()
		if len(ids) == 0 {
			continue
		}
		id := ids[r.IntN(len(ids))]
		to := ""
		if r.IntN(3) > 0 {
			to = m.nodes[r.IntN(len(m.nodes))]
		}
		c := m.clients[m.nodes[r.IntN(len(m.nodes))]]
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := c.session.MoveSession(cctx, connect.NewRequest(&fakv1.MoveSessionRequest{
			SessionId: id, ToNode: to, SafePointTimeoutMs: 5000,
			RequestId: fmt.Sprintf("req_chaos_move_%d_%d", m.seed, r.Uint64()),
		}))
		cancel()
		if err == nil {
			m.requested.Add(1)
		} else {
			m.refused.Add(1)
		}
	}
}

// journals reads the whole journals of the moved sessions.
func (m *moveWorkload) journals(ctx context.Context) (map[string][]checker.JournalEvent, error) {
	out := map[string][]checker.JournalEvent{}
	for i, id := range m.sessions() {
		c := m.clients[m.nodes[i%len(m.nodes)]]
		var evs []checker.JournalEvent
		from := uint64(1)
		for {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			resp, err := c.session.ReadEvents(cctx, connect.NewRequest(&fakv1.ReadEventsRequest{SessionId: id, FromSeq: from, Limit: 1000}))
			cancel()
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", id, err)
			}
			for _, e := range resp.Msg.Events {
				evs = append(evs, checker.JournalEvent{Seq: e.Seq, Kind: e.Kind, Text: e.Text, Data: e.Data})
			}
			if len(resp.Msg.Events) == 0 || resp.Msg.Events[len(resp.Msg.Events)-1].Seq >= resp.Msg.HeadSeq {
				break
			}
			from = resp.Msg.Events[len(resp.Msg.Events)-1].Seq + 1
		}
		out[id] = evs
	}
	return out, nil
}
