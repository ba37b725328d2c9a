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
	"github.com/fak-dev/fak/chaos/history"
)

// watchers is how many watch streams run at once.
const watchers = 2

// watchWorkload opens watch streams on the workload's active sessions, each
// through a random node, from a random address, for a few seconds, and
// records every run of events a stream delivered: the address checker then
// holds each delivered (seq, event) to the final journal, and a stream that
// skipped or repeated an address is a violation itself.
type watchWorkload struct {
	w       *workload
	rec     *history.Recorder
	clients map[string]*nodeClient
	nodes   []string
	seed    int64
}

func (ww *watchWorkload) run(ctx context.Context) {
	var wg sync.WaitGroup
	for i := range watchers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ww.watcher(ctx, i)
		}()
	}
	wg.Wait()
}

func (ww *watchWorkload) watcher(ctx context.Context, id int) {
	r := rand.New(rand.NewPCG(uint64(ww.seed), 0x7761_7463_6800+uint64(id))) // "watch"
	for ctx.Err() == nil {
		slot := ww.w.anyActive(r)
		if slot == nil {
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		}
		op := ww.watch(ctx, r, slot)
		if op.HeadSeq >= op.FromSeq || op.Outcome == history.Fail {
			ww.rec.Add(op)
		}
	}
}

// watch runs one stream and returns what it delivered as one Watch op.
func (ww *watchWorkload) watch(ctx context.Context, r *rand.Rand, slot *sessionSlot) history.Op {
	node := ww.nodes[r.IntN(len(ww.nodes))]
	after := slot.base + uint64(r.IntN(8)) // from near the start: most of the journal is delivered
	op := history.Op{Client: int(ww.w.nextClient.Add(1)), Session: slot.id, Kind: history.Watch, Node: node,
		Call: ww.rec.Now(), FromSeq: after + 1 - slot.base, HeadSeq: after - slot.base}
	sctx, cancel := context.WithTimeout(ctx, time.Duration(1000+r.IntN(3000))*time.Millisecond)
	defer cancel()
	stream, err := ww.clients[node].session.WatchEvents(sctx, connect.NewRequest(&fakv1.WatchEventsRequest{
		SessionId: slot.id, AfterSeq: after,
	}))
	var evs []checker.Event
	if err == nil {
		defer stream.Close()
	recv:
		for stream.Receive() {
			for _, e := range stream.Msg().GetEvents() {
				if want := slot.base + op.HeadSeq + 1; e.GetSeq() != want {
					op.Outcome = history.Fail
					op.Error = fmt.Sprintf("the stream delivered seq %d where seq %d was due", e.GetSeq()-slot.base, want-slot.base)
					break recv
				}
				op.HeadSeq++
				evs = append(evs, checker.Event{Seq: op.HeadSeq, Kind: e.GetKind(), Text: e.GetText(), Value: e.GetKind() == chaosKind})
			}
		}
	}
	op.Return = ww.rec.Now()
	if op.Outcome == "" {
		op.Outcome = history.OK // a stream ends by its deadline or a fault: what it delivered stands
	}
	op.Digest = checker.RangeDigest(evs)
	return op
}

// anyActive returns an active session without counting an op against it.
func (w *workload) anyActive(r *rand.Rand) *sessionSlot {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.active) == 0 {
		return nil
	}
	return w.active[r.IntN(len(w.active))]
}
