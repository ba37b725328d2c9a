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
)

// moveWorkload moves the sessions with clients typing and a runner
// answering — the lease workload's (echo) and the model workload's — between
// nodes while everything else goes on, so the epoch invariants
// (checker.Epochs) are checked under faults.
type moveWorkload struct {
	clients   map[string]*nodeClient
	nodes     []string
	seed      int64
	sessions  func() []string // the candidates now
	requested atomic.Int64
	refused   atomic.Int64

	mu   sync.Mutex
	seen []string // every candidate so far, in order
}

func newMoveWorkload(clients map[string]*nodeClient, nodes []string, seed int64, sessions func() []string) *moveWorkload {
	return &moveWorkload{clients: clients, nodes: nodes, seed: seed, sessions: sessions}
}

func (m *moveWorkload) run(ctx context.Context) {
	r := rand.New(rand.NewPCG(uint64(m.seed), 0x30fe))
	for sleepCtx(ctx, time.Duration(1500+r.IntN(2500))*time.Millisecond) {
		ids := m.candidates()
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

// candidates returns the sessions to move now and remembers them.
func (m *moveWorkload) candidates() []string {
	ids := m.sessions()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, id := range ids {
		if !slices.Contains(m.seen, id) {
			m.seen = append(m.seen, id)
		}
	}
	return ids
}

// journals reads the whole journals of every session that was ever a
// candidate (moved or not).
func (m *moveWorkload) journals(ctx context.Context) (map[string][]checker.JournalEvent, error) {
	m.candidates()
	m.mu.Lock()
	ids := slices.Clone(m.seen)
	m.mu.Unlock()
	return turnJournals(ctx, m.clients, m.nodes, ids)
}
