package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"connectrpc.com/connect"

	fakv1 "github.com/fak-dev/fak/api/gen/fak/v1"
	"github.com/fak-dev/fak/chaos/checker"
)

// boundaryWorkload plays guarded launches whose provider clears its
// conversation again and again: every SessionStart(clear) is delivered by
// three concurrent senders through random nodes, each retrying on unknown
// outcomes, as a flaky hook transport would. Each delivered provider id
// must produce exactly one child session (checker.Boundaries).
type boundaryWorkload struct {
	clients  map[string]*nodeClient
	nodes    []string
	seed     int64
	launches int

	mu     sync.Mutex
	roots  map[string]string // launch → root session
	clears map[string][]string
}

func newBoundaryWorkload(clients map[string]*nodeClient, nodes []string, seed int64) *boundaryWorkload {
	return &boundaryWorkload{clients: clients, nodes: nodes, seed: seed, launches: 2,
		roots: map[string]string{}, clears: map[string][]string{}}
}

func (b *boundaryWorkload) run(ctx context.Context) {
	var wg sync.WaitGroup
	for i := range b.launches {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.launch(ctx, fmt.Sprintf("chaos-%d-launch-%d", b.seed, i), uint64(i))
		}()
	}
	wg.Wait()
}

func (b *boundaryWorkload) launch(ctx context.Context, id string, stream uint64) {
	r := rand.New(rand.NewPCG(uint64(b.seed), 0xb0b0+stream))
	var root string
	for ctx.Err() == nil && root == "" {
		c := b.clients[b.nodes[r.IntN(len(b.nodes))]]
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := c.lifecycle.BindLaunch(cctx, connect.NewRequest(&fakv1.BindLaunchRequest{LaunchId: id, Provider: "chaos", Title: "chaos launch"}))
		cancel()
		if err == nil {
			root = resp.Msg.Session.SessionId
		} else {
			sleepCtx(ctx, 100*time.Millisecond)
		}
	}
	if root == "" {
		return
	}
	b.mu.Lock()
	b.roots[id] = root
	b.mu.Unlock()
	for n := 1; ctx.Err() == nil; n++ {
		pid := fmt.Sprintf("p-%d-%d", b.seed, n)
		var wg sync.WaitGroup
		var landed sync.Once
		ok := false
		for sender := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				sr := rand.New(rand.NewPCG(uint64(b.seed)+uint64(n), uint64(sender)+stream<<8))
				req := &fakv1.ProviderSessionStartRequest{LaunchId: id, Provider: "chaos", Source: "clear",
					ProviderSessionId: pid, RequestId: fmt.Sprintf("req_%s_%s_%d", id, pid, sender)}
				for attempt := 0; attempt < 5 && ctx.Err() == nil; attempt++ {
					c := b.clients[b.nodes[sr.IntN(len(b.nodes))]]
					cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
					_, err := c.lifecycle.ProviderSessionStart(cctx, connect.NewRequest(req))
					cancel()
					if err == nil {
						landed.Do(func() { ok = true })
						return
					}
					sleepCtx(ctx, time.Duration(50+sr.IntN(150))*time.Millisecond)
				}
			}()
		}
		wg.Wait()
		if ok {
			b.mu.Lock()
			b.clears[id] = append(b.clears[id], pid)
			b.mu.Unlock()
		}
		sleepCtx(ctx, time.Duration(200+r.IntN(800))*time.Millisecond)
	}
}

// lineages reads each launch's lineage after the final restart.
func (b *boundaryWorkload) lineages(ctx context.Context) (map[string]checker.LaunchLineage, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[string]checker.LaunchLineage{}
	i := 0
	for launch, root := range b.roots {
		c := b.clients[b.nodes[i%len(b.nodes)]]
		i++
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		resp, err := c.session.GetLineage(cctx, connect.NewRequest(&fakv1.GetLineageRequest{SessionId: root}))
		if err != nil {
			cancel()
			return nil, fmt.Errorf("lineage of launch %s: %w", launch, err)
		}
		dl, err := c.lifecycle.DescribeLaunch(cctx, connect.NewRequest(&fakv1.DescribeLaunchRequest{LaunchId: launch}))
		cancel()
		if err != nil {
			return nil, fmt.Errorf("describe launch %s: %w", launch, err)
		}
		ll := checker.LaunchLineage{Root: root, Default: dl.Msg.DefaultSession, Acked: b.clears[launch]}
		for _, n := range resp.Msg.Nodes {
			ll.Nodes = append(ll.Nodes, checker.LineageNode{
				Session: n.Session.SessionId, Parent: n.ParentSession, Children: n.Children,
				Stopped: n.Session.State == fakv1.SessionState_SESSION_STATE_STOPPED, StopReason: n.Session.StopReason,
				ProviderSessionID: n.Session.ProviderSessionId,
			})
		}
		out[launch] = ll
	}
	return out, nil
}
