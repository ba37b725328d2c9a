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
		events, err := readJournal(ctx, m.clients[m.nodes[i%len(m.nodes)]], id)
		if err != nil {
			return nil, err
		}
		evs := make([]checker.JournalEvent, len(events))
		for k, e := range events {
			evs[k] = checker.JournalEvent{Seq: e.Seq, Kind: e.Kind, Text: e.Text, Data: e.Data}
		}
		out[id] = evs
	}
	return out, nil
}
