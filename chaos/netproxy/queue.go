package netproxy

import (
	"sync"
	"time"
)

// maxBuffered bounds the bytes read from one direction of a TCP connection
// but not yet written: beyond it the reader stops reading, so TCP flow
// control pushes back on the sender. With latency d a direction carries at
// most maxBuffered per d.
const maxBuffered = 2 << 20

// chunk is one read from a connection, or its end when err is set.
type chunk struct {
	data  []byte
	err   error
	stamp time.Time // when it was read
}

// chunkQueue is the FIFO between the reader and the writer of one direction,
// bounded in bytes rather than in chunks so that many small writes under
// latency are not throttled to a fixed number per delay.
type chunkQueue struct {
	mu    sync.Mutex
	items []chunk
	bytes int           // buffered, including the chunk being written
	ready chan struct{} // capacity 1: a chunk was added
	space chan struct{} // capacity 1: bytes were released
}

func newChunkQueue() *chunkQueue {
	return &chunkQueue{ready: make(chan struct{}, 1), space: make(chan struct{}, 1)}
}

// put appends c once fewer than maxBuffered bytes are buffered. It returns
// false if done first.
func (q *chunkQueue) put(c chunk, done <-chan struct{}) bool {
	for {
		q.mu.Lock()
		if q.bytes < maxBuffered {
			q.items = append(q.items, c)
			q.bytes += len(c.data)
			q.mu.Unlock()
			signal(q.ready)
			return true
		}
		q.mu.Unlock()
		select {
		case <-q.space:
		case <-done:
			return false
		}
	}
}

// get removes the oldest chunk, waiting for one. It returns false if done
// first. The caller calls release(len(c.data)) once it is written.
func (q *chunkQueue) get(done <-chan struct{}) (chunk, bool) {
	for {
		q.mu.Lock()
		if len(q.items) > 0 {
			c := q.items[0]
			q.items[0] = chunk{}
			q.items = q.items[1:]
			q.mu.Unlock()
			return c, true
		}
		q.mu.Unlock()
		select {
		case <-q.ready:
		case <-done:
			return chunk{}, false
		}
	}
}

// release frees n bytes of buffer.
func (q *chunkQueue) release(n int) {
	q.mu.Lock()
	q.bytes -= n
	q.mu.Unlock()
	signal(q.space)
}

// signal wakes the waiter on c, if any, without blocking.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
