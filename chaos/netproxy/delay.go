package netproxy

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// maxDelayed bounds the packets a delayQueue holds; more are dropped, as a
// router drops when its queue overflows.
const maxDelayed = 4096

// delayQueue runs functions at given times, in time order (ties in push
// order), from a single goroutine. It delivers delayed UDP packets.
type delayQueue struct {
	mu    sync.Mutex
	items delayHeap
	seq   uint64
	wake  chan struct{} // capacity 1
}

func newDelayQueue() *delayQueue {
	return &delayQueue{wake: make(chan struct{}, 1)}
}

// push schedules f at due. It returns false, dropping f, if the queue is
// full.
func (q *delayQueue) push(due time.Time, f func()) bool {
	q.mu.Lock()
	if len(q.items) >= maxDelayed {
		q.mu.Unlock()
		return false
	}
	q.seq++
	heap.Push(&q.items, delayed{due: due, seq: q.seq, f: f})
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return true
}

// run runs due functions until ctx is done; what is pending then is
// discarded.
func (q *delayQueue) run(ctx context.Context) {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		var ready []func()
		var next time.Time
		now := time.Now()
		q.mu.Lock()
		for len(q.items) > 0 && !q.items[0].due.After(now) {
			ready = append(ready, heap.Pop(&q.items).(delayed).f)
		}
		if len(q.items) > 0 {
			next = q.items[0].due
		}
		q.mu.Unlock()
		for _, f := range ready {
			f()
		}
		var fire <-chan time.Time
		if !next.IsZero() {
			timer.Reset(time.Until(next))
			fire = timer.C
		}
		select {
		case <-q.wake:
		case <-fire:
		case <-ctx.Done():
			timer.Stop()
			return
		}
		timer.Stop()
	}
}

type delayed struct {
	due time.Time
	seq uint64
	f   func()
}

type delayHeap []delayed

func (h delayHeap) Len() int { return len(h) }
func (h delayHeap) Less(i, j int) bool {
	if h[i].due.Equal(h[j].due) {
		return h[i].seq < h[j].seq
	}
	return h[i].due.Before(h[j].due)
}
func (h delayHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *delayHeap) Push(x any)   { *h = append(*h, x.(delayed)) }
func (h *delayHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = delayed{}
	*h = old[:len(old)-1]
	return x
}
